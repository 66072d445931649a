package bridge

import (
	"errors"
	"testing"
)

// TestReceiptSettlesOnce: the first outcome stands, and a second settle
// neither panics nor changes it.
func TestReceiptSettlesOnce(t *testing.T) {
	r := newReceipt()
	first := errors.New("first")
	r.settle(first)
	r.settle(errors.New("second"))
	if err := r.Wait(t.Context()); err != first {
		t.Errorf("Wait = %v, want the first outcome", err)
	}
}
