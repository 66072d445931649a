// Package testaddr gives tests loopback addresses that refuse connections
// and that no other test takes meanwhile.
//
// The usual way, listening on 127.0.0.1:0 and closing the listener, leaves a
// port any other listener or outgoing connection on the machine may be given
// next: the tests of several packages run at once, and a test that meant to
// dial a refusing port then reached another test's server (seen: a
// workspace call answered by a fake Discord).
package testaddr

import "testing"

// Refusing returns a 127.0.0.1 address where every connection is refused
// for as long as t runs.
func Refusing(t testing.TB) string {
	t.Helper()
	addr, release := Reserve(t)
	t.Cleanup(release)
	return addr
}

// Reserve returns a 127.0.0.1 address where every connection is refused
// until release is called; then the test may listen there itself. Release
// may be called more than once; t's cleanup calls it too.
func Reserve(t testing.TB) (addr string, release func()) {
	t.Helper()
	addr, release, err := reserve()
	if err != nil {
		t.Fatalf("reserve a refusing address: %v", err)
	}
	t.Cleanup(release)
	return addr, release
}
