package sessionmap

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// A store knows itself: its file carries a store ID, drawn when the store
// is created, and a generation, which every Open and every Backup moves
// on; the marker beside the file (CreatedMarker) repeats both. So a start
// can tell the file it served last from
//
//   - a foreign store: a file of another ID than the marker's (or than
//     Options.ID), another flowbridge's put in its place (ErrForeign);
//   - an older copy: a file of the marker's ID but of an earlier generation,
//     a restored backup, which has forgotten the events answered after it
//     was taken (ErrRestored);
//   - nothing at all: the file gone, while the marker, or Options.ID, says
//     a store was there (ErrMissing).
//
// What it cannot tell: a volume emptied of both file and marker is a first
// start unless Options.ID names the store expected; a copy taken while the
// store served, with no Open or Backup since, has the live generation; and
// another flowbridge's file put in place together with its marker is its
// own store again unless Options.ID names this one.

// Errors of the store's identity; the message says the way out.
var (
	// ErrForeign means the store file is another store than the one kept
	// at that path before (the marker says) or than Options.ID names.
	ErrForeign = errors.New("store file is another store")
	// ErrRestored means the store file is an older copy of the store the
	// marker knows: a restored backup.
	ErrRestored = errors.New("store file is an older copy of the store")
)

// Keys of the identity in bucketMeta.
var (
	metaID         = []byte("store_id")
	metaGeneration = []byte("generation")
)

// idLen is the length of a store ID: crypto/rand.Text's 26 characters of
// base32 (A-Z, 2-7), 130 random bits.
const idLen = 26

// newID returns a new random store ID.
func newID() string { return rand.Text() }

// ValidID reports whether id has the form of a store ID: 26 characters of
// A-Z and 2-7.
func ValidID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for _, c := range []byte(id) {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}

// Identity is who a store is.
type Identity struct {
	// ID is the store's ID, drawn when it was created.
	ID string
	// Generation counts the store's opens and backups.
	Generation int64
	// New is true when Open created the store, or gave an existing one
	// (kept by a flowbridge before store IDs) its ID.
	New bool
}

// Identity returns the store's identity as Open found and moved it on.
func (s *Store) Identity() Identity {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	return s.id
}

// marker is what the marker file says: an ID and generation, empty and 0
// for the marker of a flowbridge before store IDs.
type marker struct {
	exists     bool
	id         string
	generation int64
}

// readMarker reads the marker beside the store at path.
func readMarker(path string) (marker, error) {
	b, err := os.ReadFile(CreatedMarker(path))
	if errors.Is(err, fs.ErrNotExist) {
		return marker{}, nil
	}
	if err != nil {
		return marker{}, fmt.Errorf("marker: %w", err)
	}
	m := marker{exists: true}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		switch k, v = strings.TrimSpace(k), strings.TrimSpace(v); k {
		case "store_id":
			m.id = v
		case "generation":
			m.generation, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return m, nil
}

// writeMarker replaces the marker beside the store at path with one saying
// id and generation: a new file renamed over the old, then the directory
// synced, so a crash leaves the old marker or the new one.
func writeMarker(path, id string, generation int64) error {
	name := CreatedMarker(path)
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	_, err = fmt.Fprintf(f, "flowbridge keeps its store in %s. While this file exists, flowbridge refuses to start without it "+
		"rather than create a new, empty one, and refuses a file of another store or an older copy of this one; "+
		"delete this file to let it.\nstore_id = %s\ngeneration = %d\n", filepath.Base(path), id, generation)
	err = errors.Join(err, f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("marker: %w", err)
	}
	if d, err := os.Open(filepath.Dir(name)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// settleIdentity compares the identity in the store file db with the
// marker's and with want (Options.ID, "" for none), refusing a foreign
// store or an older copy, then moves the generation on in the file and the
// marker. A file without an ID (new, or kept by a flowbridge before store
// IDs) gets want, or a new one, unless the marker names an ID: then the
// file is not the store the marker knows.
func settleIdentity(db *bolt.DB, path, want string) (Identity, error) {
	m, err := readMarker(path)
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		id = Identity{ID: string(meta.Get(metaID))}
		if v := meta.Get(metaGeneration); v != nil {
			g, err := decodeCounter(v)
			if err != nil {
				return fmt.Errorf("%w: store generation: %w", ErrCorrupt, err)
			}
			id.Generation = g
		}
		if err := checkIdentity(path, id, m, want); err != nil {
			return err
		}
		if id.ID == "" {
			id.ID, id.New = cmp.Or(want, newID()), true
			if err := meta.Put(metaID, []byte(id.ID)); err != nil {
				return err
			}
		}
		id.Generation = max(id.Generation, m.generation) + 1
		return meta.Put(metaGeneration, encodeCounter(id.Generation))
	})
	if err != nil {
		return Identity{}, err
	}
	return id, writeMarker(path, id.ID, id.Generation)
}

// checkIdentity refuses the file of identity id at path when the marker m
// or want say it is not the store kept there.
func checkIdentity(path string, id Identity, m marker, want string) error {
	marker := CreatedMarker(path)
	switch {
	case want != "" && id.ID != "" && id.ID != want:
		return fmt.Errorf("%w: %s is store %s, but store.id in the config names store %s: another flowbridge's store "+
			"put in its place? Put this flowbridge's store file back, or, to serve from this one from now on "+
			"(its conversations and inbox, not this flowbridge's), set store.id = %q",
			ErrForeign, path, id.ID, want, id.ID)
	case m.id != "" && id.ID != m.id:
		what := "store " + id.ID
		if id.ID == "" {
			what = "a store without an ID (kept by a flowbridge before store IDs)"
		}
		return fmt.Errorf("%w: %s is %s, but %s says store %s was kept there: another flowbridge's store put in its place? "+
			"Put this flowbridge's store file back, or, to serve from this one from now on (its conversations and "+
			"inbox, not this flowbridge's: events this flowbridge answered may be answered again when redelivered), delete %s",
			ErrForeign, path, what, marker, m.id, marker)
	case m.id != "" && id.Generation < m.generation:
		return fmt.Errorf("%w: %s is generation %d of store %s, but %s says the store reached generation %d: "+
			"a restored backup, or an older copy. It has forgotten what happened after it was taken: events answered "+
			"since may be answered again when the platforms redeliver them, and sessions started since are lost. "+
			"Put the newer file back if there is one, or, to serve from this copy all the same, delete %s",
			ErrRestored, path, id.Generation, id.ID, marker, m.generation, marker)
	}
	return nil
}
