package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/flowbridge/flowbridge/testkit/loadkit"
)

// TestMain checks that a run leaves no goroutine behind: the fakes, fronts
// and the bridge processes are all stopped on every path.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(removeBuilt{m})
}

// built is the flowbridge binary the tests that run one share, built once:
// go build takes seconds.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// flowbridgeBin returns flowbridge built as run builds it without
// -flowbridge (loadkit.Build), once for all the tests.
func flowbridgeBin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "flowbridge-chaos-bin-"); built.err != nil {
			return
		}
		built.bin, built.err = loadkit.Build(context.Background(), built.dir)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// removeBuilt runs the tests, then removes the binary they shared.
type removeBuilt struct{ m *testing.M }

func (r removeBuilt) Run() int {
	code := r.m.Run()
	if built.dir != "" {
		if err := os.RemoveAll(built.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}
