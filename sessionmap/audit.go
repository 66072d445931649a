package sessionmap

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// AuditEntry records one flow run, refusal or confirmation.
type AuditEntry = store.AuditEntry

// AuditFilter selects audit entries; its conditions are ANDed and zero
// values match everything.
type AuditFilter = store.AuditFilter

// Audit keys are timeKey(Time) followed by the bucket's big-endian sequence
// number, so entries sort by time and never collide, even within one
// nanosecond. The value is a version byte and JSON with short names.
const auditV1 = 1

type auditRecord struct {
	Platform     string            `json:"p,omitempty"`
	User         string            `json:"u,omitempty"`
	UserName     string            `json:"un,omitempty"`
	Channel      string            `json:"ch,omitempty"`
	Conversation string            `json:"cv,omitempty"`
	Flow         string            `json:"f,omitempty"`
	Params       map[string]string `json:"pa,omitempty"`
	Outcome      string            `json:"o,omitempty"`
	Detail       string            `json:"d,omitempty"`
	Duration     time.Duration     `json:"du,omitempty"`
	Approver     string            `json:"ap,omitempty"`
}

// AppendAudit appends e to the audit log.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	if err := checkTime(e.Time); err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	v, err := encodeAudit(e)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	tk := timeKey(e.Time)
	err = s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		// Keys mostly arrive in order: full pages waste no space.
		b.FillPercent = 0.9
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		if err := b.Put(binary.BigEndian.AppendUint64(tk[:], seq), v); err != nil {
			return err
		}
		return addCounter(tx, metaAudit, 1)
	})
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	return nil
}

// Audit returns the entries f selects, oldest first. It seeks to f.Since
// (or, with f.Newest, walks back from f.Until), reading in chunks of short
// transactions.
func (s *Store) Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	var lo, hi []byte
	if !f.Since.IsZero() {
		k := timeKey(clampTime(f.Since))
		lo = k[:]
	}
	if !f.Until.IsZero() {
		k := timeKey(clampTime(f.Until))
		hi = k[:]
	}
	var out []AuditEntry
	visit := func(k, v []byte) (bool, error) {
		e, err := decodeAudit(k, v)
		if err != nil {
			return false, err
		}
		if auditMatch(f, e) {
			out = append(out, e)
		}
		return f.Limit <= 0 || len(out) < f.Limit, nil
	}
	var err error
	if f.Newest {
		err = s.scanBack(bucketAudit, hi, func(k []byte) bool { return lo == nil || bytes.Compare(k, lo) >= 0 }, visit)
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	} else {
		err = s.scan(bucketAudit, lo, func(k []byte) bool { return hi == nil || bytes.Compare(k, hi) < 0 }, visit)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

// auditMatch reports whether e meets f's exact-match conditions; the time
// bounds are the scan's.
func auditMatch(f AuditFilter, e AuditEntry) bool {
	return (f.Flow == "" || e.Flow == f.Flow) &&
		(f.User == "" || e.User == f.User) &&
		(f.Outcome == "" || e.Outcome == f.Outcome) &&
		(f.Platform == "" || e.Platform == f.Platform)
}

// PruneAudit deletes the entries older than before and returns how many,
// in chunks of short transactions.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("prune audit: %w", err)
	}
	hi := timeKey(clampTime(before))
	total := 0
	for {
		n := 0
		err := s.update(func(tx *bolt.Tx) error {
			b := tx.Bucket(bucketAudit)
			var old [][]byte
			c := b.Cursor()
			for k, _ := c.First(); k != nil && bytes.Compare(k, hi[:]) < 0 && len(old) < s.chunk; k, _ = c.Next() {
				old = append(old, k)
			}
			// Deleting after the walk: bbolt cursors can skip a key when the
			// bucket changes under them.
			for _, k := range old {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			n = len(old)
			return addCounter(tx, metaAudit, -int64(n))
		})
		if err != nil {
			return total, fmt.Errorf("prune audit: %w", err)
		}
		total += n
		if n < s.chunk {
			return total, nil
		}
	}
}

func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minNanoTime):
		return minNanoTime
	case t.After(maxNanoTime):
		return maxNanoTime
	}
	return t
}

func encodeAudit(e AuditEntry) ([]byte, error) {
	b, err := json.Marshal(auditRecord{
		Platform:     e.Platform,
		User:         e.User,
		UserName:     e.UserName,
		Channel:      e.Channel,
		Conversation: e.Conversation,
		Flow:         e.Flow,
		Params:       e.Params,
		Outcome:      e.Outcome,
		Detail:       e.Detail,
		Duration:     e.Duration,
		Approver:     e.Approver,
	})
	if err != nil {
		return nil, err
	}
	if 1+len(b) >= bolt.MaxValueSize {
		return nil, fmt.Errorf("entry of %d bytes is too large", len(b))
	}
	return append([]byte{auditV1}, b...), nil
}

// decodeAudit decodes an entry from its key and value; the JSON decoder
// copies every string out of v.
func decodeAudit(k, v []byte) (AuditEntry, error) {
	if len(k) != 16 {
		return AuditEntry{}, fmt.Errorf("%w: audit key of %d bytes", errRecord, len(k))
	}
	t, err := keyTime(k)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("%w: audit key: %w", errRecord, err)
	}
	if len(v) == 0 || v[0] != auditV1 {
		return AuditEntry{}, fmt.Errorf("%w: audit entry %x without version %d", errRecord, k, auditV1)
	}
	var r auditRecord
	if err := json.Unmarshal(v[1:], &r); err != nil {
		return AuditEntry{}, fmt.Errorf("%w: audit entry %x: %w", errRecord, k, err)
	}
	return AuditEntry{
		Time:         t,
		Platform:     r.Platform,
		User:         r.User,
		UserName:     r.UserName,
		Channel:      r.Channel,
		Conversation: r.Conversation,
		Flow:         r.Flow,
		Params:       r.Params,
		Outcome:      r.Outcome,
		Detail:       r.Detail,
		Duration:     r.Duration,
		Approver:     r.Approver,
	}, nil
}
