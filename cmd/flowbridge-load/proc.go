package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat times; 100 on every Linux
// Go runs on (reading it needs sysconf, which needs cgo).
const clockTicks = 100

// buildFlowbridge builds ./cmd/flowbridge of the module this command belongs to into dir.
func buildFlowbridge(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the flowbridge module: run from the repository or pass -flowbridge PATH")
	}
	bin := filepath.Join(dir, "flowbridge")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/flowbridge/flowbridge/cmd/flowbridge")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/flowbridge: %w\n%s", err, out)
	}
	return bin, nil
}

// child is the flowbridge process under measurement.
type child struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	waitErr error
	killed  bool                   // by kill: its exit status says so
	movedTo atomic.Pointer[string] // adminAddr, once the process logged where it listens
}

// startChild runs bin with args (flowbridge: "run -config PATH") and its
// output in logPath. The process dies with this one (Pdeathsig), so no path
// leaves it behind.
func startChild(bin string, args []string, logPath string) (*child, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "GOTRACEBACK=all")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start flowbridge: %w", err)
	}
	c := &child{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// stop asks the bridge to shut down and kills it after grace.
func (c *child) stop(grace time.Duration) error {
	select {
	case <-c.done:
		return c.waitErr
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return c.waitErr
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("flowbridge did not stop within %s; killed", grace)
	}
}

// kill ends the process at once with SIGKILL, as a crash would, and waits for it.
func (c *child) kill() {
	c.killed = true
	_ = c.cmd.Process.Kill()
	<-c.done
}

// exited reports the process's end as an error with the tail of its log.
func (c *child) exited() error {
	return fmt.Errorf("flowbridge exited: %v\n%s", c.waitErr, c.logTail())
}

func (c *child) logTail() string {
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// adminMoved is the line flowbridge logs when its admin.listen port is
// taken and it listens on the next free one.
const adminMoved = "admin.listen's port is taken"

// adminAddr returns where the process serves its admin endpoints:
// configured, unless it logged that the port was taken (by a process of
// another test, which took the port between two starts of a replica) and
// that it listens elsewhere. Asking the configured port then would ask
// that other process whether this one is ready. Once the process logged
// that it runs, its address is known, and the log is not read again.
func (c *child) adminAddr(configured string) string {
	if a := c.movedTo.Load(); a != nil {
		return *a
	}
	data, err := os.ReadFile(c.logPath)
	if err != nil {
		return configured
	}
	if !bytes.Contains(data, []byte(adminMoved)) {
		if bytes.Contains(data, []byte(`"flowbridge running"`)) {
			// Listening for good: the log need not be read again.
			c.movedTo.Store(&configured)
		}
		return configured
	}
	for line := range bytes.Lines(data) {
		if !bytes.Contains(line, []byte(adminMoved)) {
			continue
		}
		var l struct {
			Listen string `json:"listen"`
		}
		if json.Unmarshal(line, &l) == nil && l.Listen != "" {
			c.movedTo.Store(&l.Listen)
			return l.Listen
		}
	}
	return configured
}

// cpuUse is the CPU time a process has used so far.
type cpuUse struct {
	User, Sys time.Duration
}

func (c cpuUse) total() time.Duration { return c.User + c.Sys }

func (c cpuUse) sub(o cpuUse) cpuUse { return cpuUse{User: c.User - o.User, Sys: c.Sys - o.Sys} }

// cpuTime reads a process's user and system CPU time.
func cpuTime(pid int) (cpuUse, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return cpuUse{}, err
	}
	return parseStat(data)
}

// parseStat reads utime and stime (fields 14 and 15) of /proc/PID/stat; the
// command name in parentheses may hold spaces, so fields count from the last ')'.
func parseStat(data []byte) (cpuUse, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return cpuUse{}, errors.New("/proc stat: no command field")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return cpuUse{}, fmt.Errorf("/proc stat: %d fields after the command, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return cpuUse{}, fmt.Errorf("/proc stat: %w", err)
	}
	return cpuUse{User: time.Duration(utime) * time.Second / clockTicks, Sys: time.Duration(stime) * time.Second / clockTicks}, nil
}

// memory is a process's resident set now and at its peak, in bytes.
type memory struct {
	RSS  int64
	Peak int64
}

func readMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	return parseStatus(data)
}

// parseStatus reads VmRSS and VmHWM ("VmHWM:   12345 kB") of /proc/PID/status.
func parseStatus(data []byte) (memory, error) {
	var m memory
	var found int
	for line := range strings.Lines(string(data)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || key != "VmRSS" && key != "VmHWM" {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return memory{}, fmt.Errorf("/proc status: %s: unexpected %q", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return memory{}, fmt.Errorf("/proc status: %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.Peak = kb << 10
		}
		found++
	}
	if found != 2 {
		return memory{}, errors.New("/proc status: VmRSS or VmHWM missing")
	}
	return m, nil
}
