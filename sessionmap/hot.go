package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The inbox's state changes (Receive, MarkSent, Finish with its turn) are
// made durable in the journal (journal.go) and kept in memory, in hot, until
// a checkpoint applies them to the bbolt file in one transaction: once a
// second, when hot grows past maxHot, and before any read that hot does not
// answer. Every read of the inbox and of sessions looks at hot before the
// file, so callers see each change as soon as its method returns, exactly as
// if it had been committed to the file.
//
// Why: three bbolt commits per chat message (six fdatasyncs and a rewrite of
// the touched pages each time) cost a third of the bridge's CPU and most of
// the latency it added. A journal frame costs one sequential write, and one
// fdatasync per batch of concurrent changes.

// DefaultCheckpointEvery is how often the journal is applied to the file.
const DefaultCheckpointEvery = time.Second

// maxHot is the number of hot entries that starts a checkpoint before its
// time, so that memory and the replay after a crash stay small.
const maxHot = 8192

// Journal payloads. Each starts with op, key and the change's time:
//
//	op       byte
//	key      uvarint length, bytes
//	updated  varint Unix nanoseconds
//
// then, for opReceive: seq uvarint, conversation (uvarint length, bytes),
// the event (the remaining bytes); for opSent nothing; for opAnswered: reply
// (uvarint length, bytes), then a byte 1 and the turn, or 0:
//
//	session key, session record, reply text record, session UUID,
//	  each uvarint length, bytes
//	count of also-keys uvarint, each uvarint length, bytes
const (
	opReceive  = 1
	opSent     = 2
	opAnswered = 3
)

type hot struct {
	mu      sync.Mutex
	entries map[string]*hotEntry
	turns   []*hotTurn            // in journal order
	bySess  map[string][]*hotTurn // session key -> its hot turns, in order
	byReply map[string]int        // reply key (session key or also-key) -> hot turns writing it
	seq     uint64                // the last seq given out
}

// hotEntry is an inbox entry's newest state. A change replaces the pointer,
// so a checkpoint can tell whether what it applied is still the newest.
type hotEntry struct {
	e store.InboxEntry
	// inFile is set when the file may hold the key, in an earlier state;
	// a checkpoint then looks the key up and unindexes it, and skips both
	// for the common entry, received and answered between two checkpoints.
	inFile bool
}

type hotTurn struct {
	enc  encodedTurn
	sess store.Session // as the file will return it
}

// init empties h.
func (h *hot) init() {
	h.turns = nil
	h.entries = make(map[string]*hotEntry)
	h.bySess = make(map[string][]*hotTurn)
	h.byReply = make(map[string]int)
}

func (h *hot) addTurn(t *hotTurn) {
	h.turns = append(h.turns, t)
	k := string(t.enc.key)
	h.bySess[k] = append(h.bySess[k], t)
	h.byReply[k]++
	for _, a := range t.enc.also {
		h.byReply[string(a)]++
	}
}

func (h *hot) dropTurns(drop []*hotTurn) {
	if len(drop) == 0 {
		return
	}
	gone := make(map[*hotTurn]bool, len(drop))
	for _, t := range drop {
		gone[t] = true
	}
	h.turns = slices.DeleteFunc(h.turns, func(t *hotTurn) bool { return gone[t] })
	for _, t := range drop {
		k := string(t.enc.key)
		if rest := slices.DeleteFunc(h.bySess[k], func(x *hotTurn) bool { return gone[x] }); len(rest) > 0 {
			h.bySess[k] = rest
		} else {
			delete(h.bySess, k)
		}
		for _, rk := range append([][]byte{t.enc.key}, t.enc.also...) {
			if h.byReply[string(rk)]--; h.byReply[string(rk)] <= 0 {
				delete(h.byReply, string(rk))
			}
		}
	}
}

// session returns the newest hot turn's session for key while the file maps
// key to uuid: the turn the file will apply last.
func (h *hot) session(key, uuid string) (store.Session, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ts := h.bySess[key]
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].enc.uuid == uuid {
			return ts[i].sess, true
		}
	}
	return store.Session{}, false
}

// touches reports whether a hot turn writes the session or reply of any of
// keys, or, with no keys, whether there is any hot turn.
func (h *hot) touches(keys ...string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(keys) == 0 {
		return len(h.turns) > 0
	}
	for _, k := range keys {
		if h.byReply[k] > 0 {
			return true
		}
	}
	return false
}

// settle applies the journal to the file when a hot turn touches any of keys
// (or, with no keys, any hot turn at all), so that a write straight to the
// file, or a read hot does not answer, comes after it as it would have
// without the journal.
func (s *Store) settle(keys ...string) error {
	if !s.hot.touches(keys...) {
		return nil
	}
	return s.checkpoint()
}

// fileEntry reads key's entry from the file.
func (s *Store) fileEntry(key string) (store.InboxEntry, error) {
	var e store.InboxEntry
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		e, err = getInbox(tx.Bucket(bucketInbox), []byte(key))
		return err
	})
	return e, err
}

// fileHolds reports whether the file holds key, and the file's inbox
// sequence (the last seq a checkpoint applied).
func (s *Store) fileHolds(key string) (held bool, seq uint64, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		held, seq = inbox.Get([]byte(key)) != nil, inbox.Sequence()
		return nil
	})
	return held, seq, err
}

// currentLocked returns key's newest state, from hot or the file; s.hot.mu
// is held.
func (s *Store) currentLocked(key string) (store.InboxEntry, *hotEntry, error) {
	if he := s.hot.entries[key]; he != nil {
		return he.e, he, nil
	}
	e, err := s.fileEntry(key)
	return e, nil, err
}

// changeLocked writes fr to the journal and makes next key's newest state,
// after prev (nil: the file's); s.hot.mu is held, so frames reach the
// journal in the order of the changes. The returned function waits until
// the frame is durable and, if that fails, puts prev back unless a later
// change came first. A staged frame's wait syncs nothing itself: it waits
// for the next change's sync (or the lazy timer's) to cover it.
func (s *Store) changeLocked(next store.InboxEntry, prev *hotEntry, inFile bool, fr []byte, turn *hotTurn, staged bool) (wait func() error, err error) {
	// An answer's frame is the only one nothing outside waits on: written
	// before Finish returns, no crash of the process can undo it, and it is
	// synced within lazySync. What a power cut in that window costs is a
	// needless "restarted while answering" notice, never a message sent
	// twice or one dropped.
	answer := next.State == store.Answered || s.jrn.allLazy
	seg, end, err := s.jrn.append(fr, answer || staged)
	if err != nil {
		return nil, err
	}
	h := &s.hot
	he := &hotEntry{e: next, inFile: inFile}
	h.entries[next.Key] = he
	if turn != nil {
		h.addTurn(turn)
	}
	if len(h.entries) >= maxHot {
		s.kickCheckpoint()
	}
	return func() error {
		var err error
		switch {
		case answer:
			return nil
		case staged:
			err = s.jrn.awaitSync(seg, end)
		default:
			err = s.jrn.syncTo(seg, end)
		}
		if err != nil {
			h.mu.Lock()
			if h.entries[next.Key] == he {
				if prev != nil {
					prev.inFile = prev.inFile || he.inFile
					h.entries[next.Key] = prev
				} else {
					delete(h.entries, next.Key)
				}
			}
			if turn != nil {
				h.dropTurns([]*hotTurn{turn})
			}
			h.mu.Unlock()
		}
		return err
	}, nil
}

// checkpoint applies everything hot holds to the file in one transaction
// and deletes the journal segments it covers. Changes made while it runs
// stay hot for the next one.
func (s *Store) checkpoint() error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	h := &s.hot
	h.mu.Lock()
	idle := len(h.entries) == 0 && len(h.turns) == 0 && s.jrn.empty()
	h.mu.Unlock()
	if idle {
		return nil // and only a checkpoint (under ckMu) empties hot
	}
	rot, err := s.jrn.beginRotate()
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	h.mu.Lock()
	snap := slices.Collect(maps.Values(h.entries))
	turns := slices.Clone(h.turns)
	seq := h.seq
	// Under h.mu, so the segments below the new one hold exactly the
	// changes in the snapshot (and earlier ones the file holds).
	rot.switchSegment()
	h.mu.Unlock()
	if err := rot.finish(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := s.update(func(tx *bolt.Tx) error { return applyHot(tx, snap, turns, seq) }); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	h.mu.Lock()
	for _, he := range snap {
		switch cur := h.entries[he.e.Key]; {
		case cur == he:
			delete(h.entries, he.e.Key)
		case cur != nil:
			// Changed while the file was written: the next checkpoint
			// must treat the key as one the file holds.
			cur.inFile = true
		}
	}
	h.dropTurns(turns)
	h.mu.Unlock()
	if err := removeBefore(s.path, s.jrn.current()); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// applyHot writes entries and turns into the file: the entries' records and
// index keys, the turns in order by PutTurns' rule, and the inbox sequence.
func applyHot(tx *bolt.Tx, entries []*hotEntry, turns []*hotTurn, seq uint64) error {
	inbox := tx.Bucket(bucketInbox)
	pending, done := tx.Bucket(bucketInboxSeq), tx.Bucket(bucketInboxDone)
	pending.FillPercent, done.FillPercent = indexFill, indexFill
	slices.SortFunc(entries, func(a, b *hotEntry) int { return strings.Compare(a.e.Key, b.e.Key) })
	added := int64(0)
	for _, he := range entries {
		e := he.e
		k := []byte(e.Key)
		if !he.inFile {
			added++ // received since the last checkpoint: nothing to look up or unindex
		} else if old := inbox.Get(k); old == nil {
			added++
		} else if state, _, ok := peekInbox(old); ok && state == store.Answered {
			continue // answered in the file already: a replay of what a checkpoint applied
		}
		v, err := appendInbox(nil, e)
		if err != nil {
			return fmt.Errorf("inbox entry %q: %w", e.Key, err)
		}
		if err := inbox.Put(k, v); err != nil {
			return err
		}
		if e.State == store.Answered {
			if he.inFile {
				if err := pending.Delete(seqKey(e.Seq)); err != nil {
					return err
				}
			}
			nowKey := timeKey(e.Updated)
			if err := done.Put(binary.BigEndian.AppendUint64(nowKey[:], e.Seq), k); err != nil {
				return err
			}
		} else if err := pending.Put(seqKey(e.Seq), k); err != nil {
			return err
		}
	}
	for _, t := range turns {
		if _, err := t.enc.apply(tx); err != nil {
			return err
		}
	}
	if seq > inbox.Sequence() {
		if err := inbox.SetSequence(seq); err != nil {
			return err
		}
	}
	return addCounter(tx, metaInbox, added)
}

// kickCheckpoint asks the checkpointer to run now.
func (s *Store) kickCheckpoint() {
	select {
	case s.ckKick <- struct{}{}:
	default:
	}
}

// checkpointer runs checkpoints until stop is closed. A failed one is
// retried at the next tick: its changes stay hot and in the journal.
func (s *Store) checkpointer(every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-s.ckKick:
		}
		// A failure leaves the changes hot and in the journal; the writes
		// that need the file (sessions, audit) report the same disk.
		_ = s.checkpoint()
	}
}

// replay reads the journal segments a previous process left (it stopped
// without its last checkpoint) into hot, applies them to the file, and
// deletes them. It returns the number of the segment to write next.
func (s *Store) replay() (next int, err error) {
	segs, err := segments(s.path)
	if err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	err = s.view(func(tx *bolt.Tx) error {
		s.hot.seq = tx.Bucket(bucketInbox).Sequence()
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(segs) == 0 {
		return 1, nil
	}
	for _, seg := range segs {
		if err := readSegment(s.path, seg, s.replayFrame); err != nil {
			return 0, fmt.Errorf("journal segment %d: %w", seg, err)
		}
	}
	h := &s.hot
	snap := slices.Collect(maps.Values(h.entries))
	if err := s.update(func(tx *bolt.Tx) error { return applyHot(tx, snap, h.turns, h.seq) }); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	h.init()
	next = segs[len(segs)-1] + 1
	if err := removeBefore(s.path, next); err != nil {
		return 0, fmt.Errorf("journal: %w", err)
	}
	return next, nil
}

// replayFrame applies one journal frame to hot. Changes only move an entry
// forward (received, sent, answered), so a frame the file already reflects
// changes nothing.
func (s *Store) replayFrame(p []byte) error {
	op, key, updated, d, err := decodeFrameHead(p)
	if err != nil {
		return err
	}
	h := &s.hot
	if op == opReceive {
		seq := d.uvarint()
		received := time.Unix(0, d.varint())
		conv := d.string()
		if d.err != nil {
			return fmt.Errorf("%w: journal frame: %w", errRecord, d.err)
		}
		if h.entries[key] != nil {
			return nil
		}
		if held, _, err := s.fileHolds(key); err != nil || held {
			return err
		}
		h.entries[key] = &hotEntry{e: store.InboxEntry{Key: key, Seq: seq, Conversation: conv, State: store.Received,
			Event: bytes.Clone(d.b), Received: received, Updated: updated}}
		h.seq = max(h.seq, seq)
		return nil
	}
	cur, prev, err := s.currentLocked(key)
	if errors.Is(err, store.ErrUnknownEntry) {
		return nil // expired since: nothing left to change
	}
	if err != nil {
		return err
	}
	inFile := prev == nil || prev.inFile
	switch op {
	case opSent:
		if cur.State != store.Received {
			return nil
		}
		cur.State, cur.Updated = store.Sent, updated
		h.entries[key] = &hotEntry{e: cur, inFile: inFile}
	case opAnswered:
		reply := d.string()
		turn, err := decodeFrameTurn(&d)
		if err != nil {
			return err
		}
		if cur.State == store.Answered {
			return nil
		}
		cur.State, cur.Updated, cur.Reply, cur.Event = store.Answered, updated, reply, nil
		h.entries[key] = &hotEntry{e: cur, inFile: inFile}
		if turn != nil {
			h.addTurn(turn)
		}
	default:
		return fmt.Errorf("%w: journal frame op %d", errRecord, op)
	}
	return nil
}

func appendFrameHead(dst []byte, op byte, key string, updated time.Time) []byte {
	dst = append(dst, op)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	return binary.AppendVarint(dst, updated.UnixNano())
}

func decodeFrameHead(p []byte) (op byte, key string, updated time.Time, d decoder, err error) {
	d = decoder{b: p}
	op = d.byte()
	key = d.string()
	updated = time.Unix(0, d.varint())
	if d.err != nil {
		return 0, "", time.Time{}, d, fmt.Errorf("%w: journal frame: %w", errRecord, d.err)
	}
	return op, key, updated, d, nil
}

func receiveFrame(e store.InboxEntry) []byte {
	p := make([]byte, 0, 32+len(e.Key)+len(e.Conversation)+len(e.Event))
	p = appendFrameHead(p, opReceive, e.Key, e.Updated)
	p = binary.AppendUvarint(p, e.Seq)
	p = binary.AppendVarint(p, e.Received.UnixNano())
	p = binary.AppendUvarint(p, uint64(len(e.Conversation)))
	p = append(p, e.Conversation...)
	return frame(append(p, e.Event...))
}

func sentFrame(key string, now time.Time) []byte {
	return frame(appendFrameHead(nil, opSent, key, now))
}

func answeredFrame(key, reply string, now time.Time, t *encodedTurn) []byte {
	p := appendFrameHead(nil, opAnswered, key, now)
	p = appendBytes(p, []byte(reply))
	if t == nil {
		return frame(append(p, 0))
	}
	p = append(p, 1)
	for _, b := range [][]byte{t.key, t.rec, t.text, []byte(t.uuid)} {
		p = appendBytes(p, b)
	}
	p = binary.AppendUvarint(p, uint64(len(t.also)))
	for _, a := range t.also {
		p = appendBytes(p, a)
	}
	return frame(p)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func decodeFrameTurn(d *decoder) (*hotTurn, error) {
	has := d.byte()
	if d.err != nil || has == 0 {
		return nil, d.err
	}
	var t encodedTurn
	t.key = []byte(d.string())
	t.rec = []byte(d.string())
	t.text = []byte(d.string())
	t.uuid = d.string()
	n := d.uvarint()
	for i := uint64(0); i < n && d.err == nil; i++ {
		t.also = append(t.also, []byte(d.string()))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: journal turn: %w", errRecord, d.err)
	}
	return newHotTurn(t)
}

func newHotTurn(t encodedTurn) (*hotTurn, error) {
	sess, err := decodeSession(t.rec)
	if err != nil {
		return nil, fmt.Errorf("turn %q: %w", t.key, err)
	}
	sess.Key = string(t.key)
	return &hotTurn{enc: t, sess: sess}, nil
}

// finalCheckpoint applies what hot holds once the journal has stopped, and
// then deletes every segment: the file holds it all.
func (s *Store) finalCheckpoint() error {
	s.ckMu.Lock()
	defer s.ckMu.Unlock()
	h := &s.hot
	h.mu.Lock()
	defer h.mu.Unlock()
	snap := slices.Collect(maps.Values(h.entries))
	if len(snap) > 0 || len(h.turns) > 0 {
		if err := s.update(func(tx *bolt.Tx) error { return applyHot(tx, snap, h.turns, h.seq) }); err != nil {
			return fmt.Errorf("last checkpoint: %w", err)
		}
	}
	h.init()
	if err := removeBefore(s.path, s.jrn.current()+1); err != nil {
		return fmt.Errorf("last checkpoint: %w", err)
	}
	return nil
}
