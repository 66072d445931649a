-- Adapters' own state (a Discord shard's gateway session, the bot's
-- IDENTIFY count): store.AdapterStates, a record of its own with a version
-- for its compare-and-set. It was kept in conversation_contexts under keys
-- starting "adapter-state/", which move here (the name is the rest of the
-- key) and leave conversation_contexts.

-- +goose Up

CREATE TABLE adapter_states (
    name    text COLLATE "C" PRIMARY KEY,
    text    text NOT NULL,
    version bigint NOT NULL,
    updated timestamptz NOT NULL
);

INSERT INTO adapter_states (name, text, version, updated)
    SELECT substr(conversation, length('adapter-state/') + 1), text, 1, updated
    FROM conversation_contexts
    WHERE conversation LIKE 'adapter-state/_%';

DELETE FROM conversation_contexts WHERE conversation LIKE 'adapter-state/%';

-- +goose Down

INSERT INTO conversation_contexts (conversation, text, told, updated)
    SELECT 'adapter-state/' || name, text, false, updated FROM adapter_states WHERE text <> ''
    ON CONFLICT (conversation) DO NOTHING;

DROP TABLE adapter_states;
