package sessionmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/flowbridge/flowbridge/bridge/store"
)

// answered writes an answered inbox entry of key into s: a redelivery of
// key is then recognised.
func answered(t *testing.T, s *Store, key string) {
	t.Helper()
	now := time.Now()
	if _, err := s.Receive(t.Context(), store.InboxEntry{Key: key, Event: []byte("e"), Received: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(t.Context(), key, "r", nil, now); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantRefused opens path and checks that Open refuses it with target,
// naming the path and the way out (the marker to delete, or store.id).
func wantRefused(t *testing.T, what, path string, opts Options, target error, says string) {
	t.Helper()
	s, err := Open(path, opts)
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, target) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), says) {
		t.Errorf("Open of %s = %v, want %v naming %s and saying %q", what, err, target, path, says)
	}
}

// TestOpenKnowsItsStore: the store file carries an ID and a generation,
// and so does the marker beside it; Open refuses what would otherwise be
// served as this store and answer redeliveries twice: another flowbridge's
// file put in its place (140 of 208 events answered twice before), a
// restored backup (105 of 214), and, with store.id set, an emptied volume
// (179 of 293).
func TestOpenKnowsItsStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowbridge.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := s.Identity()
	if !ValidID(id.ID) || id.Generation != 1 || !id.New {
		t.Fatalf("Identity() of a new store = %+v, want a valid ID, generation 1, new", id)
	}
	answered(t, s, "slack/msg/C1/1.000001")
	var backup bytes.Buffer
	if _, err := s.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	answered(t, s, "slack/msg/C1/1.000002") // after the backup
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen = %v", err)
	}
	if got := s.Identity(); got.ID != id.ID || got.Generation <= id.Generation || got.New {
		t.Fatalf("Identity() reopened = %+v, want %s at a later generation than %d, not new", got, id.ID, id.Generation)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("restored backup", func(t *testing.T) {
		if err := os.WriteFile(path, backup.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, "a restored /backup", path, Options{}, ErrRestored, "delete "+CreatedMarker(path))
		if err := os.WriteFile(path, current, 0o600); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("copy taken while stopped", func(t *testing.T) {
		cp := filepath.Join(dir, "copy.db")
		copyFile(t, path, cp)
		s, err := Open(path, Options{}) // one more run
		if err != nil {
			t.Fatal(err)
		}
		answered(t, s, "slack/msg/C1/1.000003")
		s.Close()
		now, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, cp, path)
		wantRefused(t, "a copy older than the last run", path, Options{}, ErrRestored, "delete "+CreatedMarker(path))
		current = now
		if err := os.WriteFile(path, current, 0o600); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("foreign store", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "flowbridge.db")
		o, err := Open(other, Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.Close()
		copyFile(t, other, path)
		wantRefused(t, "another flowbridge's store", path, Options{}, ErrForeign, "delete "+CreatedMarker(path))
		// Its marker brought along too: only store.id tells.
		copyFile(t, CreatedMarker(path), filepath.Join(dir, "marker"))
		copyFile(t, CreatedMarker(other), CreatedMarker(path))
		wantRefused(t, "another flowbridge's store and marker, with store.id", path, Options{ID: id.ID}, ErrForeign, "store.id")
		copyFile(t, filepath.Join(dir, "marker"), CreatedMarker(path))
		if err := os.WriteFile(path, current, 0o600); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("emptied volume", func(t *testing.T) {
		keep := filepath.Join(dir, "kept.db")
		if err := os.Rename(path, keep); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(CreatedMarker(path), keep+".marker"); err != nil {
			t.Fatal(err)
		}
		wantRefused(t, "an emptied volume, with store.id", path, Options{ID: id.ID}, ErrMissing, "store.id")
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Open created %s after refusing it: %v", path, err)
		}
		if err := os.Rename(keep, path); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(keep+".marker", CreatedMarker(path)); err != nil {
			t.Fatal(err)
		}
	})

	// The way out each message gives: deleting the marker serves the file
	// (here the restored backup), which moves on past the marker's
	// generation.
	if err := os.WriteFile(path, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(CreatedMarker(path)); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{ID: id.ID})
	if err != nil {
		t.Fatalf("Open of the backup once the marker is deleted = %v", err)
	}
	if got := s.Identity(); got.ID != id.ID {
		t.Errorf("Identity() of the restored backup = %+v, want store %s", got, id.ID)
	}
	s.Close()
	m, err := readMarker(path)
	if err != nil || m.id != id.ID || m.generation != s.Identity().Generation {
		t.Errorf("marker after the start = %+v, %v; want store %s, generation %d", m, err, id.ID, s.Identity().Generation)
	}
}

// TestOpenGivesAnOldStoreItsID: a store and marker kept by a flowbridge
// before store IDs open as before, and take the configured ID, or a new one.
func TestOpenGivesAnOldStoreItsID(t *testing.T) {
	t.Parallel()
	for _, want := range []string{"", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"} {
		s, path := openTest(t, Options{})
		if err := s.db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			return errors.Join(meta.Delete(metaID), meta.Delete(metaGeneration))
		}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		old := "flowbridge keeps its store in flowbridge.db. While this file exists, flowbridge refuses to start without it rather than create a new, empty one; delete this file to let it.\n"
		if err := os.WriteFile(CreatedMarker(path), []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path, Options{ID: want})
		if err != nil {
			t.Fatalf("Open of a store without an ID (store.id %q) = %v", want, err)
		}
		got := s.Identity()
		s.Close()
		if !ValidID(got.ID) || (want != "" && got.ID != want) || !got.New {
			t.Errorf("Identity() of an old store given %q = %+v", want, got)
		}
	}
}
