package main

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// asFlowbridge, set to 1 in a process's environment, makes this test binary
// flowbridge itself (see flowbridgeBinary).
const asFlowbridge = "FLOWBRIDGE_TEST_AS_MAIN"

// TestMain fails the package's tests when any of them leaves a goroutine
// behind: every goroutine has an owner that waits for it. Started with
// asFlowbridge set, the binary is flowbridge, for the process tests.
//
// Half of the package's time is waiting (processes starting and stopping,
// retries, a flow's timeout): about 11 s of CPU in 19 s on two cores. So,
// unless -test.parallel is given, four tests run at once rather than
// GOMAXPROCS: 12 s.
func TestMain(m *testing.M) {
	if os.Getenv(asFlowbridge) == "1" {
		main()
		os.Exit(0)
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}
