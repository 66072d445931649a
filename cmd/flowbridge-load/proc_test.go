package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAdminAddrFollowsTheMove: a replica whose admin port was taken by
// another process between two starts is asked where it listens, not at the
// configured port, where the other process would answer for it.
func TestAdminAddrFollowsTheMove(t *testing.T) {
	dir := t.TempDir()
	c := &child{logPath: filepath.Join(dir, "replica.log")}
	const configured = "127.0.0.1:44049"
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(c.logPath, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"level":"info","msg":"starting"}` + "\n")
	if got := c.adminAddr(configured); got != configured {
		t.Errorf("adminAddr before any move = %q, want %q", got, configured)
	}
	write(`{"level":"info","msg":"starting"}` + "\n" +
		`{"level":"warn","logger":"admin","msg":"admin.listen's port is taken (by another replica on this host?); listening on the next free one","configured":"127.0.0.1:44049","listen":"127.0.0.1:44050"}` + "\n")
	if got := c.adminAddr(configured); got != "127.0.0.1:44050" {
		t.Errorf("adminAddr after the move = %q, want 127.0.0.1:44050", got)
	}
	// A process that runs at its configured port is not asked elsewhere
	// by a line a later start could write.
	d := &child{logPath: filepath.Join(dir, "other.log")}
	c = d
	write(`{"level":"info","msg":"flowbridge running","admin":"127.0.0.1:44049"}` + "\n")
	if got := d.adminAddr(configured); got != configured {
		t.Errorf("adminAddr of a process running at its port = %q, want %q", got, configured)
	}
	write(`{"level":"warn","msg":"admin.listen's port is taken (by another replica on this host?); listening on the next free one","listen":"127.0.0.1:44051"}` + "\n")
	if got := d.adminAddr(configured); got != configured {
		t.Errorf("adminAddr once running = %q, want %q: the address is settled when the process runs", got, configured)
	}
}
