package sessionmap

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// The bbolt store offers the same contract as the store replicas share
// (store.Shared), with one process as the only possible holder: bbolt locks
// its file to one process. So the core runs one delivery path on either
// store, and a single process is the one-replica case of it, not a second
// implementation. What differs is data: leases here live in memory (a lease
// outlives no process, and no other process can open the file), and Listen
// hears the entries this process records.
var _ store.Store = (*Store)(nil)

// leases are the Store's named claims, judged by this process's clock, the
// store's own as store.Leases asks.
type leases struct {
	mu sync.Mutex
	m  map[string]lease
	// listeners are the callbacks of running Listen calls.
	listeners map[*func(string)]struct{}
}

type lease struct {
	holder string
	until  time.Time
}

func (l *leases) liveLocked(name string, now time.Time) (lease, bool) {
	le, ok := l.m[name]
	return le, ok && now.Before(le.until)
}

// Claim takes or renews holder's lease on name for ttl and reports whether
// holder has it.
func (s *Store) Claim(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if err := checkLease(name, holder, ttl); err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return false, fmt.Errorf("claim %q: %w", name, err)
	}
	l := &s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if le, live := l.liveLocked(name, now); live && le.holder != holder {
		return false, nil
	}
	if l.m == nil {
		l.m = make(map[string]lease)
	}
	l.m[name] = lease{holder: holder, until: now.Add(ttl)}
	return true, nil
}

// Renew renews holder's live leases among names and returns those renewed.
func (s *Store) Renew(ctx context.Context, holder string, names []string, ttl time.Duration) ([]string, error) {
	if err := checkLease("renew", holder, ttl); err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	l := &s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var out []string
	for _, n := range names {
		if le, live := l.liveLocked(n, now); live && le.holder == holder {
			l.m[n] = lease{holder: holder, until: now.Add(ttl)}
			out = append(out, n)
		}
	}
	return out, nil
}

// Release gives up holder's lease on name; another's is left alone.
func (s *Store) Release(ctx context.Context, name, holder string) error {
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("release %q: %w", name, err)
	}
	l := &s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	if le, ok := l.m[name]; ok && le.holder == holder {
		delete(l.m, name)
	}
	return nil
}

// Holders returns the holders of live leases, each once: on bbolt, this
// process's alone, since no other can open the file.
func (s *Store) Holders(ctx context.Context) ([]string, error) {
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("holders: %w", err)
	}
	l := &s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	var out []string
	for name := range l.m {
		if le, live := l.liveLocked(name, now); live && !slices.Contains(out, le.holder) {
			out = append(out, le.holder)
		}
	}
	return out, nil
}

func checkLease(name, holder string, ttl time.Duration) error {
	switch {
	case name == "":
		return errors.New("empty lease name")
	case holder == "":
		return errors.New("empty holder")
	case ttl <= 0:
		return fmt.Errorf("lease ttl %v, want a positive one", ttl)
	}
	return nil
}

// usable refuses a call on a closed or damaged store, or one whose context
// has ended, as every other method does.
func (s *Store) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if d := s.damage.Load(); d != nil {
		return d
	}
	return nil
}

// PendingOf returns the conversation's unanswered entries in the platform's
// order: by Order, ties by Seq. It finds them in the conversation index in
// memory (convindex.go), which holds the entries in flight only, and reads
// them in one read transaction; a conversation with nothing in flight, most
// of the dispatcher's looks, costs no transaction at all. An entry the
// index names but that is answered, or gone (expired), or another entry of
// its key received since, is one whose change the index has not yet
// applied, and is left out: the read is as if it came after that commit.
func (s *Store) PendingOf(ctx context.Context, conversation string) ([]store.InboxEntry, error) {
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("pending inbox of %q: %w", conversation, err)
	}
	refs := s.pending.refs(conversation)
	if len(refs) == 0 {
		return nil, nil
	}
	var out []store.InboxEntry
	err := s.view(func(tx *bolt.Tx) error {
		out = out[:0]
		inbox := tx.Bucket(bucketInbox)
		for _, ref := range refs {
			key := []byte(ref.key)
			v := inbox.Get(key)
			if v == nil {
				continue
			}
			e, err := decodeInbox(v)
			if err != nil {
				return fmt.Errorf("conversation index names inbox entry %q: %w", key, err)
			}
			e.Key = ref.key
			if e.State == store.Answered || e.Seq != ref.seq {
				continue
			}
			if e.Conversation != conversation {
				return fmt.Errorf("%w: conversation index names inbox entry %q of seq %d under %q, but it is of %q", ErrCorrupt, key, e.Seq, conversation, e.Conversation)
			}
			e.Outbox = keptReply(tx, key)
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pending inbox of %q: %w", conversation, err)
	}
	slices.SortStableFunc(out, func(a, b store.InboxEntry) int {
		return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// eachPending calls fn with every unanswered entry's key and parsed record,
// in one read transaction: the pending index holds only the entries in
// flight, a few hundred under load.
func (s *Store) eachPending(fn func(tx *bolt.Tx, key []byte, r inboxRecord) error) error {
	return s.view(func(tx *bolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		return tx.Bucket(bucketInboxSeq).ForEach(func(k, key []byte) error {
			r, err := lookInbox(inbox, key)
			if err != nil {
				return fmt.Errorf("%w: pending seq %x: %w", ErrCorrupt, k, err)
			}
			return fn(tx, key, r)
		})
	})
}

// Unleased returns conversations with unanswered entries received more than
// minAge ago (by this process's clock) and no live lease, neither the
// conversation's nor the entry's.
func (s *Store) Unleased(ctx context.Context, minAge time.Duration, limit int) ([]string, error) {
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("unleased: %w", err)
	}
	type cand struct{ conv, key string }
	var found []cand
	cutoff := time.Now().Add(-minAge).UnixNano()
	err := s.eachPending(func(_ *bolt.Tx, key []byte, r inboxRecord) error {
		if r.received < cutoff {
			found = append(found, cand{string(r.conversation), string(key)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("unleased: %w", err)
	}
	l := &s.leases
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	seen := make(map[string]bool)
	var out []string
	for _, c := range found {
		if len(out) >= limit {
			break
		}
		if seen[c.conv] {
			continue
		}
		if _, live := l.liveLocked(c.conv, now); live {
			continue
		}
		if _, live := l.liveLocked(store.EntryLease(c.key), now); live {
			continue
		}
		seen[c.conv] = true
		out = append(out, c.conv)
	}
	return out, nil
}

// Listen calls f("") at once, then f with the conversation of every entry
// this Store records, until ctx ends. No other process can write the file,
// so these are all the entries there are.
func (s *Store) Listen(ctx context.Context, f func(conversation string)) error {
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	l := &s.leases
	l.mu.Lock()
	if l.listeners == nil {
		l.listeners = make(map[*func(string)]struct{})
	}
	l.listeners[&f] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.listeners, &f)
		l.mu.Unlock()
	}()
	f("")
	<-ctx.Done()
	return nil
}

// notify tells the listeners of an entry recorded in conversation. It runs
// after the commit, on the recording goroutine, holding no lock of the
// store's while the callbacks run.
func (s *Store) notify(conversation string) {
	l := &s.leases
	l.mu.Lock()
	if len(l.listeners) == 0 {
		l.mu.Unlock()
		return
	}
	fs := make([]func(string), 0, len(l.listeners))
	for f := range l.listeners {
		fs = append(fs, *f)
	}
	l.mu.Unlock()
	for _, f := range fs {
		f(conversation)
	}
}

// MarkSentUnder is MarkSent made only while holder's lease on name is live;
// otherwise it changes nothing and returns an error wrapping
// store.ErrLeaseLost. The lease is checked inside the write's transaction.
func (s *Store) MarkSentUnder(ctx context.Context, key, name, holder string, now time.Time) error {
	return s.markSent(ctx, key, now, func() error {
		l := &s.leases
		l.mu.Lock()
		defer l.mu.Unlock()
		if le, live := l.liveLocked(name, time.Now()); !live || le.holder != holder {
			return fmt.Errorf("mark %q sent under %q: %w", key, name, store.ErrLeaseLost)
		}
		return nil
	})
}

// Tokens are two buckets:
//
//	tokens      id -> expiry (8 bytes, timeKey) + data
//	tokens_exp  timeKey(expiry) + id -> nothing, in expiry order
//
// so that PutToken sweeps the few tokens expired first, as PostgreSQL's
// does, and a store never piles them up.

// tokenSweep bounds the expired tokens one PutToken deletes (it looks at
// four times as many, skipping due ones).
const tokenSweep = 16

var dueToken = []byte(store.DueTokenPrefix)

// PutToken keeps data under id until expires, replacing what id held, and
// deletes a few tokens expired before now.
func (s *Store) PutToken(ctx context.Context, id string, data []byte, expires, now time.Time) error {
	if err := checkKey("token", id); err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	if err := errors.Join(checkTime(expires), checkTime(now)); err != nil {
		return fmt.Errorf("put token %q: %w", id, err)
	}
	if err := errors.Join(checkNanoTime("expiry", expires), checkNanoTime("now", now)); err != nil {
		return fmt.Errorf("put token %q: %w", id, err)
	}
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("put token %q: %w", id, err)
	}
	k := []byte(id)
	exp := timeKey(expires)
	v := append(exp[:], data...)
	err := s.update(func(tx *bolt.Tx) error {
		tokens, byExp := tx.Bucket(bucketTokens), tx.Bucket(bucketTokensExp)
		if old := tokens.Get(k); len(old) >= 8 {
			if err := byExp.Delete(append(old[:8:8], k...)); err != nil {
				return err
			}
		}
		limit := timeKey(now)
		c := byExp.Cursor()
		ek, _ := c.First()
		for deleted, seen := 0, 0; deleted < tokenSweep && seen < 4*tokenSweep && len(ek) >= 8 && bytes.Compare(ek[:8], limit[:]) < 0; seen++ {
			if bytes.HasPrefix(ek[8:], dueToken) {
				// Kept until taken: its expiry is news (DueTokens).
				ek, _ = c.Next()
				continue
			}
			ek = bytes.Clone(ek)
			if err := tokens.Delete(ek[8:]); err != nil {
				return err
			}
			if err := byExp.Delete(ek); err != nil {
				return err
			}
			deleted++
			ek, _ = c.Seek(ek)
		}
		if err := tokens.Put(k, v); err != nil {
			return err
		}
		return byExp.Put(append(exp[:], k...), nil)
	})
	if err != nil {
		return fmt.Errorf("put token %q: %w", id, err)
	}
	return nil
}

// TakeToken removes the token id and returns its data and expiry; ok is
// false when there is none. An expired token is returned too: the caller
// says it expired.
func (s *Store) TakeToken(ctx context.Context, id string) (data []byte, expires time.Time, ok bool, err error) {
	if checkKey("token", id) != nil {
		return nil, time.Time{}, false, nil
	}
	if err := s.usable(ctx); err != nil {
		return nil, time.Time{}, false, fmt.Errorf("take token %q: %w", id, err)
	}
	k := []byte(id)
	err = s.update(func(tx *bolt.Tx) error {
		data, ok = nil, false
		tokens := tx.Bucket(bucketTokens)
		v := tokens.Get(k)
		if v == nil {
			return nil
		}
		if len(v) < 8 {
			return fmt.Errorf("%w: token %q of %d bytes", errRecord, id, len(v))
		}
		t, err := keyTime(v[:8])
		if err != nil {
			return err
		}
		data, expires, ok = bytes.Clone(v[8:]), t, true
		if err := tx.Bucket(bucketTokensExp).Delete(append(bytes.Clone(v[:8]), k...)); err != nil {
			return err
		}
		return tokens.Delete(k)
	})
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("take token %q: %w", id, err)
	}
	return data, expires, ok, nil
}

// DueTokens returns the IDs of at most limit tokens under prefix (which
// starts with store.DueTokenPrefix) expired before now, earliest expiry
// first. It reads tokens_exp from its start: the expired tokens ahead of
// the due ones are the few PutToken has not swept yet.
func (s *Store) DueTokens(ctx context.Context, prefix string, now time.Time, limit int) ([]string, error) {
	if !bytes.HasPrefix([]byte(prefix), dueToken) {
		return nil, fmt.Errorf("due tokens under %q: the prefix must start with %q", prefix, store.DueTokenPrefix)
	}
	if err := errors.Join(checkTime(now), checkNanoTime("now", now)); err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	var ids []string
	end := timeKey(now)
	p := []byte(prefix)
	err := s.view(func(tx *bolt.Tx) error {
		ids = ids[:0]
		c := tx.Bucket(bucketTokensExp).Cursor()
		for k, _ := c.First(); len(k) >= 8 && bytes.Compare(k[:8], end[:]) < 0 && len(ids) < limit; k, _ = c.Next() {
			if bytes.HasPrefix(k[8:], p) {
				ids = append(ids, string(k[8:]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("due tokens: %w", err)
	}
	return ids, nil
}

// EntryState returns the state of the entry key; ok is false when the inbox
// holds none.
func (s *Store) EntryState(ctx context.Context, key string) (store.InboxState, bool, error) {
	if err := s.usable(ctx); err != nil {
		return 0, false, fmt.Errorf("entry state %q: %w", key, err)
	}
	if checkKey("inbox key", key) != nil {
		return 0, false, nil
	}
	var state store.InboxState
	var ok bool
	err := s.view(func(tx *bolt.Tx) error {
		r, err := lookInbox(tx.Bucket(bucketInbox), []byte(key))
		switch {
		case errors.Is(err, store.ErrUnknownEntry):
			return nil
		case err != nil:
			return err
		}
		state, ok = r.state, true
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("entry state %q: %w", key, err)
	}
	return state, ok, nil
}
