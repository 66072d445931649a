-- What replicas need beyond the first schema: a signal when an entry joins
-- the inbox, a per-conversation view of the pending entries, and the tokens
-- behind buttons (confirmations, shares) that any replica may be pressed on.

-- +goose Up

-- PendingOf reads one conversation's entries in flight, in seq order.
CREATE INDEX inbox_pending_conversation ON inbox (conversation, seq) WHERE state < 3;

-- Every new entry notifies the replicas listening on the schema's channel
-- with its conversation key, so the one holding the conversation's lease
-- picks the entry up at once. Notifications are per database, so the
-- channel names the schema (by its hash: a channel name holds 63 bytes):
-- deployments in two schemas do not wake each other.
-- +goose StatementBegin
CREATE FUNCTION flowbridge_inbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flowbridge_inbox_' || md5(TG_TABLE_SCHEMA), NEW.conversation);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER inbox_notify AFTER INSERT ON inbox
    FOR EACH ROW EXECUTE FUNCTION flowbridge_inbox_notify();

-- A token is taken once (DELETE … RETURNING): the second press of a Run
-- button, on whichever replica, finds nothing.
CREATE TABLE tokens (
    id         text COLLATE "C" PRIMARY KEY,
    data       bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX tokens_expires ON tokens (expires_at);

-- +goose Down
DROP TABLE tokens;
DROP TRIGGER inbox_notify ON inbox;
DROP FUNCTION flowbridge_inbox_notify();
DROP INDEX inbox_pending_conversation;
