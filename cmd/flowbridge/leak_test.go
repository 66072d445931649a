package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// asFlowbridge, set to 1 in a process's environment, makes this test binary
// flowbridge itself (see flowbridgeBinary).
const asFlowbridge = "FLOWBRIDGE_TEST_AS_MAIN"

// TestMain fails the package's tests when any of them leaves a goroutine
// behind: every goroutine has an owner that waits for it. Started with
// asFlowbridge set, the binary is flowbridge, for the process tests.
func TestMain(m *testing.M) {
	if os.Getenv(asFlowbridge) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
