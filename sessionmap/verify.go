package sessionmap

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// CheckMode selects the consistency check Open runs on an existing file.
type CheckMode int

const (
	// CheckFull (the zero value) checks the whole file, however large: a
	// walk of the page tree, bbolt's Tx.Check and the inbox against its
	// indexes, every record's checksum included (about 0.6 s for 70 MB).
	CheckFull CheckMode = iota
	// CheckOff skips the check; bbolt still validates the meta pages, and
	// Open still refuses a file they point outside of.
	CheckOff
)

// maxProblems bounds the problems a DamageError lists; the rest are counted.
const maxProblems = 20

// A DamageError reports a damaged store file: what a consistency check found
// (Open, Check, CheckFile), or a read that faulted or panicked on a damaged
// page. It matches ErrCorrupt, and its message ends with the way out.
type DamageError struct {
	// Path is the store file.
	Path string
	// Problems says what is damaged, in the order found, at most 20.
	Problems []string
	// More counts the problems found beyond those listed.
	More int
}

func (e *DamageError) Error() string {
	var b strings.Builder
	b.WriteString("store is damaged: ")
	b.WriteString(strings.Join(e.Problems, "; "))
	if e.More > 0 {
		fmt.Fprintf(&b, " (and %d more)", e.More)
	}
	b.WriteString("; ")
	b.WriteString(e.Remedy())
	return b.String()
}

// Is makes a DamageError match ErrCorrupt.
func (e *DamageError) Is(target error) bool { return target == ErrCorrupt }

// Remedy says what to do about the damage.
func (e *DamageError) Remedy() string {
	return fmt.Sprintf("to recover, restore %s from a backup "+
		"(taken from the admin listener's /backup, or a copy of the file) and delete %s, which refuses a copy older than the store it knew; "+
		"or move it aside and delete %[2]s "+
		"to start with a new, empty store (sessions, inbox and audit log start over)", e.Path, CreatedMarker(e.Path))
}

func damage(path string, format string, args ...any) *DamageError {
	return &DamageError{Path: path, Problems: []string{fmt.Sprintf(format, args...)}}
}

// CheckFile checks the store file at path in full, without a time bound and
// without writing to it, as CheckFull on Open: the walk of the page tree,
// bbolt's own consistency check, the inbox against its indexes. It returns
// nil for a sound file, a *DamageError listing what is damaged, an error
// wrapping ErrLocked while a flowbridge has the file open, one wrapping
// ErrUnappliedJournal when the flowbridge before this one left a journal
// beside it, or the error of reading it. A missing file is an error here:
// CheckFile never creates one.
func CheckFile(path string) (err error) {
	if err := refuseJournal(path); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if err := refuseNotRegular(path); err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	defer f.Close()
	// A shared lock keeps writers out for the whole check; bbolt's read-only
	// open below takes one too, which this one does not block.
	if !tryLockShared(f) {
		return fmt.Errorf("check store: %w (%s)", ErrLocked, path)
	}
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("check store: %w", err)
	}
	if info.IsDir() {
		return fmt.Errorf("check store: %s is a directory", path)
	}
	if info.Size() == 0 {
		return emptyFile(path)
	}
	w, err := walkFile(f, path)
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if len(w.problems) > 0 {
		return w.damage(path)
	}

	// The walk showed that every page and element bbolt's check reads lies
	// inside the file, so it cannot fault on its own goroutine.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = closeAfterPanic(db)
			}
			err = damage(path, "reading it panicked: %v", r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultTimeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, classifyOpenError(path, err))
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		boltCheck(tx, w)
		return nil
	})
	if err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	if len(w.problems) > 0 {
		return w.damage(path)
	}
	return nil
}

// emptyFile is the error for a store file of no bytes.
func emptyFile(path string) error {
	return damage(path, "the file is empty (0 bytes), which no store ever is: most likely a copy that failed "+
		"or a disk that was full when the store was created")
}

// checkOpen runs Open's consistency check of the file f, which db has just
// opened: the walk, then bbolt's Tx.Check and the inbox's.
func checkOpen(path string, f *os.File, db *bolt.DB) error {
	w, err := walkFile(f, path)
	if err != nil {
		return err
	}
	if len(w.problems) == 0 {
		// Check runs on a goroutine of its own, which no recover reaches:
		// the walk has shown that it reads only inside the file.
		err := db.View(func(tx *bolt.Tx) error {
			boltCheck(tx, w)
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(w.problems) > 0 {
		return w.damage(path)
	}
	return nil
}

// boltCheck adds what bbolt's Tx.Check finds to w's problems and, when it
// finds nothing, what checkInboxTx finds. Run it only after a walk found
// nothing: Check reads pages on a goroutine of its own, where a fault on a
// page outside the file would end the process.
func boltCheck(tx *bolt.Tx, w *walker) {
	for err := range tx.Check() {
		w.problem("%v", err)
	}
	if len(w.problems) == 0 {
		checkInboxTx(tx, w.problem)
	}
}

// walker is the smallest reader of bbolt's page format that makes bbolt's
// Tx.Check safe to run: Check walks the tree of buckets on a goroutine of
// its own, where no recover or SetPanicOnFault of ours reaches, following
// page numbers and element offsets without bounds checks and recursing
// without a visited set. So before it runs, the walker checks the cases that
// would end the process there: a page number, an overflow or an element
// past the file (a memory fault) and a page named twice (a loop: unbounded
// recursion). It reads the file through an io.ReaderAt, never through
// bbolt's mmap, so damage gives problems, not faults. The rest — the
// freelist, pages neither used nor free, key order — it leaves to Tx.Check.
type walker struct {
	f        io.ReaderAt
	m        boltMeta
	used     bitset // pages in use: meta and tree
	problems []string
	more     int
}

// walkFile walks the whole file f from its current meta page. It returns an
// error only when f cannot be read; damage is in the walker's problems.
func walkFile(f *os.File, path string) (*walker, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	w := &walker{f: f}
	m, problem, err := fileMeta(f, uint64(info.Size()))
	switch {
	case err != nil:
		return nil, err
	case problem != "":
		w.problem("%s", problem)
		return w, nil
	}
	w.m = m
	w.used = newBitset(m.pgid)
	w.used.set(0)
	w.used.set(1)
	w.tree(m.root, "")
	return w, nil
}

func (w *walker) damage(path string) *DamageError {
	return &DamageError{Path: path, Problems: w.problems, More: w.more}
}

func (w *walker) problem(format string, args ...any) {
	if len(w.problems) < maxProblems {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	} else {
		w.more++
	}
}

// page is a page being checked: its header, and its first bytes (a whole
// page, or for an inline bucket's page its whole value).
type page struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
	span     uint64 // bytes the page covers, its overflow included
	b        []byte
	off      int64 // of the page in the file; -1 for an inline page
}

// at returns n bytes of p from offset at, which the caller has checked lie
// inside p.span.
func (w *walker) at(p *page, at, n uint64) ([]byte, error) {
	if at+n <= uint64(len(p.b)) {
		return p.b[at : at+n], nil
	}
	if p.off < 0 {
		return nil, fmt.Errorf("offset %d past the inline page", at+n)
	}
	b := make([]byte, n)
	if _, err := w.f.ReadAt(b, p.off+int64(at)); err != nil {
		return nil, err
	}
	return b, nil
}

// page reads page id, which where needs, and claims it and its overflow
// pages; it reports false (after noting why) when the page is unusable.
func (w *walker) page(id uint64, where string) (*page, bool) {
	if id < 2 || id >= w.m.pgid {
		w.problem("%s: page %d is outside the file's pages 2 to %d", where, id, w.m.pgid-1)
		return nil, false
	}
	if w.used.has(id) {
		w.problem("%s: page %d is used twice", where, id)
		return nil, false
	}
	ps := w.m.pageSize
	b := make([]byte, ps)
	if _, err := w.f.ReadAt(b, int64(id*ps)); err != nil {
		w.problem("%s: page %d: %v", where, id, err)
		return nil, false
	}
	ne := binary.NativeEndian
	p := &page{id: ne.Uint64(b[0:]), flags: ne.Uint16(b[8:]), count: ne.Uint16(b[10:]), overflow: ne.Uint32(b[12:]), b: b, off: int64(id * ps)}
	w.used.set(id)
	if p.id != id {
		w.problem("%s: page %d has the header of page %d", where, id, p.id)
		return nil, false
	}
	if id+uint64(p.overflow) >= w.m.pgid {
		w.problem("%s: page %d runs %d pages past the file's end", where, id, id+uint64(p.overflow)-w.m.pgid+1)
		return nil, false
	}
	for i := id + 1; i <= id+uint64(p.overflow); i++ {
		if w.used.has(i) {
			w.problem("%s: page %d overflows into page %d, which is used already", where, id, i)
			return nil, false
		}
		w.used.set(i)
	}
	p.span = (1 + uint64(p.overflow)) * ps
	return p, true
}

// elements returns p's table of 16-byte elements.
func (w *walker) elements(p *page, where string) ([]byte, bool) {
	n := uint64(p.count) * 16
	if pageHeaderSize+n > p.span {
		w.problem("%s: page %d: %d elements do not fit its %d bytes", where, p.id, p.count, p.span)
		return nil, false
	}
	b, err := w.at(p, pageHeaderSize, n)
	if err != nil {
		w.problem("%s: page %d: %v", where, p.id, err)
		return nil, false
	}
	return b, true
}

// tree checks the page tree rooted at page id of the bucket where names (""
// is the root bucket, whose keys are the top-level buckets).
func (w *walker) tree(id uint64, where string) {
	p, ok := w.page(id, bucketName(where))
	if !ok {
		return
	}
	switch p.flags {
	case branchPageFlag:
		elems, ok := w.elements(p, bucketName(where))
		if !ok {
			return
		}
		ne := binary.NativeEndian
		for i := range uint64(p.count) {
			e := elems[i*16:]
			pos, ksize, child := uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
			if pageHeaderSize+i*16+pos+ksize > p.span {
				w.problem("%s: page %d: key %d lies outside the page", bucketName(where), p.id, i)
				continue
			}
			w.tree(child, where)
		}
	case leafPageFlag:
		w.leaf(p, where, false)
	default:
		w.problem("%s: page %d is of type %#x, not a branch or leaf page", bucketName(where), p.id, p.flags)
	}
}

// leaf checks the elements of a leaf page, and the buckets they hold.
func (w *walker) leaf(p *page, where string, inline bool) {
	name := bucketName(where)
	elems, ok := w.elements(p, name)
	if !ok {
		return
	}
	ne := binary.NativeEndian
	for i := range uint64(p.count) {
		e := elems[i*16:]
		flags, pos, ksize, vsize := ne.Uint32(e[0:]), uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		start := pageHeaderSize + i*16 + pos
		if start+ksize+vsize > p.span {
			w.problem("%s: page %d: element %d lies outside the page", name, p.id, i)
			continue
		}
		isBucket := flags&bucketLeafFlag != 0
		switch {
		case where == "" && !isBucket:
			w.problem("page %d: top-level key %d is not a bucket", p.id, i)
			continue
		case !isBucket:
			continue
		case inline:
			w.problem("%s: an inline bucket holds a bucket", name)
			continue
		case vsize < bucketHeaderSize:
			w.problem("%s: page %d: bucket %d has a header of %d bytes", name, p.id, i, vsize)
			continue
		}
		key, err := w.at(p, start, min(ksize, 64))
		if err != nil {
			w.problem("%s: page %d: %v", name, p.id, err)
			continue
		}
		child := childName(where, key)
		hdr, err := w.at(p, start+ksize, vsize)
		if err != nil {
			w.problem("%s: page %d: %v", name, p.id, err)
			continue
		}
		if root := ne.Uint64(hdr); root != 0 {
			w.tree(root, child)
		} else {
			w.inline(hdr[bucketHeaderSize:], child)
		}
	}
}

// inline checks the page of an inline bucket, b, the rest of its value.
func (w *walker) inline(b []byte, where string) {
	if len(b) < pageHeaderSize {
		w.problem("%s: inline bucket of %d bytes", bucketName(where), len(b))
		return
	}
	ne := binary.NativeEndian
	p := &page{flags: ne.Uint16(b[8:]), count: ne.Uint16(b[10:]), span: uint64(len(b)), b: b, off: -1}
	if p.flags != leafPageFlag {
		w.problem("%s: inline bucket page of type %#x", bucketName(where), p.flags)
		return
	}
	w.leaf(p, where, true)
}

// bucketName is where for messages.
func bucketName(where string) string {
	if where == "" {
		return "root bucket"
	}
	return "bucket " + where
}

// childName names a nested bucket: printable names as they are, others in
// hex.
func childName(where string, key []byte) string {
	name := string(key)
	for _, c := range key {
		if c < 0x20 || c > 0x7e {
			name = fmt.Sprintf("%x", key)
			break
		}
	}
	if where == "" {
		return name
	}
	return where + "/" + name
}

type bitset []uint64

func newBitset(n uint64) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }
