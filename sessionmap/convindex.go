package sessionmap

import (
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// convIndex is the conversation index of the entries in flight, which
// PendingOf reads: conversation -> its unanswered entries. It lives in
// memory, built at Open from inbox_seq and kept in step with every commit
// after it, because bbolt locks the file to one process: no other process
// can read the file while this one serves, so nothing but this Store needs
// the index, as nothing but it needs the leases (shared.go). Kept in the
// file (the inbox_conv bucket of the flowbridge before this one), it cost
// every Receive and every Finish the rewrite of its pages, and every
// PendingOf a read transaction, even of a conversation with nothing in
// flight, which is most of the dispatcher's looks.
//
// The index follows commits, never runs ahead of them: a change is applied
// by the group commit's leader once the transaction carrying it has
// committed, in commit order, before the next commit begins (writeReq.after
// in commitBatch). A reader copies a conversation's entries from the index
// and reads them in a transaction of its own, so it may find one answered
// (or expired) whose change is not applied yet, and skips it; and it may
// miss one whose Receive committed but whose change is not applied yet,
// exactly as if it had read before that commit. Receive tells the listeners
// of its entry only after the change is applied, so the look the news
// brings finds it.
type convIndex struct {
	mu sync.Mutex
	m  map[string][]convRef
}

// convRef is an entry in flight as the index holds it.
type convRef struct {
	seq uint64
	key string
}

// add indexes the entry key of seq under conversation. Seqs only grow, and
// changes are applied in commit order, so appending keeps each
// conversation's entries in seq order.
func (x *convIndex) add(conversation string, seq uint64, key string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = make(map[string][]convRef)
	}
	x.m[conversation] = append(x.m[conversation], convRef{seq: seq, key: key})
}

// remove drops the entry of seq from conversation's entries. A
// conversation left with none is dropped, so the map holds the
// conversations with entries in flight only.
func (x *convIndex) remove(conversation string, seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	refs := x.m[conversation]
	for i, r := range refs {
		if r.seq == seq {
			refs = append(refs[:i:i], refs[i+1:]...)
			break
		}
	}
	if len(refs) == 0 {
		delete(x.m, conversation)
		return
	}
	x.m[conversation] = refs
}

// refs returns a copy of conversation's entries: the index changes under
// the caller once the lock is let go.
func (x *convIndex) refs(conversation string) []convRef {
	x.mu.Lock()
	defer x.mu.Unlock()
	refs := x.m[conversation]
	if len(refs) == 0 {
		return nil
	}
	return append([]convRef(nil), refs...)
}

// set replaces the whole index.
func (x *convIndex) set(m map[string][]convRef) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.m = m
}

// indexPending builds the conversation index from inbox_seq: the entries in
// flight, a few hundred under load. An entry whose record does not parse
// cannot be placed (its conversation is part of what is damaged) and is
// left out: Open's check refuses such a file, and with the check off
// Pending, Unleased and Check still report it (ErrCorrupt), as they read
// inbox_seq itself; every other conversation is served.
func indexPending(tx *bolt.Tx) map[string][]convRef {
	m := make(map[string][]convRef)
	inbox := tx.Bucket(bucketInbox)
	_ = tx.Bucket(bucketInboxSeq).ForEach(func(k, key []byte) error {
		seq, err := decodeSeqKey(k)
		if err != nil {
			return nil
		}
		r, err := lookInbox(inbox, key)
		if err != nil || r.seq != seq || r.state == store.Answered {
			return nil
		}
		conv := string(r.conversation)
		m[conv] = append(m[conv], convRef{seq: seq, key: string(key)})
		return nil
	})
	return m
}
