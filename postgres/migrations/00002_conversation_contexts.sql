-- What the user of a conversation has open beside it (Slack's assistant
-- thread context), in a sentence for the agent: store.Contexts.

-- +goose Up

CREATE TABLE conversation_contexts (
    conversation text COLLATE "C" PRIMARY KEY,
    text         text NOT NULL,
    told         boolean NOT NULL,
    updated      timestamptz NOT NULL
);

-- +goose Down

DROP TABLE conversation_contexts;
