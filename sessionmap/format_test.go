package sessionmap

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// writeOldStore writes a store in the layout of format 1 or 2, as the
// flowbridge of that format left it: a session with an agent choice, an
// audit entry, de-duplication entries and the counters. Format 1 kept each
// entry by raw ID in events and by expiry in events_by_expiry; format 2 kept
// the first 16 bytes of its SHA-256 in a generation, a bucket nested in
// dedupe named by the generation's expiry, whose sequence counts its
// entries. It returns the name of the (format 2) generation.
func writeOldStore(t *testing.T, path string, format int, rec Session, audit AuditEntry, ids []string, exp time.Time) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names := []string{"meta", "sessions", "agents", "replies", "audit"}
	if format == 1 {
		names = append(names, "events", "events_by_expiry")
	} else {
		names = append(names, "dedupe")
	}
	expKey := timeKey(exp)
	err = db.Update(func(tx *bolt.Tx) error {
		bk := map[string]*bolt.Bucket{}
		for _, name := range names {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			bk[name] = b
		}
		v, err := appendSession(nil, rec)
		if err != nil {
			return err
		}
		av, err := encodeAudit(audit)
		if err != nil {
			return err
		}
		at := timeKey(audit.Time)
		type put struct {
			bucket string
			k, v   []byte
		}
		puts := []put{
			{"meta", []byte("format"), encodeCounter(int64(format))},
			{"meta", []byte("n_sessions"), encodeCounter(1)},
			{"meta", []byte("n_events"), encodeCounter(int64(len(ids)))},
			{"meta", []byte("n_audit"), encodeCounter(1)},
			{"sessions", []byte(rec.Key), v},
			{"agents", []byte(rec.Key), []byte{textV1, 'o', 'p', 's'}},
			{"audit", binary.BigEndian.AppendUint64(at[:], 1), av},
		}
		for _, p := range puts {
			if err := bk[p.bucket].Put(p.k, p.v); err != nil {
				return err
			}
		}
		if format == 1 {
			for _, id := range ids {
				if err := bk["events"].Put([]byte(id), append([]byte{1}, expKey[:]...)); err != nil {
					return err
				}
				if err := bk["events_by_expiry"].Put(append(expKey[:], id...), nil); err != nil {
					return err
				}
			}
			return nil
		}
		gen, err := bk["dedupe"].CreateBucket(expKey[:])
		if err != nil {
			return err
		}
		for _, id := range ids {
			sum := sha256.Sum256([]byte(id))
			if err := gen.Put(sum[:16], []byte{}); err != nil {
				return err
			}
		}
		return gen.SetSequence(uint64(len(ids)))
	})
	if err != nil {
		t.Fatal(err)
	}
	return expKey[:]
}

func TestOpenUpgrades(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	rec := Session{Key: "slack/T1/C1/1.2", Agent: "helper", SessionUUID: testUUID(1), Created: now, LastUsed: now}
	audit := AuditEntry{Time: now, Platform: "slack", User: "U1", Flow: "healthcheck", Outcome: store.OutcomeOK, Params: map[string]string{"host": "web1"}}
	for _, format := range []int{1, 2} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flowbridge.db")
			writeOldStore(t, path, format, rec, audit, []string{"slack/Ev1", "slack/Ev2"}, now.Add(time.Hour))

			s, err := Open(path, Options{})
			if err != nil {
				t.Fatalf("Open of a format %d store = %v", format, err)
			}
			if got, ok, err := s.Session(t.Context(), rec.Key); err != nil || !ok || !sameSession(got, rec) {
				t.Errorf("Session after upgrade = %+v, %v, %v, want %+v", got, ok, err, rec)
			}
			if got, ok, err := s.ConversationAgent(t.Context(), rec.Key); err != nil || !ok || got != "ops" {
				t.Errorf("ConversationAgent after upgrade = %q, %v, %v, want ops", got, ok, err)
			}
			if got, err := s.Audit(t.Context(), AuditFilter{}); err != nil || len(got) != 1 || !sameAudit(got[0], audit) {
				t.Errorf("Audit after upgrade = %+v, %v, want [%+v]", got, err, audit)
			}
			if st := s.Stats(); st.Sessions != 1 || st.Inbox != 0 || st.AuditEntries != 1 {
				t.Errorf("Stats() after upgrade = %+v, want 1 session, an empty inbox and 1 audit entry", st)
			}
			// The old entries are dropped: the events are new to the inbox.
			if first, err := s.Receive(t.Context(), store.InboxEntry{Key: "slack/Ev2", Event: []byte("e"), Received: now}); err != nil || !first {
				t.Errorf("Receive(slack/Ev2) after upgrade = %v, %v, want true", first, err)
			}
			if err := s.Check(); err != nil {
				t.Errorf("Check() after upgrade = %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// The upgrade was written: format 3, the old buckets and
			// counter gone, the inbox's there.
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			err = db.View(func(tx *bolt.Tx) error {
				meta := tx.Bucket(bucketMeta)
				if v, err := decodeCounter(meta.Get(metaFormat)); err != nil || v != formatVersion {
					t.Errorf("format after upgrade = %d, %v, want %d", v, err, formatVersion)
				}
				if meta.Get(metaOldEvents) != nil {
					t.Errorf("meta %s kept after upgrade", metaOldEvents)
				}
				for _, name := range oldDedupeBuckets {
					if tx.Bucket(name) != nil {
						t.Errorf("bucket %s kept after upgrade", name)
					}
				}
				for _, name := range allBuckets {
					if tx.Bucket(name) == nil {
						t.Errorf("no bucket %s after upgrade", name)
					}
				}
				return nil
			})
			_ = db.Close()
			if err != nil {
				t.Fatal(err)
			}

			// And it opens again as format 3, keeping what was written since.
			s, err = Open(path, Options{})
			if err != nil {
				t.Fatalf("reopen after upgrade = %v", err)
			}
			defer s.Close()
			if p, err := s.Pending(t.Context()); err != nil || len(p) != 1 || p[0].Key != "slack/Ev2" {
				t.Errorf("Pending() after reopen = %+v, %v, want slack/Ev2", p, err)
			}
			if st := s.Stats(); st.Sessions != 1 || st.Inbox != 1 {
				t.Errorf("Stats() after reopen = %+v, want 1 session and 1 inbox entry", st)
			}
		})
	}
}

// TestUpgradeChecksGenerations: deleting the old dedupe bucket walks the
// pages of its generations, which bbolt follows without bounds checks; one
// rooted past the end of the file is refused before that walk.
func TestUpgradeChecksGenerations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	ids := make([]string, 1000) // more than a page: the generation gets its own root
	for i := range ids {
		ids[i] = fmt.Sprint("ev", i)
	}
	name := writeOldStore(t, path, 2, Session{Key: "k"}, AuditEntry{Time: now}, ids, now)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var root, pages uint64
	_ = db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("dedupe")).Bucket(name).Root())
		pages = uint64(tx.Size()) / uint64(db.Info().PageSize)
		return nil
	})
	_ = db.Close()
	if root == 0 {
		t.Fatal("generation is inline")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The generation's header (root page id, then sequence) follows its
	// name in the parent's leaf; point it past the end of the file.
	i := bytes.Index(data, binary.NativeEndian.AppendUint64(bytes.Clone(name), root))
	if i < 0 {
		t.Fatal("generation header not found")
	}
	binary.NativeEndian.PutUint64(data[i+len(name):], pages+100)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "dedupe/") {
		t.Errorf("Open with a generation rooted past the end = %v, want ErrCorrupt naming it", err)
	}
}
