package sessionmap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Compaction is what Open did to shrink the file (Options.CompactFree).
type Compaction struct {
	// Before is the file's size before compaction; zero when Open did not
	// compact.
	Before int64
	// After is the compacted file's size.
	After int64
	// Err is why the compaction failed (the store then serves from the
	// file as it was).
	Err error
}

// Compaction reports what Open did to shrink the file.
func (s *Store) Compaction() Compaction { return s.compaction }

// compactTxSize bounds the bytes copied in one transaction of compaction.
const compactTxSize = 16 << 20

// freeBytes returns the size of the file f that db holds and how many of
// its bytes hold no data: free and pending pages, and the room past the
// last page.
func freeBytes(db *bolt.DB, f *os.File) (size, free int64) {
	info, err := f.Stat()
	if err != nil {
		return 0, 0
	}
	var used int64
	if err := db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		return info.Size(), 0
	}
	st := db.Stats()
	return info.Size(), info.Size() - used + int64(st.FreePageN+st.PendingPageN)*int64(db.Info().PageSize)
}

// compactFile copies the store db holds at path into a new file beside it
// with bbolt's Compact (bucket sequences kept, pages full), syncs it, and
// renames it over path: a crash leaves the old file or the new one, and at
// worst the new one's leftover (path + ".compact"), which the next
// compaction removes. db stays open on the old file, which the caller
// closes.
func compactFile(db *bolt.DB, path string) error {
	tmp := path + ".compact"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("compact: %w", err)
	}
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	err = bolt.Compact(dst, db, compactTxSize)
	if err == nil {
		err = dst.Sync()
	}
	err = errors.Join(err, dst.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compact: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// sameFile reports whether f is the file at path now.
func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
