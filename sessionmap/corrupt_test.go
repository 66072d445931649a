package sessionmap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// realStore writes a store with enough data to span many pages and returns
// its path, the size of its live data and the number of a page of live
// sessions.
func realStore(t *testing.T) (path string, live int64, leaf int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "flowbridge.db")
	buildFixture(t, path, 3000)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error { // tx.Page wants a writable transaction
		// The page that lists the buckets is a leaf too, with one entry per
		// bucket: zeroing it is damage of another kind (no bucket opens).
		directory := int(tx.Cursor().Bucket().Root())
		for id := int(tx.Size())/os.Getpagesize() - 1; id > 1; id-- {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info != nil && info.Type == "leaf" && info.Count > 10 && id != directory {
				leaf = id
				return nil
			}
		}
		return errors.New("no leaf page")
	})
	if err != nil {
		t.Fatal(err)
	}
	live = s.Stats().FileSize
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, live, leaf
}

// editMetas applies edit to both meta pages of a copy of data and gives
// them valid checksums again, so only precheck's bounds checks can object.
func editMetas(data []byte, edit func(meta []byte)) []byte {
	data = bytes.Clone(data)
	ps := os.Getpagesize()
	for _, off := range []int{0, ps} {
		m := data[off+pageHeaderSize : off+pageHeaderSize+metaSize]
		edit(m)
		h := fnv.New64a()
		_, _ = h.Write(m[:metaChecksumAt])
		binary.NativeEndian.PutUint64(m[metaChecksumAt:], h.Sum64())
	}
	return data
}

func TestOpenCorrupt(t *testing.T) {
	t.Parallel()
	path, live, _ := realStore(t)
	real, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := os.Getpagesize()
	rng := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	damagedMetas := bytes.Clone(real)
	damagedMetas[pageHeaderSize+20] ^= 0xff          // meta 0's root: checksum fails
	damagedMetas[pageSize+pageHeaderSize+20] ^= 0xff // meta 1's root: checksum fails
	ne := binary.NativeEndian
	pages := uint64(live) / uint64(pageSize)

	tests := []struct {
		name string
		data []byte
	}{
		{"garbage", garbage},
		{"short garbage", []byte("not a database")},
		{"zeros", make([]byte, 4*pageSize)},
		{"text file", []byte(strings.Repeat("flowbridge\n", 2000))},
		{"truncated to one page", real[:pageSize]},
		{"truncated to two pages", real[:2*pageSize]},
		{"truncated to half", real[:live/2]},
		{"truncated by one page", real[:live-int64(pageSize)]},
		{"both metas damaged", damagedMetas},
		{"root beyond the end", editMetas(real, func(m []byte) { ne.PutUint64(m[16:], pages+3) })},
		{"root on a meta page", editMetas(real, func(m []byte) { ne.PutUint64(m[16:], 1) })},
		{"root on the freelist", editMetas(real, func(m []byte) { ne.PutUint64(m[16:], ne.Uint64(m[32:])) })},
		{"freelist beyond the end", editMetas(real, func(m []byte) { ne.PutUint64(m[32:], pages+1) })},
		{"more pages than the file", editMetas(real, func(m []byte) { ne.PutUint64(m[40:], pages*4) })},
		{"page size not a power of two", editMetas(real, func(m []byte) { ne.PutUint32(m[8:], 3000) })},
		{"newer bbolt format", editMetas(real, func(m []byte) { ne.PutUint32(m[4:], boltVersion+1) })},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".db")
			if err := os.WriteFile(p, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(p, Options{Timeout: time.Millisecond})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%s) = nil error, want ErrCorrupt", tt.name)
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), p) {
				t.Errorf("Open(%s) = %v, want ErrCorrupt naming %s", tt.name, err, p)
			}
			if _, ok := errors.AsType[*DamageError](err); !ok || !strings.Contains(err.Error(), "backup") {
				t.Errorf("Open(%s) = %v, want a *DamageError with the way out", tt.name, err)
			}
			// The failed open left no lock behind: a second one finds the
			// damage again, not the lock.
			if _, err := Open(p, Options{Timeout: time.Millisecond}); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("second Open(%s) = %v, want ErrCorrupt", tt.name, err)
			}
		})
	}
}

func TestOpenNotAFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
	}{
		{"directory", dir},
		{"missing parent", filepath.Join(dir, "no", "such", "dir", "s.db")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.path, Options{Timeout: time.Millisecond})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%q) = nil error, want one", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) {
				t.Errorf("Open(%q) = %v, want the path in the message", tt.path, err)
			}
		})
	}
}

func TestCheckFindsDamagedPage(t *testing.T) {
	t.Parallel()
	path, _, leaf := realStore(t)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Zero a live leaf page: the meta pages stay valid, so Open's cheap
	// check passes and only the full walk sees it.
	pageSize := os.Getpagesize()
	if _, err := f.WriteAt(make([]byte, pageSize), int64(leaf*pageSize)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	s, err := Open(path, Options{})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open of a file with a zeroed page = %v, want nil or ErrCorrupt", err)
		}
		return
	}
	defer s.Close()
	if err := s.Check(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Check() of a file with a zeroed page = %v, want ErrCorrupt", err)
	}
}

func TestOpenTurnsPanicIntoErrCorrupt(t *testing.T) {
	t.Parallel()
	path, _, _ := realStore(t)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Without its counter, Open recounts the sessions bucket, walking pages
	// bbolt trusts blindly; fill the bucket's root page with junk.
	var root int
	err = s.db.Update(func(tx *bolt.Tx) error {
		root = int(tx.Bucket(bucketSessions).Root())
		return tx.Bucket(bucketMeta).Delete(metaSessions)
	})
	if err != nil || root == 0 {
		t.Fatalf("sessions bucket root = %d, %v, want a page", root, err)
	}
	_ = s.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	ps := os.Getpagesize()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, ps), int64(root*ps)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	// The consistency check would refuse the file before bbolt reads the
	// page; without it, the recount panics or faults inside bbolt.
	if _, err := Open(path, Options{Check: CheckOff}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(CheckOff) of a file with a junk bucket page = %v, want ErrCorrupt naming %s", err, path)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "bucket sessions") {
		t.Fatalf("Open of a file with a junk bucket page = %v, want ErrCorrupt naming the bucket", err)
	}
	// The lock went with the recovered open.
	if _, err := Open(path, Options{Timeout: time.Millisecond}); errors.Is(err, ErrLocked) {
		t.Errorf("Open after a recovered panic = %v, want the lock released", err)
	}
}

func TestOpenChecksBucketRoots(t *testing.T) {
	t.Parallel()
	path, live, _ := realStore(t)
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var root int
	err = s.db.View(func(tx *bolt.Tx) error {
		root = int(tx.Bucket(bucketSessions).Root())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket's header (root page id, then sequence) sits in the root
	// leaf right after its name; point it past the end of the file, in
	// every copy of the root leaf (each Open writes the meta bucket, so
	// freed copies of it stay in the file beside the live one).
	var hdr [8]byte
	binary.NativeEndian.PutUint64(hdr[:], uint64(root))
	name := append([]byte("sessions"), hdr[:]...)
	found := 0
	for i := bytes.Index(data, name); i >= 0; i = bytes.Index(data, name) {
		binary.NativeEndian.PutUint64(data[i+len("sessions"):], uint64(live)/uint64(os.Getpagesize())+100)
		found++
	}
	if found == 0 {
		t.Fatal("sessions bucket header not found")
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "sessions") {
		t.Errorf("Open with a bucket root past the end = %v, want ErrCorrupt naming the bucket", err)
	}
}
