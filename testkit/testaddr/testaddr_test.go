//go:build unix

package testaddr

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

func TestRefusingRefusesAndIsNotTaken(t *testing.T) {
	addr := Refusing(t)
	if _, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Dial(%s) = %v, want ECONNREFUSED", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		ln.Close()
		t.Errorf("Listen(%s) succeeded while it is reserved", addr)
	}
}

func TestReserveReleases(t *testing.T) {
	addr, release := Reserve(t)
	release()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("Listen(%s) after release: %v", addr, err)
	}
	ln.Close()
	release() // again: no effect
}
