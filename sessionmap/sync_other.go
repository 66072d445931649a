//go:build !linux

package sessionmap

import "os"

// fdatasync flushes f; without fdatasync a full sync is the way.
func fdatasync(f *os.File) error { return f.Sync() }

// fallocate does nothing here: a segment grows as it is written.
func fallocate(*os.File, int64) error { return nil }
