//go:build unix

package sessionmap

import (
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestFaultInReadBecomesErrCorrupt: a memory fault inside a store access,
// as bbolt takes on a page outside its mapping, is an error wrapping
// ErrCorrupt, not the end of the process: SIGBUS past the end of a mapped
// file, SIGSEGV in memory that can no longer be read. That memory stays
// mapped, with no access: unmapped, its addresses could be mapped again by
// the runtime before the read (which then finds zeros and no fault).
func TestFaultInReadBecomesErrCorrupt(t *testing.T) {
	ps := os.Getpagesize()
	f, err := os.Create(filepath.Join(t.TempDir(), "mapped"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(int64(ps)); err != nil {
		t.Fatal(err)
	}
	pastEnd, err := syscall.Mmap(int(f.Fd()), 0, 2*ps, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(pastEnd)
	unreadable, err := syscall.Mmap(int(f.Fd()), 0, ps, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(unreadable)
	if err := syscall.Mprotect(unreadable, syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name string
		b    []byte
		at   int
	}{
		{"SIGBUS", pastEnd, ps},
		{"SIGSEGV", unreadable, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTest(t, Options{NoSync: true})
			var sink byte
			err := s.view(func(*bolt.Tx) error {
				sink = tt.b[tt.at]
				return nil
			})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("view(read faults) = %v (read %d), want ErrCorrupt", err, sink)
			}
			if !errors.Is(s.Health(), ErrCorrupt) {
				t.Errorf("Health() after a fault = %v, want ErrCorrupt", s.Health())
			}
			// The goroutine's setting is restored.
			if on := debug.SetPanicOnFault(false); on {
				t.Error("SetPanicOnFault left on after the access")
			}
		})
	}
}
