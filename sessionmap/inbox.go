package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The inbox is three buckets:
//
//	inbox       platform key -> entry record (below)
//	inbox_seq   seq (8 bytes big-endian) -> platform key, for entries not yet answered
//	inbox_done  timeKey(Updated) + seq -> platform key, for answered entries
//
// inbox answers Receive's "held already?" with one lookup. inbox_seq holds
// only the few entries in flight, so Pending is an ordered scan of them and
// not of every answered entry kept for de-duplication. inbox_done is in
// expiry order, so ExpireInbox reads a prefix of it. Seq is the inbox
// bucket's sequence, which only grows: no entry ever reuses one, expired or
// not. An entry is in exactly one of the two indexes, and every write that
// moves it does so in the same transaction as the entry.
//
// The entries in flight are also indexed by conversation, for PendingOf:
// in memory (convindex.go), not in the file, since bbolt locks the file to
// one process and no other needs it. Open builds it from inbox_seq; the
// inbox_conv bucket a flowbridge before kept it in is deleted there.
//
// Entry record, version 3 (4 while the entry is stopped):
//
//	version       byte (3, or 4)
//	state         byte (store.InboxState)
//	seq           8 bytes big-endian
//	received      varint Unix nanoseconds
//	updated       varint Unix nanoseconds
//	conversation  uvarint length, bytes
//	reply         uvarint length, bytes
//	order         varint (store.InboxEntry.Order)
//	stopped by    uvarint length, bytes (version 4 only: store.InboxEntry.StoppedBy)
//	event         the bytes up to the checksum
//	checksum      CRC-32C (Castagnoli) of all the bytes before it, 4 bytes big-endian
//
// bbolt keeps no checksums, and Open's cross-check of the inbox against its
// indexes sees a changed key, seq or state, but not a changed byte in the
// event or conversation of an entry waiting to be answered: served, such an
// entry could not be restored (its event no longer decodes) or would be
// answered somewhere else, and its user, whose message was acknowledged,
// would never be told. The checksum makes that damage refuse the start.
// Version 2, written before the checksum, is the same without it, and
// version 1, written before the store kept Order, without order either;
// both still decode (version 1 with Order 0, neither checked) and are
// rewritten as version 3 by the entry's next change. Seq sits at a fixed offset so that Receive encodes the record before its
// transaction and only writes the seq in. An answered entry drops its event:
// only Pending returns events, and it never returns answered entries, which
// are kept only so that a late retry is recognised.
//
// Version 4 is version 3 with who stopped the entry (Stop), and is written
// only for an entry that is stopped and not yet answered: Finish drops the
// stop with the event (nothing reads it once the entry is answered, and a
// stopped entry cannot be stopped again nor take an answer), so the record
// is version 3 again. An older flowbridge, which reads versions 1 to 3,
// takes a version 4 record for damage: its Open refuses the file while it
// holds an entry stopped and not yet answered (and, with the check off,
// Pending fails), rather than post the answer of an entry a user stopped.
// Once the stopped entries are answered, it opens the file as before.
const (
	inboxV1     = 1
	inboxV2     = 2
	inboxV3     = 3
	inboxV4     = 4
	inboxSeqAt  = 2 // offset of seq in the record
	inboxSumLen = 4 // the checksum ending a version 3 or 4 record
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// inboxVersionKnown reports whether an inbox record of version ver can be
// read: the current one, or one the next change rewrites.
func inboxVersionKnown(ver byte) bool { return ver >= inboxV1 && ver <= inboxV4 }

// sealInbox writes the checksum of a version 3 or 4 record into its last bytes,
// over all the bytes before them.
func sealInbox(v []byte) {
	n := len(v) - inboxSumLen
	binary.BigEndian.PutUint32(v[n:], crc32.Checksum(v[:n], castagnoli))
}

// indexFill is the fill percent of inbox_seq and inbox_done: their keys
// arrive in order (seq, then time), so full pages waste no space.
const indexFill = 0.9

// Receive records e, with State Received, a new Seq and Updated equal to
// Received, and reports true; or reports false and writes nothing when the
// inbox holds e.Key already, whatever its state. A zero e.Received is
// refused (store.ErrNoTime). The check and the write are one transaction, so of two
// concurrent deliveries of one key exactly one is new. An empty key or one
// bbolt cannot store (over bolt.MaxKeySize bytes) is an error of this call
// alone. It returns once the transaction is committed and synced.
func (s *Store) Receive(ctx context.Context, e store.InboxEntry) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	if err := checkKey("inbox key", e.Key); err != nil {
		return false, fmt.Errorf("receive: %w", err)
	}
	if err := checkTime(e.Received); err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	e.State, e.Seq, e.Updated, e.Reply, e.StoppedBy = store.Received, 0, e.Received, "", ""
	v, err := appendInbox(nil, e)
	if err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	k := []byte(e.Key)
	var fresh bool
	var seq uint64
	err = s.updateThen(func(tx *bolt.Tx) error {
		fresh = false
		inbox := tx.Bucket(bucketInbox)
		if inbox.Get(k) != nil {
			return nil
		}
		var err error
		if seq, err = inbox.NextSequence(); err != nil {
			return err
		}
		// v is this call's alone, and a rolled-back attempt of the batch
		// let go of it, so writing the seq in place is safe.
		binary.BigEndian.PutUint64(v[inboxSeqAt:], seq)
		sealInbox(v)
		if err := inbox.Put(k, v); err != nil {
			return err
		}
		pending := tx.Bucket(bucketInboxSeq)
		pending.FillPercent = indexFill
		if err := pending.Put(seqKey(seq), k); err != nil {
			return err
		}
		fresh = true
		return addCounter(tx, metaInbox, 1)
	}, func() {
		if fresh {
			s.pending.add(e.Conversation, seq, e.Key)
		}
	})
	if err != nil {
		return false, fmt.Errorf("receive %q: %w", e.Key, err)
	}
	if fresh {
		// After the index has it: the look this news brings finds it.
		s.notify(e.Conversation)
	}
	return fresh, nil
}

// MarkSent moves the entry to Sent: its request is about to leave for the
// workspace. An entry already Sent or Answered gives an error wrapping
// store.ErrAlreadySent, since an entry never goes back and whoever marked it
// sent owns it. A key the inbox does not hold gives an error wrapping
// store.ErrUnknownEntry. A zero now is refused (store.ErrNoTime).
func (s *Store) MarkSent(ctx context.Context, key string, now time.Time) error {
	return s.markSent(ctx, key, now, nil)
}

// markSent is MarkSent, made only while guard, when set, returns nil inside
// the write's transaction (MarkSentUnder's lease).
func (s *Store) markSent(ctx context.Context, key string, now time.Time, guard func() error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	if err := checkTime(now); err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	k := []byte(key)
	err := s.update(func(tx *bolt.Tx) error {
		if guard != nil {
			if err := guard(); err != nil {
				return err
			}
		}
		inbox := tx.Bucket(bucketInbox)
		r, err := lookInbox(inbox, k)
		if err != nil {
			return err
		}
		switch r.state {
		case store.Sent:
			return store.ErrAlreadySent
		case store.Answered:
			return fmt.Errorf("%w: %w", store.ErrAlreadySent, errAnswered)
		}
		v, err := r.restate(store.Sent, now)
		if err != nil {
			return err
		}
		return inbox.Put(k, v)
	})
	if err != nil {
		return fmt.Errorf("mark sent %q: %w", key, err)
	}
	return nil
}

// Finish moves the entry (Received or Sent) to Answered with the reply's
// reference. When turn is not nil it is applied in the same transaction, by
// PutTurns' rule: only while turn.Session.Key still maps to
// turn.Session.SessionUUID. A key the inbox does not hold gives an error
// wrapping store.ErrUnknownEntry, and an entry answered already an error;
// either way nothing is written, the turn included. A zero now is
// refused (store.ErrNoTime). A stopped entry (Stop) is answered all the
// same, whether or not an answer was kept for it before the stop: its stop
// is dropped with its event, since nothing reads it once answered.
func (s *Store) Finish(ctx context.Context, key, reply string, turn *store.Turn, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	if err := checkTime(now); err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	var t *encodedTurn
	if turn != nil {
		et, err := encodeTurn(*turn)
		if err != nil {
			return fmt.Errorf("finish %q: %w", key, err)
		}
		t = &et
	}
	k := []byte(key)
	nowKey := timeKey(now)
	var conv string // the entry's, for the conversation index
	var seq uint64
	err := s.updateThen(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		r, err := lookInbox(inbox, k)
		if err != nil {
			return err
		}
		if r.state == store.Answered {
			return errAnswered
		}
		v, err := r.answer(reply, now)
		if err != nil {
			return err
		}
		// Before the Put: r's bytes are bbolt's until the bucket is written.
		conv, seq = string(r.conversation), r.seq
		if err := inbox.Put(k, v); err != nil {
			return err
		}
		if err := tx.Bucket(bucketInboxSeq).Delete(seqKey(r.seq)); err != nil {
			return err
		}
		if err := dropReply(tx, k); err != nil {
			return err
		}
		done := tx.Bucket(bucketInboxDone)
		done.FillPercent = indexFill
		if err := done.Put(binary.BigEndian.AppendUint64(nowKey[:], r.seq), k); err != nil {
			return err
		}
		if t != nil {
			_, err = t.apply(tx)
		}
		return err
	}, func() { s.pending.remove(conv, seq) })
	if err != nil {
		return fmt.Errorf("finish %q: %w", key, err)
	}
	return nil
}

// errAnswered is a state change asked of an entry that is answered.
var errAnswered = errors.New("inbox entry is answered already")

// Pending returns the entries not yet answered (Received or Sent), in Seq
// order, with their events, the answers kept for them (outbox.go) and who
// stopped them (stop.go). It reads in chunks of short transactions, so an entry answered meanwhile may
// or may not be in the result.
func (s *Store) Pending(ctx context.Context) ([]store.InboxEntry, error) {
	var out []store.InboxEntry
	err := s.scanTx(bucketInboxSeq, nil, func([]byte) bool { return true },
		func(tx *bolt.Tx, k, key []byte) (bool, error) {
			seq, err := decodeSeqKey(k)
			if err != nil {
				return false, err
			}
			inbox := tx.Bucket(bucketInbox)
			if inbox.Get(key) == nil {
				return false, fmt.Errorf("%w: pending seq %d names inbox entry %q, which is missing", ErrCorrupt, seq, key)
			}
			e, err := getInbox(inbox, key)
			if err != nil {
				return false, err
			}
			if e.Seq != seq || e.State == store.Answered {
				return false, fmt.Errorf("%w: pending seq %d names inbox entry %q of seq %d, %v", ErrCorrupt, seq, key, e.Seq, e.State)
			}
			e.Outbox = keptReply(tx, key)
			out = append(out, e)
			return true, nil
		})
	if err != nil {
		return nil, fmt.Errorf("pending inbox: %w", err)
	}
	return out, nil
}

// ExpireInbox deletes the answered entries last updated before before, and
// returns how many, in transactions of at most s.chunk entries: a backlog
// never holds the writer lock for long. Entries not yet answered stay,
// however old.
func (s *Store) ExpireInbox(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("expire inbox: %w", err)
	}
	hi := timeKey(clampTime(before))
	total := 0
	for {
		visited, n := 0, 0
		err := s.update(func(tx *bolt.Tx) error {
			visited, n = 0, 0
			done, inbox := tx.Bucket(bucketInboxDone), tx.Bucket(bucketInbox)
			var old [][2][]byte // index key, platform key
			c := done.Cursor()
			// A 16-byte index key sorts below the 8-byte bound exactly when
			// its time is before it.
			for k, v := c.First(); k != nil && bytes.Compare(k, hi[:]) < 0 && len(old) < s.chunk; k, v = c.Next() {
				old = append(old, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
			}
			visited = len(old)
			// Deleting after the walk: bbolt cursors can skip a key when the
			// bucket changes under them.
			for _, o := range old {
				if err := done.Delete(o[0]); err != nil {
					return err
				}
				// The index entry and its entry go together. Damage (a
				// malformed index key, or one naming another entry) loses
				// only the index entry, so it never stalls expiry.
				if len(o[0]) != 16 {
					continue
				}
				seq := binary.BigEndian.Uint64(o[0][8:])
				if state, eseq, ok := peekInbox(inbox.Get(o[1])); !ok || state != store.Answered || eseq != seq {
					continue
				}
				if err := inbox.Delete(o[1]); err != nil {
					return err
				}
				n++
			}
			return addCounter(tx, metaInbox, -int64(n))
		})
		if err != nil {
			return total, fmt.Errorf("expire inbox: %w", err)
		}
		total += n
		if visited < s.chunk {
			return total, nil
		}
	}
}

// checkTime checks that a record can hold now: a zero now is refused,
// since the caller's clock gives every time (store.ErrNoTime).
func checkTime(now time.Time) error {
	if now.IsZero() {
		return store.ErrNoTime
	}
	if now.Before(minNanoTime) || now.After(maxNanoTime) {
		return fmt.Errorf("time %v out of range", now)
	}
	return nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func decodeSeqKey(k []byte) (uint64, error) {
	if len(k) != 8 {
		return 0, fmt.Errorf("%w: inbox seq key of %d bytes", errRecord, len(k))
	}
	return binary.BigEndian.Uint64(k), nil
}

// getInbox reads and decodes the entry of key, copying it out of bbolt's
// memory; an absent key gives store.ErrUnknownEntry.
func getInbox(inbox *bolt.Bucket, key []byte) (store.InboxEntry, error) {
	v := inbox.Get(key)
	if v == nil {
		return store.InboxEntry{}, store.ErrUnknownEntry
	}
	e, err := decodeInbox(v)
	if err != nil {
		return store.InboxEntry{}, fmt.Errorf("inbox entry %q: %w", key, err)
	}
	e.Key = string(key)
	return e, nil
}

func appendInbox(dst []byte, e store.InboxEntry) ([]byte, error) {
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"received", e.Received}, {"updated", e.Updated}} {
		if err := checkNanoTime(t.name, t.t); err != nil {
			return nil, err
		}
	}
	return appendInboxRecord(dst, e.State, e.Seq, e.Received.UnixNano(), e.Updated.UnixNano(), e.Conversation, e.Reply, e.Order, e.StoppedBy, e.Event)
}

// checkNanoTime refuses a time a record cannot hold.
func checkNanoTime(name string, t time.Time) error {
	if t.Before(minNanoTime) || t.After(maxNanoTime) {
		return fmt.Errorf("%s time %v out of range", name, t)
	}
	return nil
}

// appendInboxRecord encodes an entry record from its fields, the text ones
// given as strings (a new entry) or as a stored record's bytes (see
// inboxRecord.restate and .answer): version 3, or version 4 when
// stoppedBy is set.
func appendInboxRecord[C, R, W string | []byte](dst []byte, state store.InboxState, seq uint64, received, updated int64, conversation C, reply R, order int64, stoppedBy W, event []byte) ([]byte, error) {
	// One allocation for the whole record: its size is known up to the
	// varints, counted at their longest.
	dst = slices.Grow(dst, 2+8+6*binary.MaxVarintLen64+len(conversation)+len(reply)+len(stoppedBy)+len(event)+inboxSumLen)
	start := len(dst)
	ver := byte(inboxV3)
	if len(stoppedBy) > 0 {
		ver = inboxV4
	}
	dst = append(dst, ver, byte(state))
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.AppendVarint(dst, received)
	dst = binary.AppendVarint(dst, updated)
	dst = binary.AppendUvarint(dst, uint64(len(conversation)))
	dst = append(dst, conversation...)
	dst = binary.AppendUvarint(dst, uint64(len(reply)))
	dst = append(dst, reply...)
	dst = binary.AppendVarint(dst, order)
	if ver == inboxV4 {
		dst = binary.AppendUvarint(dst, uint64(len(stoppedBy)))
		dst = append(dst, stoppedBy...)
	}
	if size := len(dst) - start + len(event) + inboxSumLen; size > bolt.MaxValueSize {
		return nil, fmt.Errorf("entry of %d bytes is too large", size)
	}
	dst = append(dst, event...)
	dst = append(dst, make([]byte, inboxSumLen)...)
	sealInbox(dst[start:])
	return dst, nil
}

// inboxRecord is an entry record's fields as parseInbox reads them, the
// byte ones pointing into the record (which may be bbolt's memory, valid
// only until the transaction writes to the bucket or ends).
type inboxRecord struct {
	state               store.InboxState
	seq                 uint64
	received, updated   int64
	conversation, reply []byte
	order               int64
	stoppedBy           []byte // "" unless version 4
	event               []byte
}

// parseInbox checks and splits a record without copying any of it.
func parseInbox(v []byte) (inboxRecord, error) {
	d := decoder{b: v}
	var r inboxRecord
	ver := d.byte()
	if d.err == nil && !inboxVersionKnown(ver) {
		return inboxRecord{}, fmt.Errorf("%w: inbox record version %d", errRecord, ver)
	}
	if ver >= inboxV3 {
		n := len(v) - inboxSumLen
		if n < 1 {
			return inboxRecord{}, fmt.Errorf("%w: inbox record of %d bytes", errRecord, len(v))
		}
		if crc32.Checksum(v[:n], castagnoli) != binary.BigEndian.Uint32(v[n:]) {
			return inboxRecord{}, fmt.Errorf("%w: inbox record checksum mismatch", errRecord)
		}
		d.b = v[1:n]
	}
	r.state = store.InboxState(d.byte())
	if d.err == nil && (r.state < store.Received || r.state > store.Answered) {
		return inboxRecord{}, fmt.Errorf("%w: inbox record state %d", errRecord, r.state)
	}
	if b := d.bytes(8); b != nil {
		r.seq = binary.BigEndian.Uint64(b)
	}
	r.received = d.varint()
	r.updated = d.varint()
	r.conversation = d.lenBytes()
	r.reply = d.lenBytes()
	if ver != inboxV1 {
		r.order = d.varint()
	}
	if ver == inboxV4 {
		if r.stoppedBy = d.lenBytes(); d.err == nil && len(r.stoppedBy) == 0 {
			// Version 4 is written only for a stop, which names its user.
			return inboxRecord{}, fmt.Errorf("%w: inbox record version 4 stopped by nobody", errRecord)
		}
	}
	if d.err != nil {
		return inboxRecord{}, fmt.Errorf("%w: inbox record: %w", errRecord, d.err)
	}
	r.event = d.b
	return r, nil
}

// lookInbox reads and parses the entry of key without copying it out, for
// a change that re-encodes it (restate, answer) before it writes to inbox:
// MarkSent, PutReply and Finish change only its state, time and answer,
// and copying every field out and back in was most of their own
// allocations. An absent key gives store.ErrUnknownEntry.
func lookInbox(inbox *bolt.Bucket, key []byte) (inboxRecord, error) {
	v := inbox.Get(key)
	if v == nil {
		return inboxRecord{}, store.ErrUnknownEntry
	}
	r, err := parseInbox(v)
	if err != nil {
		return inboxRecord{}, fmt.Errorf("inbox entry %q: %w", key, err)
	}
	return r, nil
}

// restate encodes r afresh (as version 3, or 4 while stopped) in state,
// updated at now, with its other fields unchanged.
func (r inboxRecord) restate(state store.InboxState, now time.Time) ([]byte, error) {
	if err := checkNanoTime("updated", now); err != nil {
		return nil, err
	}
	return appendInboxRecord(nil, state, r.seq, r.received, now.UnixNano(), r.conversation, r.reply, r.order, r.stoppedBy, r.event)
}

// stop encodes r afresh (as version 4) stopped by who, updated at now,
// with its other fields unchanged.
func (r inboxRecord) stop(who string, now time.Time) ([]byte, error) {
	if err := checkNanoTime("updated", now); err != nil {
		return nil, err
	}
	return appendInboxRecord(nil, r.state, r.seq, r.received, now.UnixNano(), r.conversation, r.reply, r.order, who, r.event)
}

// answer encodes r afresh (as version 3) Answered by reply at now, without
// its event, which only Pending returns and never for an answered entry,
// and without its stop, which nothing reads once the entry is answered
// (and whose version 4 an older flowbridge could not read).
func (r inboxRecord) answer(reply string, now time.Time) ([]byte, error) {
	if err := checkNanoTime("updated", now); err != nil {
		return nil, err
	}
	return appendInboxRecord(nil, store.Answered, r.seq, r.received, now.UnixNano(), r.conversation, reply, r.order, "", nil)
}

// decodeInbox decodes a record, copying every byte out of v (which may be
// bbolt's memory). Key is left empty.
func decodeInbox(v []byte) (store.InboxEntry, error) {
	r, err := parseInbox(v)
	if err != nil {
		return store.InboxEntry{}, err
	}
	e := store.InboxEntry{
		State: r.state, Seq: r.seq,
		Received: time.Unix(0, r.received), Updated: time.Unix(0, r.updated),
		Conversation: string(r.conversation), Reply: string(r.reply), Order: r.order,
		StoppedBy: string(r.stoppedBy),
	}
	if len(r.event) > 0 {
		e.Event = bytes.Clone(r.event)
	}
	return e, nil
}

// peekInbox reads the state and seq of a record without decoding the rest.
func peekInbox(v []byte) (store.InboxState, uint64, bool) {
	if len(v) < inboxSeqAt+8 || !inboxVersionKnown(v[0]) {
		return 0, 0, false
	}
	return store.InboxState(v[1]), binary.BigEndian.Uint64(v[inboxSeqAt:]), true
}

// checkInboxTx reports through problem what is inconsistent in the inbox:
// a record that does not decode, an index entry naming an entry that is
// missing or of another seq or state, an entry in no index. bbolt keeps no
// checksums, so a changed byte in a key or a record passes its own check;
// but every inbox key is kept twice (the entry's key, and the value of its
// index entry) with its seq and state, so such damage to the inbox, where
// it would lose or repeat a delivery, shows here as a mismatch.
func checkInboxTx(tx *bolt.Tx, problem func(format string, args ...any)) {
	inbox, pending, done := tx.Bucket(bucketInbox), tx.Bucket(bucketInboxSeq), tx.Bucket(bucketInboxDone)
	if inbox == nil || pending == nil || done == nil {
		return // not yet a format 3 store: Open creates them
	}
	indexed := 0
	indexes := func(b *bolt.Bucket, name string, answered bool) {
		_ = b.ForEach(func(k, v []byte) error {
			indexed++
			var seq uint64
			switch {
			case !answered && len(k) == 8:
				seq = binary.BigEndian.Uint64(k)
			case answered && len(k) == 16:
				seq = binary.BigEndian.Uint64(k[8:])
			default:
				problem("inbox: %s key %x of %d bytes", name, k, len(k))
				return nil
			}
			e, err := getInbox(inbox, v)
			switch {
			case errors.Is(err, store.ErrUnknownEntry):
				problem("inbox: %s seq %d names entry %q, which is missing", name, seq, v)
			case err != nil:
				problem("inbox: %v", err)
			case e.Seq != seq || (e.State == store.Answered) != answered:
				problem("inbox: %s seq %d names entry %q of seq %d, %v", name, seq, v, e.Seq, e.State)
			case answered && !bytes.Equal(k[:8], func() []byte { t := timeKey(e.Updated); return t[:] }()):
				problem("inbox: %s seq %d has another time than entry %q", name, seq, v)
			}
			return nil
		})
	}
	indexes(pending, string(bucketInboxSeq), false)
	indexes(done, string(bucketInboxDone), true)
	if n := inbox.Stats().KeyN; n != indexed {
		problem("inbox: %d entries, %d index entries", n, indexed)
	}
}
