//go:build unix

package sessionmap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesWhatIsNotAFile: a store path naming a FIFO, a device, a
// directory or a link to a FIFO is refused at once, naming the path. (A
// FIFO hung the start, deaf to SIGTERM and SIGINT: opening it for reading
// waits for a writer.)
func TestOpenRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.db")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub.db")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, path, want string }{
		{"FIFO", fifo, "named pipe"},
		{"link to a FIFO", link, "named pipe"},
		{"device", os.DevNull, "device"},
		{"directory", sub, "directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, op := range []struct {
				name string
				fn   func() error
			}{
				{"Open", func() error {
					s, err := Open(c.path, Options{Timeout: 10 * time.Millisecond})
					if err == nil {
						s.Close()
					}
					return err
				}},
				{"CheckFile", func() error { return CheckFile(c.path) }},
			} {
				done := make(chan error, 1)
				go func() { done <- op.fn() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					// Let the hung open go: a writer ends its wait.
					if w, werr := os.OpenFile(c.path, os.O_WRONLY, 0); werr == nil {
						w.Close()
					}
					<-done
					t.Fatalf("%s(%s) still waits after 5 s, want it refused at once", op.name, c.path)
				}
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s(%s) = %v, want ErrNotRegular naming the path and saying %s", op.name, c.path, err, c.want)
				}
			}
		})
	}
}
