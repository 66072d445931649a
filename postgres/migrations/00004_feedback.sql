-- Votes on agent replies (store.Feedback): one per user and reply, replaced
-- when the user changes it.

-- +goose Up

-- Keys are compared as bytes (COLLATE "C"), so votes of the same time come
-- back in the order bbolt keeps them.
CREATE TABLE feedback (
    reply        text COLLATE "C" NOT NULL,
    platform     text COLLATE "C" NOT NULL DEFAULT '',
    user_id      text COLLATE "C" NOT NULL,
    user_name    text NOT NULL DEFAULT '',
    conversation text NOT NULL DEFAULT '',
    session      text NOT NULL DEFAULT '',
    agent        text NOT NULL DEFAULT '',
    vote         text NOT NULL,
    at           timestamptz NOT NULL,
    PRIMARY KEY (reply, platform, user_id)
);
CREATE INDEX feedback_at ON feedback (at);

-- +goose Down
DROP TABLE feedback;
