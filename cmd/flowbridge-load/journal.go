package main

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"sync"
	"syscall"
)

// journal is the durable floor's store: records appended to a plain file,
// each durable (fdatasync) before append returns. Writers that arrive while
// a sync runs share the next one (group commit, as flowbridge's store
// commits changes that arrive together, with no timer: a lone record waits
// for nobody).
type journal struct {
	f    *os.File
	sync func(*os.File) error

	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // framed records not yet written
	spare   []byte // the buffer the last write used, for reuse
	added   uint64 // records appended so far
	durable uint64 // records written and synced
	busy    bool   // a writer is writing and syncing
	err     error  // the first write or sync error: every later append fails
	syncs   int64
}

// openJournal opens (creating, appending to) the journal at path.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return newJournal(f, fdatasync), nil
}

func newJournal(f *os.File, sync func(*os.File) error) *journal {
	j := &journal{f: f, sync: sync}
	j.cond.L = &j.mu
	return j
}

func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// append adds the record kind, key, text and returns once it is durable.
func (j *journal) append(kind byte, key, text string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 1 + len(key) + 1 + len(text)
	j.buf = binary.LittleEndian.AppendUint32(j.buf, uint32(n))
	at := len(j.buf)
	j.buf = append(j.buf, 0, 0, 0, 0, kind)
	j.buf = append(append(append(j.buf, key...), 0), text...)
	binary.LittleEndian.PutUint32(j.buf[at:], crc32.Checksum(j.buf[at+4:], castagnoli))
	j.added++
	mine := j.added
	for j.durable < mine && j.err == nil {
		if j.busy {
			j.cond.Wait()
			continue
		}
		// This writer writes and syncs every record appended so far.
		j.busy = true
		buf, upto := j.buf, j.added
		j.buf = j.spare[:0]
		j.mu.Unlock()
		_, err := j.f.Write(buf)
		if err == nil {
			err = j.sync(j.f)
		}
		j.mu.Lock()
		j.busy, j.spare = false, buf
		j.durable, j.err = upto, err
		j.syncs++
		j.cond.Broadcast()
	}
	return j.err
}

// stats returns the records appended and the syncs made.
func (j *journal) stats() (records uint64, syncs int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.added, j.syncs
}

func (j *journal) close() error { return j.f.Close() }
