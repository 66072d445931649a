-- Traceable feedback: a vote records the message it rates (its platform
-- reference and permalink) and what the answer's record says of it (the
-- message it answered, its beginning); feedback_answers holds those
-- records, one per reply offered for rating, pruned with the audit.

-- +goose Up
ALTER TABLE feedback
    ADD COLUMN message text NOT NULL DEFAULT '',
    ADD COLUMN link    text NOT NULL DEFAULT '',
    ADD COLUMN turn    text NOT NULL DEFAULT '',
    ADD COLUMN excerpt text NOT NULL DEFAULT '';

CREATE TABLE feedback_answers (
    platform     text COLLATE "C" NOT NULL DEFAULT '',
    reply        text COLLATE "C" NOT NULL,
    conversation text NOT NULL DEFAULT '',
    agent        text NOT NULL DEFAULT '',
    session      text NOT NULL DEFAULT '',
    turn         text NOT NULL DEFAULT '',
    excerpt      text NOT NULL DEFAULT '',
    at           timestamptz NOT NULL,
    PRIMARY KEY (platform, reply)
);
CREATE INDEX feedback_answers_at ON feedback_answers (at);

-- +goose Down
DROP TABLE feedback_answers;
ALTER TABLE feedback
    DROP COLUMN message,
    DROP COLUMN link,
    DROP COLUMN turn,
    DROP COLUMN excerpt;
