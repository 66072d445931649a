// Package postgres is flowbridge's durable state in PostgreSQL, shared by several replicas: conversation sessions, agent choices, last replies, the inbox, the audit log and conversation leases.
//
// # Tables
//
// One table per record of bridge/store: sessions, conversation_agents,
// last_replies, inbox, audit, conversation_contexts, adapter_states; and
// leases and tokens, which replicas share. They live in the first schema of the connection's
// search_path, so a deployment that shares a database gives flowbridge a
// schema of its own through the DSN
// (postgres://…/db?search_path=flowbridge). Keys are text compared as bytes
// (COLLATE "C"), so ListSessions returns the order bbolt does and a prefix is
// a range of the primary key. Times are timestamptz, kept to the
// microsecond; a zero session time is NULL.
//
// Every method of store.Store is one statement, or one transaction where
// several writes go together (PutTurns), so each is atomic across replicas:
//   - Receive is INSERT … ON CONFLICT (key) DO NOTHING: of any number of
//     replicas receiving one platform event, exactly one is told it is new.
//     Seq is an identity column, which only grows. Receives under way at
//     once in one process share one statement and so one commit (group
//     commit, one batch at a time); a batch inserts its rows in key order,
//     so batches of two replicas never wait on each other in a cycle.
//   - A turn (Finish's or PutTurns') is one UPDATE of the session WHERE key
//     and session_uuid still match, and the reply is written only for the
//     row it updated: a reset or a newer session since is left alone. Finish
//     moves the entry and applies its turn in one statement.
//   - ExpireInbox and PruneAudit delete in batches of bounded size, so a
//     backlog never holds many row locks for long; ExpireInbox skips rows
//     another replica has locked.
//
// Every method runs its statements under the caller's context, bounded by
// Options.Timeout as well, so a call made under a context without a
// deadline still ends. Receive is the exception: Receives under way at once
// share one statement, which no one caller's context may cut off for the
// others, so it runs under Options.Timeout alone, and ctx is checked before
// the entry joins it.
//
// # Migrations
//
// The schema is versioned with goose: SQL files embedded in the binary
// (migrations/*.sql), recorded in the table flowbridge_migrations. Open
// applies those the database lacks, unless Options.NoMigrate; Migrate and
// MigrationStatus serve a migrate command. Replicas starting at once
// serialize on a PostgreSQL advisory lock keyed by the schema, held on one
// connection while goose runs on another: the first applies the migrations,
// the others then find nothing to do. The lock is the session's, so a
// replica that dies while migrating lets go of it with its connection. A
// database migrated by a newer flowbridge than this one is refused
// (ErrNewerSchema) rather than misread.
//
// # Leases
//
// Messages of one conversation reach the workspace one at a time, in order;
// with replicas, one replica at a time runs a conversation. It holds a lease
// on the conversation: a row of leases (conversation, holder, expires_at).
// Claim takes or renews it in one statement,
//
//	INSERT INTO leases … VALUES ($1, $2, now() + ttl)
//	ON CONFLICT (conversation) DO UPDATE SET holder = $2, expires_at = now() + ttl
//	WHERE leases.expires_at < now() OR leases.holder = $2
//
// so a lease is taken when it is free, expired or already the caller's, and
// the row lock of the upsert makes two claimants of one conversation see
// each other: one wins. Expiry is judged by the database's clock alone, so
// replicas' clocks do not matter. A holder renews well within the ttl while
// it works (Renew: one statement for all of a replica's leases) and
// Releases when done; a replica that dies loses its leases when they
// expire, and another takes them over. A flow run or button press, which
// runs beside its conversation's order, is leased under its entry's name
// (store.EntryLease).
//
// The holder of a conversation reads its work with PendingOf. A trigger on
// inbox inserts notifies the conversation key on a channel named after the
// schema, which Listen hears, so the holder learns at once of an entry
// another replica recorded; Unleased finds the entries whose replica died
// (no live lease of their conversation or their own), for a periodic sweep.
//
// # Tokens
//
// What a button names (a flow run waiting for its Run, a result that may be
// shared) is a row of tokens, taken once with DELETE … RETURNING, so a press
// that reaches any replica finds it, and only one press acts on it.
package postgres
