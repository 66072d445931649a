package sessionmap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The journal is an append-only log beside the bbolt file that makes the
// inbox's state changes durable at the cost of one sequential write and one
// fdatasync per batch, where a bbolt commit costs a page-tree rewrite and two
// fdatasyncs. A checkpoint later applies what the journal holds to the bbolt
// file in one transaction and drops the segments it covered (hot.go).
//
// A segment is the file <store path>.journal.<n>, n counting up from 1. It is
// a sequence of frames:
//
//	length   uint32 little-endian, of the payload
//	crc      uint32 little-endian, CRC-32C of the payload
//	payload
//
// A crash can leave a torn frame only at a segment's end, since frames are
// written in order and a segment is only ever appended to: reading stops at
// the first frame whose length or checksum does not hold.
const (
	journalSuffix   = ".journal."
	frameHeader     = 8
	maxJournalFrame = 64 << 20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errJournalBroken is a journal whose last write or sync failed in a way
// that leaves the segment's end unknown: nothing more is written to it.
var errJournalBroken = errors.New("journal unusable after a failed write")

// journal appends frames. Each append writes its frame at once, in order
// (into the kernel's cache: a crash of the process cannot lose it), and a
// durable append then waits for an fdatasync covering it: one of the
// waiters syncs everything written so far, so appends made during a sync
// share the next one (group commit). The sync is made by a waiter, not by
// a goroutine of its own, which would add a hop through the scheduler to
// every sync: on a busy machine that costs more than the sync.
type journal struct {
	base      string // the store's path; segments are base + journalSuffix + n
	noSync    bool
	allLazy   bool          // every frame is lazy (Options.SyncInterval)
	lazyEvery time.Duration // how soon a lazy frame is synced

	mu        sync.Mutex // guards the fields below, and writes to f
	f         *os.File
	seg       int   // the segment being written
	off       int64 // its end
	allocated int64 // bytes of it allocated ahead (segmentChunk)
	broken    error
	stopped   bool
	lazyArmed bool       // a timer will sync lazy frames
	lazy      []lazyMark // lazy frames, oldest first, until a sync is seen to cover them

	sync       func(*os.File) error // fdatasync; tests stand in for the disk
	syncMu     sync.Mutex           // guards synced*, syncing and advanced
	syncing    bool                 // a waiter of syncTo is syncing, with syncMu released
	syncedSeg  int
	syncedOff  int64
	syncs      int           // how many syncs syncTo made (tests count them)
	advanced   chan struct{} // closed, and replaced, when synced* move on or the journal breaks or stops
	lazyTimers sync.WaitGroup
}

// lazySync bounds how long a lazy frame (one nothing outside waits on) waits
// for an fdatasync, given by a later durable append or by this timer.
const lazySync = 5 * time.Millisecond

// segmentChunk is how far ahead a segment's space is allocated: an
// fdatasync that need not also commit the file's new size to the
// filesystem's journal costs a quarter less CPU.
const segmentChunk = 8 << 20

// openJournal starts a journal writing to segment seg (which must not exist).
// Every frame is lazy when syncEvery is more than zero, and synced within it.
func openJournal(base string, seg int, noSync bool, syncEvery time.Duration) (*journal, error) {
	f, err := createSegment(base, seg)
	if err != nil {
		return nil, err
	}
	j := &journal{base: base, noSync: noSync, f: f, seg: seg, syncedSeg: seg, lazyEvery: lazySync, allLazy: syncEvery > 0,
		sync: fdatasync, advanced: make(chan struct{})}
	if syncEvery > 0 {
		j.lazyEvery = syncEvery
	}
	return j, nil
}

func createSegment(base string, seg int) (*os.File, error) {
	f, err := os.OpenFile(segmentPath(base, seg), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	// The new name must survive a crash for its frames to be found.
	if err := syncDir(filepath.Dir(base)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	return f, nil
}

func segmentPath(base string, seg int) string {
	return base + journalSuffix + fmt.Sprintf("%06d", seg)
}

// segments lists the journal segments of base, oldest first.
func segments(base string) ([]int, error) {
	names, err := filepath.Glob(base + journalSuffix + "*")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, name := range names {
		n, err := strconv.Atoi(strings.TrimPrefix(name, base+journalSuffix))
		if err != nil || n <= 0 {
			continue // not ours
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// frame returns payload framed for a segment.
func frame(payload []byte) []byte {
	out := make([]byte, frameHeader, frameHeader+len(payload))
	binary.LittleEndian.PutUint32(out, uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[4:], crc32.Checksum(payload, crcTable))
	return append(out, payload...)
}

// append writes a framed payload at the end of the segment and returns
// where that end now is, for syncTo. A lazy frame (one nothing outside
// waits on) is synced within lazySync without anyone asking. After a failed
// write or sync, or once stopped, the journal refuses.
func (j *journal) append(fr []byte, lazy bool) (seg int, end int64, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usableLocked(); err != nil {
		return 0, 0, err
	}
	j.allocateLocked(int64(len(fr)))
	if _, err := j.f.WriteAt(fr, j.off); err != nil {
		// Cut the segment back to its last whole frame, or give up on it:
		// a frame after a torn one would never be read back.
		if terr := j.f.Truncate(j.off); terr != nil {
			j.broken = fmt.Errorf("%w: %w", errJournalBroken, err)
		}
		j.allocated = j.off
		return 0, 0, fmt.Errorf("journal write: %w", err)
	}
	j.off += int64(len(fr))
	if lazy {
		j.lazy = append(j.lazy, lazyMark{seg: j.seg, end: j.off, due: time.Now().Add(j.lazyEvery)})
		if !j.lazyArmed {
			j.lazyArmed = true
			j.lazyTimers.Add(1)
			time.AfterFunc(j.lazyEvery, j.lazyFire)
		}
	}
	return j.seg, j.off, nil
}

// lazyMark is a lazy frame not known to be synced: where it ends, and by
// when it must be.
type lazyMark struct {
	seg int
	end int64
	due time.Time
}

// lazyFire syncs the lazy frames whose time is up, unless a sync since
// covered them (as the durable appends made meanwhile usually do, so that
// under load the timer seldom syncs at all), and waits again for the
// oldest left.
func (j *journal) lazyFire() {
	defer j.lazyTimers.Done()
	for {
		j.syncMu.Lock()
		syncedSeg, syncedOff := j.syncedSeg, j.syncedOff
		j.syncMu.Unlock()
		j.mu.Lock()
		n := 0
		for n < len(j.lazy) && (j.lazy[n].seg < syncedSeg || (j.lazy[n].seg == syncedSeg && j.lazy[n].end <= syncedOff)) {
			n++
		}
		j.lazy = j.lazy[n:]
		if len(j.lazy) == 0 {
			j.lazy = nil
			j.lazyArmed = false
			j.mu.Unlock()
			return
		}
		head, last := j.lazy[0], j.lazy[len(j.lazy)-1]
		if wait := time.Until(head.due); wait > 0 && !j.stopped {
			j.lazyTimers.Add(1)
			time.AfterFunc(wait, j.lazyFire)
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		if err := j.syncTo(last.seg, last.end); err != nil {
			// The journal is broken: the next append says so.
			j.mu.Lock()
			j.lazy, j.lazyArmed = nil, false
			j.mu.Unlock()
			return
		}
	}
}

func (j *journal) usableLocked() error {
	switch {
	case j.stopped:
		return ErrClosed
	case j.broken != nil:
		return j.broken
	}
	return nil
}

// syncTo returns once segment seg is synced up to end at least. The first
// waiter to find no sync under way leads: it syncs everything written so
// far with syncMu released, so that the others can check, wait and append
// meanwhile. When it is done every waiter wakes at once (advanced), those
// it covered return, and one of the rest leads the next sync. (A mutex
// held across the fdatasync woke its waiters one after another, each only
// to find itself covered; and it held up awaitSync for the sync's length.)
func (j *journal) syncTo(seg int, end int64) error {
	for {
		j.syncMu.Lock()
		if j.syncedLocked(seg, end) {
			j.syncMu.Unlock()
			return nil
		}
		if err := j.brokenErr(); err != nil {
			j.syncMu.Unlock()
			return err
		}
		if j.syncing {
			ch := j.advanced
			j.syncMu.Unlock()
			<-ch
			continue
		}
		j.syncing = true
		j.syncMu.Unlock()
		return j.leadSync()
	}
}

// leadSync makes the sync a waiter of syncTo leads; j.syncing is set, so
// no other sync, rotation or close runs meanwhile and j.f stays open.
func (j *journal) leadSync() error {
	// Let the goroutines that are ready to run first append what they are
	// about to, so that this sync covers them too: a group commit that
	// lingers for no time at all.
	runtime.Gosched()
	j.mu.Lock()
	f, cur, off := j.f, j.seg, j.off
	j.mu.Unlock()
	err := j.syncFile(f)
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if err = j.endSyncLocked(err, cur, off); err == nil {
		j.syncs++
	}
	return err
}

// syncFile syncs f, unless the journal does without syncs.
func (j *journal) syncFile(f *os.File) error {
	if j.noSync {
		return nil
	}
	return j.sync(f)
}

// endSyncLocked ends a sync made with syncMu released (syncTo's or a
// rotation's), which returned err, and wakes every waiter: on success the
// journal is synced up to segment seg, offset off; on failure it is broken,
// since after a failed sync the kernel may have dropped the pages and what
// the segment holds is unknown. syncMu is held.
func (j *journal) endSyncLocked(err error, seg int, off int64) error {
	j.syncing = false
	defer j.advanceLocked()
	if err != nil {
		j.mu.Lock()
		j.broken = fmt.Errorf("%w: %w", errJournalBroken, err)
		j.mu.Unlock()
		return fmt.Errorf("journal sync: %w", err)
	}
	j.syncedSeg, j.syncedOff = seg, off
	return nil
}

// brokenErr returns why the journal is broken, or nil.
func (j *journal) brokenErr() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.broken
}

// idleSyncLocked waits, with syncMu held on entry and on return, until no
// sync that syncTo leads is under way.
func (j *journal) idleSyncLocked() {
	for j.syncing {
		ch := j.advanced
		j.syncMu.Unlock()
		<-ch
		j.syncMu.Lock()
	}
}

// syncedLocked reports whether segment seg is synced up to end; syncMu is
// held.
func (j *journal) syncedLocked(seg int, end int64) bool {
	return j.syncedSeg > seg || (j.syncedSeg == seg && j.syncedOff >= end)
}

// advanceLocked wakes awaitSync's waiters; syncMu is held.
func (j *journal) advanceLocked() {
	close(j.advanced)
	j.advanced = make(chan struct{})
}

// awaitSync returns once segment seg is synced up to end, like syncTo, but
// without syncing itself: it waits for a later durable append's sync, or
// the lazy timer's, to cover the frame, which must have been appended lazy.
// That lets a change nobody acts on until a later one is made (an event
// received, then sent to the workspace) share that one's sync.
func (j *journal) awaitSync(seg int, end int64) error {
	for {
		j.syncMu.Lock()
		if j.syncedLocked(seg, end) {
			j.syncMu.Unlock()
			return nil
		}
		broken := j.brokenErr()
		ch := j.advanced
		j.syncMu.Unlock()
		if broken != nil {
			return broken
		}
		<-ch
	}
}

// allocateLocked makes room for n more bytes ahead of time, in segmentChunk
// steps. Failing (a filesystem without fallocate, a full disk) is left to
// the write, which says so.
func (j *journal) allocateLocked(n int64) {
	if j.off+n <= j.allocated {
		return
	}
	size := (j.off + n + segmentChunk - 1) / segmentChunk * segmentChunk
	if err := fallocate(j.f, size); err == nil {
		j.allocated = size
	}
}

// rotate syncs and closes the segment being written and starts the next:
// every frame appended before it returns nil is durable in a segment below
// current(). A checkpoint takes its three steps apart, so that only the
// switch runs under its lock.
func (j *journal) rotate() error {
	r, err := j.beginRotate()
	if err != nil {
		return err
	}
	r.switchSegment()
	return r.finish()
}

// rotation is a switch to the next segment: begun (the segment created, and
// syncs held off until it ends), switched, finished (the old segment synced
// and closed). Nothing but the switch holds the journal's locks, so appends
// go on while the files are created and synced: a checkpoint, which
// switches under hot's lock, would otherwise hold up every inbox change for
// as long as the disk takes.
type rotation struct {
	j      *journal
	next   *os.File
	old    *os.File
	oldSeg int
}

// beginRotate waits for a sync under way, holds off others until the
// rotation finishes, and creates the next segment.
func (j *journal) beginRotate() (*rotation, error) {
	j.syncMu.Lock()
	j.idleSyncLocked()
	j.syncing = true
	j.syncMu.Unlock()
	j.mu.Lock()
	seg, err := j.seg, j.usableLocked()
	j.mu.Unlock()
	var f *os.File
	if err == nil {
		f, err = createSegment(j.base, seg+1)
	}
	if err != nil {
		j.syncMu.Lock()
		j.syncing = false
		j.advanceLocked()
		j.syncMu.Unlock()
		return nil, err
	}
	return &rotation{j: j, next: f}, nil
}

// switchSegment sends every later frame to the next segment.
func (r *rotation) switchSegment() {
	j := r.j
	j.mu.Lock()
	defer j.mu.Unlock()
	r.old, r.oldSeg = j.f, j.seg
	j.f, j.seg, j.off, j.allocated = r.next, j.seg+1, 0, 0
}

// finish syncs and closes the old segment, and lets syncs go on.
func (r *rotation) finish() error {
	j := r.j
	err := j.syncFile(r.old)
	cerr := r.old.Close()
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	// The old segment is synced whole; nothing of the new one yet.
	if err := j.endSyncLocked(err, r.oldSeg+1, 0); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("journal: %w", cerr)
	}
	return nil
}

// empty reports whether nothing was written since the last rotation.
func (j *journal) empty() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.off == 0
}

// current returns the segment being written.
func (j *journal) current() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seg
}

// close syncs what is written and closes the segment; later appends fail
// with ErrClosed.
func (j *journal) close() error {
	j.mu.Lock()
	j.stopped = true
	j.mu.Unlock()
	j.lazyTimers.Wait()
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	j.idleSyncLocked()
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.broken == nil {
		err = j.syncFile(j.f)
	}
	if err != nil {
		j.broken = fmt.Errorf("%w: %w", errJournalBroken, err)
	} else if j.broken == nil {
		j.syncedSeg, j.syncedOff = j.seg, j.off
	}
	j.advanceLocked()
	return errors.Join(err, j.f.Close())
}

// removeBefore deletes the segments numbered below seg.
func removeBefore(base string, seg int) error {
	segs, err := segments(base)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range segs {
		if n < seg {
			if err := os.Remove(segmentPath(base, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// readSegment calls fn with each whole frame's payload of segment seg, in
// order. It stops quietly at the first frame that does not hold: a torn
// tail, which a crash in the middle of a write leaves, or space allocated
// ahead and never written.
func readSegment(base string, seg int, fn func(payload []byte) error) error {
	f, err := os.Open(segmentPath(base, seg))
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<16)
	left := st.Size()
	var hdr [frameHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil
		}
		// No frame is empty: a zero length is space never written.
		n := binary.LittleEndian.Uint32(hdr[:])
		if n == 0 || n > maxJournalFrame || int64(n) > left-frameHeader {
			return nil
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil
		}
		if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			return nil
		}
		if err := fn(payload); err != nil {
			return err
		}
		left -= frameHeader + int64(n)
	}
}

// JournalSegments lists the journal segment files beside the store file at
// path, oldest first: the changes a process that stopped without its last
// checkpoint (a crash) left for the next Open to apply. A clean Close
// leaves none.
func JournalSegments(path string) ([]string, error) {
	segs, err := segments(path)
	if err != nil {
		return nil, fmt.Errorf("journal of %s: %w", path, err)
	}
	out := make([]string, len(segs))
	for i, n := range segs {
		out[i] = segmentPath(path, n)
	}
	return out, nil
}
