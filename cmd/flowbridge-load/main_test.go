package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that a run leaves no goroutine behind: the fakes, fronts
// and the bridge process are all stopped on every path.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
