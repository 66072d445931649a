//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestConfigFileMustBeRegularAndBounded: the config is read only from a
// regular file of at most maxConfigSize bytes. /dev/zero would be read
// until memory runs out; opening a FIFO blocks until something writes to it.
func TestConfigFileMustBeRegularAndBounded(t *testing.T) {
	t.Parallel()
	env := mapEnv(nil)

	t.Run("FIFO", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "flowbridge.toml")
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		// A writer offers a valid config, should the FIFO be opened for
		// reading; the cleanup releases it when it was not, so a reader that
		// opens the FIFO gets a config and the test fails, instead of hanging.
		wrote := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteString(testConfig("", ""))
				err = errors.Join(err, f.Close())
			}
			wrote <- err
		}()
		t.Cleanup(func() {
			if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				<-wrote
				r.Close()
			}
		})
		_, err := loadConfig(path, env)
		if err == nil || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("loadConfig(FIFO) = %v, want it refused as a named pipe, not a regular file", err)
		}
	})
	t.Run("device", func(t *testing.T) {
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skip("no /dev/zero")
		}
		_, err := loadConfig("/dev/zero", env)
		if err == nil || !strings.Contains(err.Error(), "/dev/zero is a character device, not a regular file") {
			t.Errorf("loadConfig(/dev/zero) = %v, want it refused as a device", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		_, err := loadConfig(dir, env)
		if err == nil || !strings.Contains(err.Error(), "is a directory, not a regular file") {
			t.Errorf("loadConfig(directory) = %v, want it refused as a directory", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "flowbridge.toml")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		// Sparse: a valid config, then spaces' worth of holes past the bound.
		if _, err := f.WriteString(testConfig("", "")); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Truncate(maxConfigSize+1), f.Close()); err != nil {
			t.Fatal(err)
		}
		_, err = loadConfig(path, env)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("larger than %d MiB", maxConfigSize>>20)) {
			t.Errorf("loadConfig(%d bytes) = %v, want it refused as too large", maxConfigSize+1, err)
		}
	})
	t.Run("symlink to a file", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFile(t, testConfig("", ""))
		link := filepath.Join(dir, "link.toml")
		if err := os.Symlink(path, link); err != nil {
			t.Fatal(err)
		}
		if _, err := loadConfig(link, env); err != nil {
			t.Errorf("loadConfig(symlink to a config) = %v, want it read", err)
		}
	})
}
