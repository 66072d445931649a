package sessionmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
)

// The parts of bbolt's on-disk layout (go.etcd.io/bbolt/internal/common,
// format version 2) that precheck reads. bbolt stores them in the machine's
// byte order.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	metaSize         = 64 // magic, version, pageSize, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	metaChecksumAt   = 56
	pgidNoFreelist   = ^uint64(0)
	branchPageFlag   = 0x01
	leafPageFlag     = 0x02
	freelistPageFlag = 0x10
	bucketLeafFlag   = 0x01 // of a leaf element: its value is a bucket
	bucketHeaderSize = 16   // root page id u64, sequence u64
	minPageSize      = 1024
	maxPageSize      = 1024 << 14
)

type boltMeta struct {
	pageSize uint64
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// precheck inspects an existing file before bbolt maps it. bbolt trusts the
// page numbers in its meta pages and reads them through an mmap without
// bounds checks, so a truncated file makes it fault (SIGBUS) rather than
// return an error; checking that the live meta page only points inside the
// file turns the common damage, truncation, into ErrCorrupt. A file of no
// bytes is refused: bbolt would silently make a new store of it.
//
// The pages are read under a shared lock so that a file another process is
// writing is never mistaken for a damaged one; when that lock is taken the
// check is skipped and bbolt reports the lock.
func precheck(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if !tryLockShared(f) {
		return nil
	}
	// Released before the close, not by it: a child process forked
	// meanwhile (by any goroutine) holds the descriptor until it execs, and
	// with it the lock, which bbolt's exclusive lock would then wait for.
	defer unlock(f)
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	if info.Size() == 0 {
		return emptyFile(path)
	}
	_, problem, err := fileMeta(f, uint64(info.Size()))
	switch {
	case err != nil:
		return err
	case problem != "":
		return damage(path, "%s", problem)
	}
	return nil
}

// fileMeta returns the live meta page of the bbolt file f of size bytes,
// after checking that what bbolt reads on open lies inside the file: the
// root page, and the freelist page with all its entries. A damaged file
// gives a problem, which says what is wrong; err is for a failed read.
func fileMeta(f io.ReaderAt, size uint64) (m boltMeta, problem string, err error) {
	m0, ok0 := readMeta(f, 0)
	var m1 boltMeta
	var ok1 bool
	if ok0 {
		m1, ok1 = readMeta(f, int64(m0.pageSize))
	} else {
		// Without a readable first meta page the page size is unknown;
		// bbolt probes the same offsets.
		for ps := int64(minPageSize); ps <= maxPageSize && uint64(ps)+pageHeaderSize+metaSize <= size; ps <<= 1 {
			if m1, ok1 = readMeta(f, ps); ok1 {
				break
			}
		}
	}
	switch {
	case ok0 && ok1 && m1.txid > m0.txid:
		m = m1
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return m, "not a bbolt file (no valid meta page)", nil
	}

	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return m, fmt.Sprintf("page size %d", m.pageSize), nil
	}
	if m.pgid < 2 || m.pgid > size/m.pageSize {
		return m, fmt.Sprintf("file of %d bytes is shorter than its %d pages of %d bytes (truncated?)", size, m.pgid, m.pageSize), nil
	}
	if m.root < 2 || m.root >= m.pgid {
		return m, fmt.Sprintf("root page %d outside the file's %d pages", m.root, m.pgid), nil
	}
	if h, err := readPageHeader(f, m.root, m.pageSize); err != nil {
		return m, "", err
	} else if h.flags != branchPageFlag && h.flags != leafPageFlag {
		return m, fmt.Sprintf("root page %d has type %#x", m.root, h.flags), nil
	}
	// bbolt loads the freelist on open, trusting its length; without one it
	// walks every page on a goroutine of its own, where a fault would end
	// the process. flowbridge always writes one.
	if m.freelist == pgidNoFreelist {
		return m, "the file has no freelist page (flowbridge always writes one)", nil
	}
	if m.freelist < 2 || m.freelist >= m.pgid {
		return m, fmt.Sprintf("freelist page %d outside the file's %d pages", m.freelist, m.pgid), nil
	}
	h, err := readPageHeader(f, m.freelist, m.pageSize)
	if err != nil {
		return m, "", err
	}
	if h.flags != freelistPageFlag || m.freelist+h.overflow >= m.pgid {
		return m, fmt.Sprintf("freelist page %d is damaged", m.freelist), nil
	}
	n, at := uint64(h.count), uint64(pageHeaderSize)
	if h.count == 0xFFFF {
		// A longer list keeps its length in the first id.
		var b [8]byte
		if _, err := f.ReadAt(b[:], int64(m.freelist*m.pageSize+pageHeaderSize)); err != nil {
			return m, "", err
		}
		n, at = binary.NativeEndian.Uint64(b[:]), pageHeaderSize+8
	}
	if span := (1 + h.overflow) * m.pageSize; n > (span-at)/8 {
		return m, fmt.Sprintf("freelist page %d: %d page ids do not fit its %d bytes", m.freelist, n, span), nil
	}
	return m, "", nil
}

// readMeta reads and validates the meta page at off, as bbolt's
// Meta.Validate does.
func readMeta(f io.ReaderAt, off int64) (boltMeta, bool) {
	var buf [pageHeaderSize + metaSize]byte
	if _, err := f.ReadAt(buf[:], off); err != nil {
		return boltMeta{}, false
	}
	b := buf[pageHeaderSize:]
	ne := binary.NativeEndian
	if ne.Uint32(b[0:]) != boltMagic || ne.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	_, _ = h.Write(b[:metaChecksumAt])
	if h.Sum64() != ne.Uint64(b[metaChecksumAt:]) {
		return boltMeta{}, false
	}
	return boltMeta{
		pageSize: uint64(ne.Uint32(b[8:])),
		root:     ne.Uint64(b[16:]),
		freelist: ne.Uint64(b[32:]),
		pgid:     ne.Uint64(b[40:]),
		txid:     ne.Uint64(b[48:]),
	}, true
}

type pageHeader struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint64
}

func readPageHeader(f io.ReaderAt, id, pageSize uint64) (pageHeader, error) {
	var buf [pageHeaderSize]byte
	if _, err := f.ReadAt(buf[:], int64(id*pageSize)); err != nil {
		return pageHeader{}, fmt.Errorf("read page %d: %w", id, err)
	}
	ne := binary.NativeEndian
	return pageHeader{id: ne.Uint64(buf[0:]), flags: ne.Uint16(buf[8:]), count: ne.Uint16(buf[10:]), overflow: uint64(ne.Uint32(buf[12:]))}, nil
}
