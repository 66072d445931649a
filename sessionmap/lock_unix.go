//go:build unix

package sessionmap

import (
	"os"
	"syscall"
)

// tryLockShared takes a shared advisory lock on f without waiting and
// reports whether it got it; unlock releases it (closing f does too, unless
// a forked child still holds the descriptor). bbolt takes an
// exclusive lock on the same file, so a false result means a writer is
// active.
func tryLockShared(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil
}

// unlock releases the advisory lock bbolt took on f. Closing f alone would
// not while bbolt's mapping of the file still refers to it.
func unlock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
