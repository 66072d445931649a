package storetest

import (
	"testing"
)

// testPing checks that an open store answers Ping.
func testPing(t *testing.T, o Opener) {
	if err := o.Open(t).Ping(t.Context()); err != nil {
		t.Errorf("Ping() = %v, want nil", err)
	}
}
