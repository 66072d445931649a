// Package sessionmap is flowbridge's durable state in a bbolt file: conversation sessions, agent choices, last replies, the inbox of platform events and the audit log.
package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/flowbridge/flowbridge/bridge/store"
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
	// single record in it cannot be decoded.
	ErrCorrupt = errors.New("store is corrupt")
	// ErrClosed means the Store was used after Close.
	ErrClosed = errors.New("store is closed")
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
	bucketMeta      = []byte("meta")
	bucketSessions  = []byte("sessions")
	bucketAgents    = []byte("agents")
	bucketReplies   = []byte("replies")
	bucketInbox     = []byte("inbox")      // platform key -> entry, see inbox.go
	bucketInboxSeq  = []byte("inbox_seq")  // seq -> key, of entries not yet answered
	bucketInboxDone = []byte("inbox_done") // updated time, seq -> key, of answered entries
	bucketAudit     = []byte("audit")

	allBuckets = [][]byte{bucketMeta, bucketSessions, bucketAgents, bucketReplies, bucketInbox, bucketInboxSeq, bucketInboxDone, bucketAudit}

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
}

// Store is the bbolt-backed state of a flowbridge process. It is safe for
// concurrent use by many goroutines. Every write is its own short
// transaction, committed (and, unless NoSync, fsynced) before the method
// returns.
type Store struct {
	db    *bolt.DB
	path  string
	chunk int // keys per transaction in scans and bulk deletes; tests shrink it

	commits committer

	closeOnce sync.Once
	closeErr  error
}

// Stats is a cheap snapshot of the store's size, for metrics and readiness.
type Stats struct {
	// Open is false once the Store is closed; the other fields are then zero.
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
// names the path; a file that is not a flowbridge store or is damaged gives
// an error wrapping ErrCorrupt. The check on open is cheap (meta pages,
// bounds, buckets); Check walks the whole file.
func Open(path string, opts Options) (s *Store, err error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if err := precheck(path); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}

	// bbolt reads pages through an mmap without bounds checks, so a damaged
	// file can fault or panic inside it. A fault becomes a panic only on a
	// goroutine that asked for it, and only here, where the file is first
	// read, do we turn such panics into ErrCorrupt.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var file *os.File
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = closeAfterPanic(db)
			} else if file != nil {
				// bbolt panicked before handing us the DB: at least
				// release the lock by closing the descriptor.
				_ = file.Close()
			}
			s, err = nil, fmt.Errorf("open store %s: %w: %v", path, ErrCorrupt, r)
		}
	}()

	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      timeout,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			// The whole message names the path already.
			return nil, fmt.Errorf("%w (%s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("open store %s: %w", path, classifyOpenError(err))
	}
	if err := tightenMode(path); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := initBuckets(db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{db: db, path: path, chunk: defaultChunk}, nil
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

func classifyOpenError(err error) error {
	switch {
	case errors.Is(err, berrors.ErrInvalid),
		errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum):
		return fmt.Errorf("%w: not a valid bbolt file: %w", ErrCorrupt, err)
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
// a format 1 or 2 file, and rebuilds any missing counter.
func initBuckets(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
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
// return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Path returns the file path the store was opened with.
func (s *Store) Path() string { return s.path }

// Stats returns the store's counters. It costs one read transaction.
func (s *Store) Stats() Stats {
	var st Stats
	err := s.db.View(func(tx *bolt.Tx) error {
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

// Check walks every page of the file and reports inconsistencies, joined.
// bbolt's check is safe beside other writers only inside a write
// transaction, so Check holds the writer lock for the whole walk (seconds
// for a large file): it is meant for the command line, not the serving
// path.
func (s *Store) Check() error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return fmt.Errorf("check: %w", mapClosed(err))
	}
	defer func() { _ = tx.Rollback() }()
	var errs []error
	for err := range tx.Check() {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("check %s: %w: %w", s.path, ErrCorrupt, errors.Join(errs...))
	}
	return nil
}

// Backup writes a consistent copy of the whole file to w while the store
// keeps serving, and returns the bytes written. The copy is a valid store
// file. It holds one read transaction for the duration of the write, so a
// slow w delays only file growth (bbolt remaps wait for readers), not reads
// or ordinary writes.
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
	return n, nil
}

// view and update run fn in a transaction and map bbolt's closed-database
// error to ErrClosed.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	return mapClosed(s.db.View(fn))
}

// update runs fn in a write transaction. Concurrent callers share one
// transaction and one fsync (group commit): the first caller commits at once
// and, while it does, later callers queue; the next of them then commits
// everything queued in one transaction. A lone write waits for nothing,
// and under load a few hundred writes cost one sync instead of one each.
// fn must set its results afresh on every call, since a batch in which
// another fn failed is rolled back and run again without it.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	req := &writeReq{fn: fn, done: make(chan bool, 1)}
	c := &s.commits
	c.mu.Lock()
	c.queue = append(c.queue, req)
	if c.leading {
		c.mu.Unlock()
		if lead := <-req.done; !lead {
			return req.err
		}
	} else {
		c.leading = true
		c.mu.Unlock()
	}

	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	defer func() {
		// Pass the lead on even if a write panicked, so no caller waits
		// forever; the panic itself goes on up this goroutine.
		c.mu.Lock()
		if len(c.queue) > 0 {
			c.queue[0].done <- true
		} else {
			c.leading = false
		}
		c.mu.Unlock()
	}()
	s.commitBatch(req, batch)
	return req.err
}

// committer queues writes for group commit.
type committer struct {
	mu      sync.Mutex
	queue   []*writeReq
	leading bool // a caller is committing; new writes queue
}

type writeReq struct {
	fn   func(*bolt.Tx) error
	err  error
	done chan bool // false: err is set; true: commit the queue
}

// commitBatch commits batch in one transaction and delivers each request's
// result (to the others through done; the leader, which runs it, reads its
// own err). A request whose fn fails gets that error alone and the rest are
// retried without it.
func (s *Store) commitBatch(leader *writeReq, batch []*writeReq) {
	deliver := func(r *writeReq, err error) {
		r.err = mapClosed(err)
		if r != leader {
			r.done <- false
		}
	}
	panicked := true
	defer func() {
		if panicked {
			for _, r := range batch {
				deliver(r, errors.New("store write panicked"))
			}
		}
	}()
	for len(batch) > 0 {
		failed := -1
		err := s.db.Update(func(tx *bolt.Tx) error {
			for i, r := range batch {
				if err := r.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, r := range batch {
				deliver(r, err)
			}
			break
		}
		deliver(batch[failed], err)
		batch = append(batch[:failed:failed], batch[failed+1:]...)
	}
	panicked = false
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
