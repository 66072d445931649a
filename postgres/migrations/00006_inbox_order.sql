-- The platform's order of a conversation's events (a Slack ts in
-- microseconds, a Discord snowflake): replicas receive one conversation's
-- messages at once, and record them in either order, so the holder of its
-- lease runs them in this one. Entries recorded before it sort first.

-- +goose Up
ALTER TABLE inbox ADD COLUMN ord bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE inbox DROP COLUMN ord;
