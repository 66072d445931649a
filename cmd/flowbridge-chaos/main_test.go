package main

import (
	"flag"
	"strconv"
	"testing"

	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// TestMain checks that a run leaves no goroutine behind: the fakes, fronts
// and the bridge processes are all stopped on every path.
//
// The runs spend their time waiting (for leases to lapse, for quiet, for
// kills), not computing: the package's tests use a few seconds of CPU in
// half a minute. So, unless -test.parallel is given, they run all at once
// rather than GOMAXPROCS at a time.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(waitingTests)); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(built.AndRemove(m))
}

// waitingTests is how many of the package's tests run at once by default:
// all of its runs.
const waitingTests = 8

// built is the flowbridge binary the tests that run one share, built once.
var built loadkit.BuildOnce

// flowbridgeBin returns flowbridge built as run builds it without
// -flowbridge (loadkit.Build), once for all the tests.
func flowbridgeBin(t *testing.T) string {
	t.Helper()
	return built.Bin(t)
}
