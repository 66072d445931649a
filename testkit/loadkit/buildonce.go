package loadkit

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// BuildOnce is flowbridge built once for all the tests of a package that
// run it (go build takes seconds), in a temporary directory removed after
// them. Its zero value is ready; wrap the package's tests with AndRemove.
type BuildOnce struct {
	once     sync.Once
	dir, bin string
	err      error
}

// Bin returns flowbridge built as Build builds it, building it on the
// first call; a failed build fails t (a *testing.T: the tools that import
// this package do not link testing).
func (b *BuildOnce) Bin(t interface {
	Helper()
	Fatal(...any)
}) string {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "flowbridge-bin-"); b.err != nil {
			return
		}
		b.bin, b.err = Build(context.Background(), b.dir)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// AndRemove runs m's tests, then removes the binary they shared:
// goleak.VerifyTestMain(built.AndRemove(m)).
func (b *BuildOnce) AndRemove(m interface{ Run() int }) interface{ Run() int } {
	return removeBuilt{b, m}
}

type removeBuilt struct {
	b *BuildOnce
	m interface{ Run() int }
}

func (r removeBuilt) Run() int {
	code := r.m.Run()
	if r.b.dir != "" {
		if err := os.RemoveAll(r.b.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return code
}
