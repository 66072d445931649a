package sessionmap

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data, and only the metadata needed to read it back.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// fallocate allocates f's space up to size (which becomes its size).
func fallocate(f *os.File, size int64) error { return syscall.Fallocate(int(f.Fd()), 0, 0, size) }
