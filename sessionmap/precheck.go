package sessionmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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
// file turns the common damage, truncation, into ErrCorrupt.
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
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	size := uint64(info.Size())
	if size == 0 {
		return nil // bbolt initialises an empty file
	}

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
	var m boltMeta
	switch {
	case ok0 && ok1 && m1.txid > m0.txid:
		m = m1
	case ok0:
		m = m0
	case ok1:
		m = m1
	default:
		return fmt.Errorf("%w: not a bbolt file (no valid meta page)", ErrCorrupt)
	}

	if m.pageSize < minPageSize || m.pageSize > maxPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return fmt.Errorf("%w: page size %d", ErrCorrupt, m.pageSize)
	}
	if m.pgid < 2 || m.pgid > size/m.pageSize {
		return fmt.Errorf("%w: file of %d bytes is shorter than its %d pages of %d bytes (truncated?)", ErrCorrupt, size, m.pgid, m.pageSize)
	}
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("%w: root page %d outside the file's %d pages", ErrCorrupt, m.root, m.pgid)
	}
	if flags, _, err := readPageHeader(f, m.root, m.pageSize); err != nil {
		return err
	} else if flags != branchPageFlag && flags != leafPageFlag {
		return fmt.Errorf("%w: root page %d has type %#x", ErrCorrupt, m.root, flags)
	}
	if m.freelist != pgidNoFreelist {
		if m.freelist < 2 || m.freelist >= m.pgid {
			return fmt.Errorf("%w: freelist page %d outside the file's %d pages", ErrCorrupt, m.freelist, m.pgid)
		}
		flags, overflow, err := readPageHeader(f, m.freelist, m.pageSize)
		if err != nil {
			return err
		}
		if flags != freelistPageFlag || m.freelist+overflow >= m.pgid {
			return fmt.Errorf("%w: freelist page %d is damaged", ErrCorrupt, m.freelist)
		}
	}
	return nil
}

// readMeta reads and validates the meta page at off, as bbolt's
// Meta.Validate does.
func readMeta(f *os.File, off int64) (boltMeta, bool) {
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

func readPageHeader(f *os.File, id, pageSize uint64) (flags uint16, overflow uint64, err error) {
	var buf [pageHeaderSize]byte
	if _, err := f.ReadAt(buf[:], int64(id*pageSize)); err != nil {
		return 0, 0, fmt.Errorf("%w: read page %d: %w", ErrCorrupt, id, err)
	}
	ne := binary.NativeEndian
	return ne.Uint16(buf[8:]), uint64(ne.Uint32(buf[12:])), nil
}
