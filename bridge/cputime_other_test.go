//go:build !unix

package bridge_test

import "time"

// processCPU reports false: the process's CPU time is not read here.
func processCPU() (time.Duration, bool) { return 0, false }
