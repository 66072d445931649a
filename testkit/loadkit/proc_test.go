package loadkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAdminAddrFollowsTheMove: a replica whose admin port was taken by
// another process between two starts is asked where it listens, not at the
// configured port, where the other process would answer for it.
func TestAdminAddrFollowsTheMove(t *testing.T) {
	dir := t.TempDir()
	c := &Child{logPath: filepath.Join(dir, "replica.log")}
	const configured = "127.0.0.1:44049"
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(c.logPath, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"level":"info","msg":"starting"}` + "\n")
	if got := c.AdminAddr(configured); got != configured {
		t.Errorf("adminAddr before any move = %q, want %q", got, configured)
	}
	write(`{"level":"info","msg":"starting"}` + "\n" +
		`{"level":"warn","logger":"admin","msg":"admin.listen's port is taken (by another replica on this host?); listening on the next free one","configured":"127.0.0.1:44049","listen":"127.0.0.1:44050"}` + "\n")
	if got := c.AdminAddr(configured); got != "127.0.0.1:44050" {
		t.Errorf("adminAddr after the move = %q, want 127.0.0.1:44050", got)
	}
	// A process that runs at its configured port is not asked elsewhere
	// by a line a later start could write.
	d := &Child{logPath: filepath.Join(dir, "other.log")}
	c = d
	write(`{"level":"info","msg":"flowbridge running","admin":"127.0.0.1:44049"}` + "\n")
	if got := d.AdminAddr(configured); got != configured {
		t.Errorf("adminAddr of a process running at its port = %q, want %q", got, configured)
	}
	write(`{"level":"warn","msg":"admin.listen's port is taken (by another replica on this host?); listening on the next free one","listen":"127.0.0.1:44051"}` + "\n")
	if got := d.AdminAddr(configured); got != configured {
		t.Errorf("adminAddr once running = %q, want %q: the address is settled when the process runs", got, configured)
	}
}

func TestFindMarker(t *testing.T) {
	tests := []struct {
		in   string
		want Marker
		ok   bool
	}{
		{"hello fbl12x3y there", Marker{12, 3}, true},
		{`{"content":"[turn 2] You said: hello fbl0x0y"}`, Marker{0, 0}, true},
		{"text=%5Bturn+1%5D+You+said%3A+hello+fbl7x41y+how", Marker{7, 41}, true},
		{"fblx1y fbl2x fbl3x4y", Marker{3, 4}, true},
		{"fbl1234567890x1y", Marker{}, false},
		{"Thinking…", Marker{}, false},
		{"", Marker{}, false},
	}
	for _, tt := range tests {
		got, ok := FindMarker([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("FindMarker(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	for _, m := range []Marker{{0, 0}, {9999, 123456}} {
		if got, ok := FindMarker([]byte("x " + m.String() + " y")); !ok || got != m {
			t.Errorf("FindMarker(%q) = %v, %v, want %v", m.String(), got, ok, m)
		}
	}
}

func TestQuantiles(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Quantiles
	}{
		{"empty", nil, Quantiles{}},
		{"one", ms(7), Quantiles{N: 1, P50: 7, P90: 7, P99: 7, Max: 7}},
		{"hundred", ms(hundred...), Quantiles{N: 100, P50: 50, P90: 90, P99: 99, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QuantilesOf(tt.in); got != tt.want {
				t.Errorf("QuantilesOf(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseProc(t *testing.T) {
	stat := []byte("4242 (flow bridge) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 50 0 0 20 0 9 0 100 2000000 3000 18446744073709551615\n")
	want := CPUUse{User: 2500 * time.Millisecond, Sys: 500 * time.Millisecond}
	if got, err := ParseStat(stat); err != nil || got != want {
		t.Errorf("ParseStat(%q) = %+v, %v, want %+v", stat, got, err, want)
	}
	if _, err := ParseStat([]byte("4242 (x) S 1")); err == nil {
		t.Errorf("ParseStat(short) = nil error, want one")
	}
	status := []byte("Name:\tflowbridge\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n")
	if got, err := ParseStatus(status); err != nil || got != (Memory{RSS: 10 << 20, Peak: 20 << 20}) {
		t.Errorf("ParseStatus(%q) = %+v, %v, want 10 MiB and 20 MiB", status, got, err)
	}
	if _, err := ParseStatus([]byte("Name:\tx\n")); err == nil {
		t.Errorf("ParseStatus(no Vm lines) = nil error, want one")
	}
	io := []byte("rchar: 1385\nwchar: 108226\nsyscr: 5\nsyscw: 28\nread_bytes: 17\nwrite_bytes: 133377\ncancelled_write_bytes: 0\n")
	if got, err := ParseIO(io); err != nil || got != 133377 {
		t.Errorf("ParseIO(%q) = %d, %v, want 133377 (write_bytes, not wchar or cancelled_write_bytes)", io, got, err)
	}
	if _, err := ParseIO([]byte("rchar: 1\n")); err == nil {
		t.Errorf("ParseIO(no write_bytes) = nil error, want one")
	}
}

func TestParsePerfCSV(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
		ok   bool
	}{
		{"counts", "# started on Sun Nov 29\n\n12,,syscalls:sys_enter_fsync,5000,100.00,,\n30,,syscalls:sys_enter_fdatasync,5000,100.00,,\n0,,syscalls:sys_enter_syncfs,5000,100.00,,\n", 42, true},
		{"not counted", "<not counted>,,syscalls:sys_enter_fsync,0,0.00,,\n", 0, false},
		{"nothing", "# started\n", 0, false},
	}
	for _, tt := range tests {
		got, err := ParsePerfCSV([]byte(tt.in))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("%s: ParsePerfCSV(%q) = %d, %v; want %d, ok %v", tt.name, tt.in, got, err, tt.want, tt.ok)
		}
	}
}
