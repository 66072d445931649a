-- The first schema of the PostgreSQL store: the records of bridge/store
-- (sessions, agent choices, last replies, the inbox, the audit log) and the
-- conversation leases of replicas. See the package documentation.

-- +goose Up

-- Keys are compared as bytes (COLLATE "C"): ListSessions returns key order
-- as bbolt does, and a prefix is a range of the primary key's index.
CREATE TABLE sessions (
    key          text COLLATE "C" PRIMARY KEY,
    agent        text NOT NULL,
    session_uuid text NOT NULL,
    created      timestamptz, -- NULL: the zero time
    last_used    timestamptz
);

CREATE TABLE conversation_agents (
    conversation text COLLATE "C" PRIMARY KEY,
    agent        text NOT NULL
);

CREATE TABLE last_replies (
    conversation text COLLATE "C" PRIMARY KEY,
    reply        text NOT NULL
);

-- state: 1 received, 2 sent, 3 answered (store.InboxState). seq only grows:
-- an identity never hands out a number twice, expired entries included.
CREATE TABLE inbox (
    key          text COLLATE "C" PRIMARY KEY,
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    conversation text NOT NULL,
    state        smallint NOT NULL CHECK (state BETWEEN 1 AND 3),
    event        bytea, -- dropped once answered: only Pending returns events
    reply        text NOT NULL DEFAULT '',
    received     timestamptz NOT NULL,
    updated      timestamptz NOT NULL
);
-- Pending scans the few entries in flight in seq order, ExpireInbox the
-- answered ones in the order they expire.
CREATE INDEX inbox_pending ON inbox (seq) WHERE state < 3;
CREATE INDEX inbox_answered ON inbox (updated) WHERE state = 3;

-- id keeps the order of entries appended at the same time.
CREATE TABLE audit (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at           timestamptz NOT NULL,
    platform     text NOT NULL DEFAULT '',
    user_id      text NOT NULL DEFAULT '',
    user_name    text NOT NULL DEFAULT '',
    channel      text NOT NULL DEFAULT '',
    conversation text NOT NULL DEFAULT '',
    flow         text NOT NULL DEFAULT '',
    params       json, -- json, not jsonb: jsonb refuses \u0000
    outcome      text NOT NULL DEFAULT '',
    detail       text NOT NULL DEFAULT '',
    duration_ns  bigint NOT NULL DEFAULT 0
);
CREATE INDEX audit_at ON audit (at, id);

-- One replica at a time runs a conversation: the one whose lease has not
-- expired. Times are the database's clock, never a replica's.
CREATE TABLE leases (
    conversation text COLLATE "C" PRIMARY KEY,
    holder       text NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- +goose Down
DROP TABLE leases;
DROP TABLE audit;
DROP TABLE inbox;
DROP TABLE last_replies;
DROP TABLE conversation_agents;
DROP TABLE sessions;
