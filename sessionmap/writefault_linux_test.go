package sessionmap

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFailedWriteIsNotForever: a store process whose writes the disk
// refuses (RLIMIT_FSIZE below the file's size, so every page bbolt writes
// past it fails with EFBIG, as a full disk fails them with ENOSPC) fails
// those changes, and once the disk takes writes again the next change
// succeeds, in the same process: bbolt rolls a failed commit back and
// nothing of ours stays broken. (Go ignores SIGXFSZ, so the write returns
// the error instead of the signal ending the process.)
func TestFailedWriteIsNotForever(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flowbridge.db")
	cmd, stdin, out := startHelper(t, modeReceiver, path)
	receive := func(key string) string {
		t.Helper()
		if _, err := fmt.Fprintln(stdin, key); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() {
			t.Fatalf("helper ended: %v", out.Err())
		}
		return out.Text()
	}
	limit := func(bytes uint64) {
		t.Helper()
		lim := unix.Rlimit{Cur: bytes, Max: unix.RLIM_INFINITY}
		if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_FSIZE, &lim, nil); err != nil {
			t.Fatalf("prlimit: %v", err)
		}
	}
	for i := range 20 {
		if got := receive(fmt.Sprintf("before-%d", i)); !strings.HasPrefix(got, "ok ") {
			t.Fatalf("before the fault: %s", got)
		}
	}
	limit(2 * 4096) // the meta pages only
	for i := range 5 {
		got := receive(fmt.Sprintf("during-%d", i))
		if !strings.HasPrefix(got, "error ") || !strings.Contains(got, "file too large") {
			t.Fatalf("while the disk refuses writes: %s, want the write's error", got)
		}
	}
	if got := receive("ping"); !strings.HasPrefix(got, "error ping") || !strings.Contains(got, "file too large") {
		t.Fatalf("Ping while the disk refuses writes = %s, want the write's error", got)
	}
	limit(unix.RLIM_INFINITY)
	if got := receive("ping"); got != "pong" {
		t.Fatalf("Ping once the disk takes writes again = %s, want pong", got)
	}
	for i := range 20 {
		if got := receive(fmt.Sprintf("after-%d", i)); !strings.HasPrefix(got, "ok ") {
			t.Fatalf("once the disk takes writes again: %s, want ok with no restart", got)
		}
	}
	// What failed was not recorded: it is new when it comes again.
	if got := receive("during-0"); got != "ok during-0" {
		t.Errorf("a change that failed, sent again = %s, want ok (new)", got)
	}
	if got := receive("after-0"); got != "held after-0" {
		t.Errorf("a change that succeeded, sent again = %s, want held", got)
	}
}
