package workspacetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any of them leaves a goroutine
// behind: every goroutine has an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
