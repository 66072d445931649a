//go:build unix

package bridge_test

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time this process has used, user and system,
// and true.
func processCPU() (time.Duration, bool) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, false
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano()), true
}
