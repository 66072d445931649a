//go:build !unix

package sessionmap

import "os"

// tryLockShared reports true: without flock the precheck runs unlocked, as
// bbolt's own reads would.
func tryLockShared(*os.File) bool { return true }

// unlock does nothing: the lock goes when the process ends.
func unlock(*os.File) error { return nil }
