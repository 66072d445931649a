// Package sessionmap is flowbridge's durable state in a bbolt file: conversation sessions, agent choices, last replies, the inbox of platform events and the audit log.
package sessionmap

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/flowbridge/flowbridge/bridge/store"
	"github.com/flowbridge/flowbridge/internal/groupcommit"
)

// The Store is the whole of what the core keeps durably.
var _ store.Store = (*Store)(nil)

// Sentinel errors; every error the Store returns that matches one of them
// wraps it, so callers test with errors.Is.
var (
	// ErrLocked means another process (or another Store in this process)
	// holds the file's lock; bbolt admits a single writer process.
	ErrLocked = errors.New("store is locked by another flowbridge")
	// ErrCorrupt means the file is not a flowbridge store, is damaged, or a
	// single record in it cannot be decoded. Damage to the file itself is a
	// *DamageError, which says the way out.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrClosed means the Store was used after Close.
	ErrClosed = errors.New("store is closed")
	// ErrMissing means the store file is gone while the marker Open leaves
	// beside it (path + ".created") says it existed: starting with a new,
	// empty store would forget every event answered, and answer their
	// redeliveries again. The message says what to do.
	ErrMissing = errors.New("store file is missing")
	// ErrNotRegular means the store path names something that is not a
	// regular file: a directory, a FIFO (whose open would wait for a writer
	// for ever), a device or a socket.
	ErrNotRegular = errors.New("store path is not a regular file")
	// ErrUnappliedJournal means the flowbridge before this one left inbox
	// changes in journal files beside the store, which this one cannot
	// read; the message says what to do.
	ErrUnappliedJournal = errors.New("store has an unapplied journal")
)

// DefaultTimeout is how long Open waits for the file lock when
// Options.Timeout is not set.
const DefaultTimeout = time.Second

// formatVersion is the layout of buckets and records this package writes.
// A file carrying a newer number was written by a newer flowbridge and is
// refused rather than misread; a file of format 1 or 2 is upgraded on open
// (see upgradeDedupe).
//
// Format 3 (this one) keeps platform events in the inbox (see inbox.go).
// Buckets added since (inbox_conv, tokens, adapter_states) did not change
// the number: each is created, and filled from what the file holds, at
// open, and a flowbridge of before that opens the file ignores it (without
// adapter_states, a Discord shard identifies rather than resumes).
// inbox_conv has since moved into memory (convindex.go) and is deleted at
// open: a flowbridge that kept it finds it missing and builds it again.
// Formats 1 and 2 had no inbox but de-duplication entries instead: format 2
// in generations of hashed keys under the bucket dedupe, format 1 by raw ID
// in two buckets, events and events_by_expiry.
const formatVersion = 3

// defaultChunk bounds how many keys one transaction visits in scans and
// deletions, so a long listing or prune never holds a transaction (and, for
// writes, the single writer lock) for long.
const defaultChunk = 1024

// Bucket names. Short, since they are stored once and read on every
// transaction.
var (
	bucketMeta          = []byte("meta")
	bucketSessions      = []byte("sessions")
	bucketAgents        = []byte("agents")
	bucketReplies       = []byte("replies")
	bucketInbox         = []byte("inbox")      // platform key -> entry, see inbox.go
	bucketInboxSeq      = []byte("inbox_seq")  // seq -> key, of entries not yet answered
	bucketInboxDone     = []byte("inbox_done") // updated time, seq -> key, of answered entries
	bucketAudit         = []byte("audit")
	bucketContexts      = []byte("contexts")       // conversation key -> context, see context.go
	bucketFeedback      = []byte("feedback")       // reply, platform, user -> vote, see feedback.go
	bucketSchedules     = []byte("schedules")      // schedule name -> latest run claimed, see schedule.go
	bucketOutbox        = []byte("outbox")         // platform key -> answer not yet posted, see outbox.go
	bucketTokens        = []byte("tokens")         // token ID -> expiry, data: what a button names, see shared.go
	bucketTokensExp     = []byte("tokens_exp")     // expiry, token ID -> nothing, see shared.go
	bucketAdapterStates = []byte("adapter_states") // name -> an adapter's own state, see adapterstate.go

	allBuckets = [][]byte{bucketMeta, bucketSessions, bucketAgents, bucketReplies, bucketInbox, bucketInboxSeq, bucketInboxDone, bucketAudit, bucketContexts, bucketFeedback, bucketSchedules, bucketOutbox, bucketTokens, bucketTokensExp, bucketAdapterStates}

	// bucketInboxConv (conversation, 0, seq -> key, of the entries in
	// flight) is the conversation index as flowbridge kept it in the file
	// before it moved into memory (convindex.go). Open deletes it, so that
	// a stale copy is never left for an older flowbridge to trust: that one
	// builds it again from inbox_seq when it is missing (its initBuckets'
	// convIndexed), so a downgrade still serves PendingOf right.
	bucketInboxConv = []byte("inbox_conv")

	// The de-duplication buckets of formats 1 (events, events_by_expiry)
	// and 2 (dedupe, whose generations are nested buckets), dropped on
	// upgrade.
	oldDedupeBuckets = [][]byte{[]byte("events"), []byte("events_by_expiry"), []byte("dedupe")}
)

// Keys inside bucketMeta. The counters make Stats cheap: counting a million
// keys would walk every leaf page.
var (
	metaFormat   = []byte("format")
	metaSessions = []byte("n_sessions")
	metaInbox    = []byte("n_inbox")
	metaAudit    = []byte("n_audit")
	metaPing     = []byte("ping") // what Ping writes

	// The de-duplication counter of formats 1 and 2, dropped on upgrade.
	metaOldEvents = []byte("n_events")
)

// Options tune Open.
type Options struct {
	// Timeout is how long Open waits for another holder of the file lock to
	// let go before failing with ErrLocked. Zero or negative means
	// DefaultTimeout; Open never waits forever.
	Timeout time.Duration
	// NoSync skips fsync on commit. It trades durability for speed and is
	// meant only for benchmarks and bulk loading.
	NoSync bool
	// Check is the consistency check of an existing file, which Open runs
	// before it writes to the file or serves from it; a damaged file is
	// refused with a *DamageError. CheckFull (the zero value) checks the
	// whole file, however large: a walk of the page tree that makes bbolt's
	// check safe to run (see walker), then bbolt's Tx.Check (keys in order,
	// every page used once or free), then the inbox against its indexes and
	// every inbox record against its checksum (checkInboxTx); about 0.6 s for
	// a 70 MB file. CheckOff skips the check. Damage arising later is still
	// guarded: a read that faults or panics on damage fails with
	// ErrCorrupt, not the process (see Health).
	Check CheckMode
	// ID is the store ID the file must carry (see Identity): set, Open
	// refuses a missing file, whatever the marker says (an emptied or
	// unmounted volume), and a file of another ID (ErrForeign); a file
	// kept by a flowbridge before store IDs is given this one. "" leaves
	// the marker beside the file as the only memory of the store.
	ID string
	// CompactFree is how many bytes of the file must be free (pages freed
	// by expiry and pruning, which bbolt reuses but never gives back, and
	// room bbolt grew the file by ahead of its pages), and at least half
	// of it, for Open to compact the file: bbolt's Compact copies the
	// store into a new file, which replaces the old one (see Compaction).
	// Zero means DefaultCompactFree; negative, never.
	CompactFree int64
	// Compact has Open compact the file however much of it is free (the
	// offline `flowbridge store compact`), unless CompactFree is negative.
	Compact bool
}

// DefaultCompactFree is Options.CompactFree's default: 16 MiB.
const DefaultCompactFree = 16 << 20

// Store is the bbolt-backed state of a flowbridge process. It is safe for
// concurrent use by many goroutines. Every change is a bbolt transaction,
// committed (and, unless NoSync, synced) before the method returns;
// concurrent changes share one commit (see update).
//
// Every method of store.Store takes a context, which a change checks only
// before it starts: a bbolt commit, once begun, cannot be abandoned (and a
// shared one is other callers' too), and a read is short transactions on
// the local file. A context that has ended refuses the change, unwritten.
type Store struct {
	db    *bolt.DB
	file  *os.File // bbolt's descriptor of the file, read by Check
	path  string
	chunk int // keys per transaction in scans and bulk deletes; tests shrink it

	commits *groupcommit.Group[*writeReq]

	// damage is the first damage a read ran into; once set, every call
	// fails with it (see guard).
	damage atomic.Pointer[DamageError]
	// wedged: bbolt's own rollback did not finish after a panic, so its
	// locks may be held and its Close could wait for ever.
	wedged atomic.Bool
	closed atomic.Bool

	// leases are the claims of this process's work (see shared.go).
	leases leases
	// pending is the conversation index of the entries in flight (see
	// convindex.go).
	pending convIndex

	closeOnce sync.Once
	closeErr  error

	idMu sync.Mutex // serialises generation moves (Backup) and guards id
	id   Identity

	compaction Compaction
}

// Stats is a cheap snapshot of the store's size, for metrics and readiness.
type Stats struct {
	// Open is false once the Store is closed or found damaged (Health says
	// which); the other fields are then zero.
	Open bool
	// Sessions is the number of conversation-to-session mappings.
	Sessions int64
	// Inbox is the number of inbox entries, answered ones not yet expired
	// included.
	Inbox int64
	// AuditEntries is the number of audit entries.
	AuditEntries int64
	// FileSize is the size of the data in bytes (the file may be larger).
	FileSize int64
}

// Open opens the store at path, creating it with mode 0600 if it does not
// exist. An existing file readable by group or others has those permission
// bits removed, since it holds who ran what. If another process holds the
// store, Open fails after opts.Timeout with an error wrapping ErrLocked that
// names the path. Before it writes anything, Open checks an existing file's
// consistency as opts.Check says; a damaged file, a file of no bytes (no
// store is ever empty: bbolt would silently make a new one of it) or one
// that is not a flowbridge store gives an error wrapping ErrCorrupt, a
// *DamageError for damage, whose message says the way out. A path that is
// not a regular file is refused at once (ErrNotRegular). Open then checks
// the store's identity against the marker beside it and opts.ID (see
// Identity: ErrMissing, ErrForeign, ErrRestored), moves its generation on,
// and compacts a file mostly free (opts.CompactFree, see Compaction).
func Open(path string, opts Options) (s *Store, err error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if err := refuseNotRegular(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := precheck(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := refuseJournal(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := refuseMissing(path, opts.ID); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}

	// bbolt reads pages through an mmap without bounds checks, so a damaged
	// file can fault or panic inside it. A fault becomes a panic only on a
	// goroutine that asked for it; here, and in every later access (see
	// guard), such panics become ErrCorrupt.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var opened atomic.Pointer[os.File] // bbolt's descriptor: the first file it opens
	var db *bolt.DB
	var tx *bolt.Tx // the latest transaction begun, to tell whether bbolt ended it
	defer func() {
		if r := recover(); r != nil {
			switch {
			case db != nil && (tx == nil || tx.DB() == nil):
				_ = closeAfterPanic(db)
			case opened.Load() != nil:
				// bbolt panicked before handing us the DB, or left a
				// transaction (and its locks) behind: release the file
				// lock and the descriptor at least.
				_ = unlock(opened.Load())
				_ = opened.Load().Close()
			}
			s, err = nil, fmt.Errorf("open store %s: %w", path, damage(path, "opening it panicked: %v", r))
		}
	}()

	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			// Backup opens the file again through this; keep the first.
			f, err := os.OpenFile(name, flag, perm)
			if err == nil {
				opened.CompareAndSwap(nil, f)
			}
			return f, err
		},
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			// The whole message names the path already.
			return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("open store %s: %w", path, classifyOpenError(path, err))
	}
	file := opened.Load()
	if !sameFile(file, path) {
		// Another flowbridge compacted the file (or someone replaced it)
		// while this one waited for the lock of the file it had opened.
		_ = db.Close()
		return nil, fmt.Errorf("%w (%s was replaced while this flowbridge waited for its lock: another flowbridge compacted it, or it was restored; start again)", ErrLocked, path)
	}
	if err := tightenMode(path); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if opts.Check != CheckOff {
		if err := checkOpen(path, file, db); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	if err := initBuckets(db, &tx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	id, err := settleIdentity(db, path, opts.ID)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	var compacted Compaction
	if size, free := freeBytes(db, file); opts.CompactFree >= 0 && (opts.Compact || free >= cmp.Or(opts.CompactFree, DefaultCompactFree) && 2*free >= size) {
		compacted.Before = size
		if compacted.Err = compactFile(db, path); compacted.Err == nil {
			// The compacted file has replaced the one db holds: open it.
			_ = db.Close()
			opts.CompactFree = -1
			s, err := Open(path, opts)
			if err != nil {
				return nil, err
			}
			s.compaction = compacted
			s.compaction.After, _ = freeBytes(s.db, s.file)
			return s, nil
		}
	}
	var pending map[string][]convRef
	if err := db.View(func(t *bolt.Tx) error { tx = t; pending = indexPending(t); return nil }); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s = &Store{db: db, file: file, path: path, chunk: defaultChunk, id: id, compaction: compacted}
	s.pending.set(pending)
	s.commits = groupcommit.New(s.commitBatch, nil)
	return s, nil
}

// closeAfterPanic closes db, itself guarded: a damaged file may make even the
// unmap path misbehave, and Open must return an error, not crash.
func closeAfterPanic(db *bolt.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("close after panic: %v", r)
		}
	}()
	return db.Close()
}

func classifyOpenError(path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrInvalid),
		errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum):
		return damage(path, "not a valid bbolt file: %v", err)
	}
	return err
}

// tightenMode removes group and other permission bits from the file: bbolt
// applies the 0600 mode only when it creates the file.
func tightenMode(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(path, perm&^0o077); err != nil {
			return fmt.Errorf("restrict file mode: %w", err)
		}
	}
	return nil
}

// initBuckets creates missing buckets, checks the format version, upgrades
// a format 1 or 2 file, and rebuilds any missing counter. It sets *cur to
// its transaction.
func initBuckets(db *bolt.DB, cur **bolt.Tx) error {
	return db.Update(func(tx *bolt.Tx) error {
		*cur = tx
		// bbolt follows page ids without bounds checks; a bucket rooted
		// past the end of the file would fault on first use.
		pages := uint64(tx.Size()) / uint64(db.Info().PageSize)
		checkRoot := func(b *bolt.Bucket, name string) error {
			if root := uint64(b.Root()); root >= pages {
				return fmt.Errorf("%w: bucket %s rooted at page %d of %d", ErrCorrupt, name, root, pages)
			}
			return nil
		}
		for _, name := range allBuckets {
			b, err := tx.CreateBucketIfNotExists(name)
			if err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
			if err := checkRoot(b, string(name)); err != nil {
				return err
			}
		}
		if err := moveLegacyAdapterStates(tx); err != nil {
			return fmt.Errorf("move adapter state out of the context records: %w", err)
		}
		if b := tx.Bucket(bucketInboxConv); b != nil {
			// Left by a flowbridge that kept the conversation index in the
			// file (see bucketInboxConv). Deleting a bucket walks its
			// pages, and bbolt follows page ids without bounds checks.
			if err := checkRoot(b, string(bucketInboxConv)); err != nil {
				return err
			}
			if err := tx.DeleteBucket(bucketInboxConv); err != nil {
				return fmt.Errorf("delete bucket %s: %w", bucketInboxConv, err)
			}
		}

		meta := tx.Bucket(bucketMeta)
		v := meta.Get(metaFormat)
		switch version, err := decodeCounter(v); {
		case v == nil: // a new file
		case err != nil:
			return fmt.Errorf("%w: format version: %w", ErrCorrupt, err)
		case version == formatVersion:
		case version == 1 || version == 2:
			if err := upgradeDedupe(tx, checkRoot); err != nil {
				return fmt.Errorf("upgrade from format %d: %w", version, err)
			}
		default:
			return fmt.Errorf("%w: store format %d, this flowbridge reads formats 1 to %d", ErrCorrupt, version, formatVersion)
		}
		if string(v) != string(encodeCounter(formatVersion)) {
			if err := meta.Put(metaFormat, encodeCounter(formatVersion)); err != nil {
				return err
			}
		}

		for _, c := range []struct {
			key   []byte
			count func() int64
		}{
			{metaSessions, func() int64 { return int64(tx.Bucket(bucketSessions).Stats().KeyN) }},
			{metaInbox, func() int64 { return int64(tx.Bucket(bucketInbox).Stats().KeyN) }},
			{metaAudit, func() int64 { return int64(tx.Bucket(bucketAudit).Stats().KeyN) }},
		} {
			if meta.Get(c.key) != nil {
				continue
			}
			if err := meta.Put(c.key, encodeCounter(c.count())); err != nil {
				return err
			}
		}
		return nil
	})
}

// upgradeDedupe turns a format 1 or 2 file into format 3 in tx: the
// de-duplication entries are dropped, and the inbox (created empty by
// initBuckets) takes their place. They are not converted: an entry held
// only a hashed or raw event ID, not the conversation or the event an inbox
// entry needs, and it lived minutes, so at worst a platform retry of an
// event delivered just before the upgrade is handled a second time.
// Sessions, agents, replies and the audit log keep their layout. The freed
// pages are reused; the file does not shrink.
func upgradeDedupe(tx *bolt.Tx, checkRoot func(b *bolt.Bucket, name string) error) error {
	for _, name := range oldDedupeBuckets {
		b := tx.Bucket(name)
		if b == nil {
			continue
		}
		// Deleting a bucket walks its pages, nested buckets included, and
		// bbolt follows page ids without bounds checks.
		if err := checkRoot(b, string(name)); err != nil {
			return err
		}
		err := b.ForEachBucket(func(k []byte) error {
			return checkRoot(b.Bucket(k), fmt.Sprintf("%s/%x", name, k))
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(name); err != nil {
			return fmt.Errorf("delete bucket %s: %w", name, err)
		}
	}
	return tx.Bucket(bucketMeta).Delete(metaOldEvents)
}

// Close closes the store, waiting for running transactions. Later calls
// return the first call's result. A store found damaged closes too, without
// waiting for bbolt when a panic left bbolt's transaction unfinished.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var err error
		s.closed.Store(true)
		if s.wedged.Load() {
			// bbolt's rollback did not finish: its Close would wait for
			// locks nobody will release. Release the file lock and the
			// descriptor ourselves; the mapping goes with the process.
			err = errors.Join(err, unlock(s.file), s.file.Close())
		} else {
			err = errors.Join(err, closeAfterPanic(s.db))
		}
		if err != nil {
			s.closeErr = fmt.Errorf("close store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Health reports whether the store can serve: nil while it is open and
// sound, ErrClosed after Close, and once a read has run into damage (a
// fault or panic inside bbolt, or damage Check found) that damage, a
// *DamageError, for good: every later call fails with it at once rather
// than read the damaged pages again. A damaged store stays so until the
// process opens a restored or new file.
func (s *Store) Health() error {
	if s.closed.Load() {
		return ErrClosed
	}
	if d := s.damage.Load(); d != nil {
		return d
	}
	return nil
}

// guard runs fn, which reads the file through bbolt, so that damage fails
// the call instead of the process: on this goroutine a memory fault becomes
// a panic, and any panic becomes a *DamageError that marks the whole store
// damaged. fn sets *cur to each transaction it begins, so that guard can
// tell whether bbolt's deferred rollback ended it. Once the store is closed
// or damaged, guard fails at once.
func (s *Store) guard(fn func(cur **bolt.Tx) error) (err error) {
	if err := s.Health(); err != nil {
		return err
	}
	var tx *bolt.Tx
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if tx != nil && tx.DB() != nil {
			s.wedged.Store(true)
		}
		err = s.setDamaged(damage(s.path, "a read of the file panicked: %v", r))
	}()
	return fn(&tx)
}

// setDamaged marks the store damaged, unless it is already, and returns the
// damage it is marked with.
func (s *Store) setDamaged(d *DamageError) *DamageError {
	s.damage.CompareAndSwap(nil, d)
	return s.damage.Load()
}

// Path returns the file path the store was opened with.
func (s *Store) Path() string { return s.path }

// Stats returns the store's counters. It costs one read transaction.
func (s *Store) Stats() Stats {
	var st Stats
	err := s.view(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		st = Stats{
			Open:         true,
			Sessions:     counter(meta, metaSessions),
			Inbox:        counter(meta, metaInbox),
			AuditEntries: counter(meta, metaAudit),
			FileSize:     tx.Size(),
		}
		return nil
	})
	if err != nil {
		return Stats{}
	}
	return st
}

// Check runs the full consistency check (as CheckFull on Open) on the open
// store: it returns nil, or a *DamageError listing what is damaged, and then
// marks the store damaged (see Health). bbolt's check is safe beside other
// writers only inside a write transaction, so Check holds the writer lock
// for the whole walk (seconds for a large file): it is meant for the command
// line, not the serving path.
func (s *Store) Check() error {
	var found *DamageError
	err := s.guard(func(cur **bolt.Tx) error {
		tx, err := s.db.Begin(true)
		if err != nil {
			return mapClosed(err)
		}
		*cur = tx
		defer func() { _ = tx.Rollback() }()
		w, err := walkFile(s.file, s.path)
		if err != nil {
			return err
		}
		if len(w.problems) == 0 {
			boltCheck(tx, w)
		}
		if len(w.problems) > 0 {
			found = w.damage(s.path)
		}
		return nil
	})
	if err == nil && found != nil {
		err = s.setDamaged(found)
	}
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	return nil
}

// Ping reports whether the store takes writes now: it commits a small change
// (the time, under a key of its own in the meta bucket), so the commit
// writes a page and syncs as every change does, and fails as they do while
// the disk refuses writes. The bridge pings a store whose write failed, to
// see it recover with no traffic. A bbolt commit cannot be abandoned, so
// ctx is checked only before it starts.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	now := encodeCounter(time.Now().UnixNano())
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaPing, now) }); err != nil {
		return fmt.Errorf("ping store: %w", err)
	}
	return nil
}

// Backup writes a consistent copy of the whole file to w while the store
// keeps serving, and returns the bytes written. The copy is a valid store
// file. It holds one read transaction for the duration of the write, so a
// slow w delays only file growth (bbolt remaps wait for readers), not reads
// or ordinary writes. A store found damaged (see Health) refuses, so that a
// damaged copy never replaces a good backup.
func (s *Store) Backup(w io.Writer) (int64, error) {
	var n int64
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("backup: %w", err)
	}
	// The copy keeps the generation it was taken at; the store moves on,
	// so that the copy, restored, is known for an older one (ErrRestored).
	if err := s.nextGeneration(); err != nil {
		return n, fmt.Errorf("backup written; moving the store's generation past it: %w", err)
	}
	return n, nil
}

// nextGeneration moves the store's generation on, in the file and then in
// the marker.
func (s *Store) nextGeneration() error {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	var g int64
	err := s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		cur, err := decodeCounter(meta.Get(metaGeneration))
		if err != nil {
			cur = s.id.Generation
		}
		g = cur + 1
		return meta.Put(metaGeneration, encodeCounter(g))
	})
	if err != nil {
		return err
	}
	s.id.Generation = g
	return writeMarker(s.path, s.id.ID, g)
}

// view and update run fn in a transaction, under guard, and map bbolt's
// closed-database error to ErrClosed.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	return s.guard(func(cur **bolt.Tx) error {
		return mapClosed(s.db.View(func(tx *bolt.Tx) error {
			*cur = tx
			return fn(tx)
		}))
	})
}

// update runs fn in a write transaction. Concurrent callers share one
// transaction and one sync (group commit, see groupcommit.Group): a lone
// write waits for nothing, and under load every write that arrived while a
// commit ran goes in the next one. fn must set its results afresh on every
// call, since a batch in which another fn failed is rolled back and run
// again without it.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	return s.updateThen(fn, nil)
}

// updateThen is update, with after, when not nil, run once the transaction
// that carried fn has committed, and only if fn's change is in it (see
// writeReq.after).
func (s *Store) updateThen(fn func(*bolt.Tx) error, after func()) error {
	req := &writeReq{fn: fn, after: after}
	s.commits.Do(req)
	return req.err
}

type writeReq struct {
	fn func(*bolt.Tx) error
	// after brings what the Store keeps in memory of the file (the
	// conversation index, convindex.go) in step with fn's change. fn may
	// run more than once (its batch is retried without a request that
	// failed), and a run may be rolled back, so fn only notes its change
	// and after, run once the change is committed, applies it: by the
	// commit's leader, in the batch's order, before the next commit begins.
	after func()
	err   error
}

// commitBatch commits batch in one transaction and sets each request's
// result. A request whose fn fails gets that error alone and the rest are
// retried without it. A panic (see guard) fails every request not yet
// answered with the damage, as does a store closed or damaged already.
func (s *Store) commitBatch(batch []*writeReq) {
	deliver := func(r *writeReq, err error) { r.err = mapClosed(err) }
	err := s.guard(func(cur **bolt.Tx) error {
		for len(batch) > 0 {
			failed := -1
			err := s.db.Update(func(tx *bolt.Tx) error {
				*cur = tx
				for i, r := range batch {
					if err := r.fn(tx); err != nil {
						failed = i
						return err
					}
				}
				return nil
			})
			if failed < 0 {
				if err == nil {
					for _, r := range batch {
						if r.after != nil {
							r.after()
						}
					}
				}
				for _, r := range batch {
					deliver(r, err)
				}
				batch = nil
				break
			}
			deliver(batch[failed], err)
			batch = append(batch[:failed:failed], batch[failed+1:]...)
		}
		return nil
	})
	// batch now holds the requests not answered.
	for _, r := range batch {
		deliver(r, err)
	}
}

func mapClosed(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

func encodeCounter(n int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(n))
}

func decodeCounter(v []byte) (int64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("counter of %d bytes, want 8", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// timeKey encodes t's Unix nanoseconds so that byte order is time order,
// negative times included (the sign bit is flipped). t must lie between
// minNanoTime and maxNanoTime.
func timeKey(t time.Time) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(t.UnixNano())^(1<<63))
	return k
}

func keyTime(k []byte) (time.Time, error) {
	if len(k) < 8 {
		return time.Time{}, errors.New("time key too short")
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(k)^(1<<63))), nil
}

// counter reads a counter, treating a damaged one as zero: it only feeds
// Stats, and Open rebuilds missing ones.
func counter(meta *bolt.Bucket, key []byte) int64 {
	n, err := decodeCounter(meta.Get(key))
	if err != nil {
		return 0
	}
	return n
}

func addCounter(tx *bolt.Tx, key []byte, delta int64) error {
	if delta == 0 {
		return nil
	}
	meta := tx.Bucket(bucketMeta)
	return meta.Put(key, encodeCounter(counter(meta, key)+delta))
}

// checkKey rejects keys bbolt cannot store, with a message that names them.
func checkKey(what, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty %s", what)
	case len(key) > bolt.MaxKeySize:
		return fmt.Errorf("%s of %d bytes exceeds %d", what, len(key), bolt.MaxKeySize)
	}
	return nil
}

// scan visits the keys of bucket from start (inclusive) while keep(key) holds,
// at most s.chunk per read transaction, so a long scan never pins one
// transaction. fn receives bbolt's memory: it must copy what it keeps. fn
// returns false to stop. Entries written between chunks may or may not be
// seen; each chunk alone is consistent.
func (s *Store) scan(bucket, start []byte, keep func(k []byte) bool, fn func(k, v []byte) (bool, error)) error {
	return s.scanTx(bucket, start, keep, func(_ *bolt.Tx, k, v []byte) (bool, error) { return fn(k, v) })
}

// scanTx is scan for visits that read other buckets too: fn also receives
// the read transaction of the chunk.
func (s *Store) scanTx(bucket, start []byte, keep func(k []byte) bool, fn func(tx *bolt.Tx, k, v []byte) (bool, error)) error {
	next := bytes.Clone(start)
	for {
		done := true
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			var k, v []byte
			if next == nil {
				k, v = c.First()
			} else {
				k, v = c.Seek(next)
			}
			for i := 0; k != nil && keep(k); i++ {
				if i == s.chunk {
					next = bytes.Clone(k)
					done = false
					return nil
				}
				more, err := fn(tx, k, v)
				if err != nil || !more {
					return err
				}
				k, v = c.Next()
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// scanBack is scan in reverse: it visits the keys of bucket below end
// (exclusive; nil means from the last key) while keep(key) holds.
func (s *Store) scanBack(bucket, end []byte, keep func(k []byte) bool, fn func(k, v []byte) (bool, error)) error {
	next := bytes.Clone(end)
	for {
		done := true
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			var k, v []byte
			if next == nil {
				k, v = c.Last()
			} else if k, _ = c.Seek(next); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			for i := 0; k != nil && keep(k); i++ {
				if i == s.chunk {
					// The smallest key above k is k+"\x00": bounding the
					// next chunk by it includes k.
					next = append(bytes.Clone(k), 0)
					done = false
					return nil
				}
				more, err := fn(k, v)
				if err != nil || !more {
					return err
				}
				k, v = c.Prev()
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
}

// refuseJournal refuses a store beside which the flowbridge before this one
// (which kept inbox changes in a journal, path.journal.NNNNNN, until it
// applied them to the file) left segments when it stopped without applying
// them: this flowbridge cannot read them, and starting without them would
// forget events that were acknowledged.
func refuseJournal(path string) error {
	segs, err := filepath.Glob(path + ".journal.*")
	if err != nil || len(segs) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s holds changes of the store that the previous flowbridge had not yet applied to it "+
		"(it stopped without a clean shutdown); start that flowbridge version once on this store and stop it with SIGTERM "+
		"(it applies and removes them), then start this one; or, to give those changes up (events received just before "+
		"the stop may be answered twice or not at all), delete %s.journal.*", ErrUnappliedJournal, strings.Join(segs, ", "), path)
}

// refuseNotRegular refuses a path that names anything but a regular file
// (symbolic links followed), before anything opens it: opening a FIFO waits
// for a writer, deaf to signals. A missing path is for Open to create.
func refuseNotRegular(path string) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case info.Mode().IsRegular():
		return nil
	}
	what := "a special file"
	switch m := info.Mode(); {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	}
	return fmt.Errorf("%w: %s is %s; store.path must name a regular file (or nothing yet, for a new store)", ErrNotRegular, path, what)
}

// CreatedMarker is the file Open leaves beside the store file at path, to
// tell a store that was never created from one that was lost, and which
// store, at which generation, it last served (see Identity).
func CreatedMarker(path string) string { return path + ".created" }

// refuseMissing refuses to create the store file anew when its marker says
// it existed, or when want (Options.ID) names the store expected.
func refuseMissing(path, want string) error {
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or a problem bbolt's open reports
	}
	m, err := readMarker(path)
	if err != nil {
		return err
	}
	switch {
	case m.exists:
		return fmt.Errorf("%w: %s is gone, but %s says flowbridge kept its store there; restore it from a backup "+
			"(taken from the admin listener's /backup, or a copy of the file) and delete %[3]s, which refuses a copy "+
			"older than the store it knew; or, to start with a new, empty store "+
			"(sessions, inbox and audit log start over, and events answered before may be answered again), delete %[3]s",
			ErrMissing, path, CreatedMarker(path))
	case want != "":
		return fmt.Errorf("%w: %s does not exist, and neither does %s, but store.id in the config names store %s: "+
			"an emptied or unmounted volume? Mount it, or restore the store from a backup; or, to start with a new, "+
			"empty store (sessions, inbox and audit log start over, and events answered before may be answered again), "+
			"remove store.id from the config, start, and set it to the new store's ID the log shows",
			ErrMissing, path, CreatedMarker(path), want)
	}
	return nil // a first start
}
