-- The latest run claimed of each [[schedules]] entry (store.Schedules):
-- replicas claim a run by moving last_run forward, which only one of them
-- can do for a given time.

-- +goose Up
CREATE TABLE schedule_runs (
    schedule text COLLATE "C" PRIMARY KEY,
    last_run timestamptz NOT NULL
);

-- +goose Down
DROP TABLE schedule_runs;
