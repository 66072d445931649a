package loadkit

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

// Build builds ./cmd/flowbridge of the module the working directory is in
// into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
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

// Child is a bridge process under test: flowbridge, or a relay.
type Child struct {
	cmd     *exec.Cmd
	logPath string
	// Done is closed when the process has exited; WaitErr is then its exit.
	Done    chan struct{}
	WaitErr error
	// Killed is set by Kill: the exit status says so.
	Killed  bool
	movedTo atomic.Pointer[string] // AdminAddr, once the process logged where it listens
}

// Start runs bin with args (flowbridge: "run -config PATH") and its output
// in logPath. The process dies with this one (Pdeathsig), so no path
// leaves it behind.
func Start(bin string, args []string, logPath string) (*Child, error) {
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
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	c := &Child{cmd: cmd, logPath: logPath, Done: make(chan struct{})}
	go func() {
		c.WaitErr = cmd.Wait()
		close(c.Done)
	}()
	return c, nil
}

// Stop asks the process to shut down (SIGTERM) and kills it after grace.
func (c *Child) Stop(grace time.Duration) error {
	select {
	case <-c.Done:
		return c.WaitErr
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.Done:
		return c.WaitErr
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.Done
		return fmt.Errorf("the process did not stop within %s; killed", grace)
	}
}

// Kill ends the process at once with SIGKILL, as a crash would, and waits for it.
func (c *Child) Kill() {
	c.Killed = true
	_ = c.cmd.Process.Kill()
	<-c.Done
}

// Exited reports the process's end as an error with the tail of its log.
func (c *Child) Exited() error {
	return fmt.Errorf("flowbridge exited: %v\n%s", c.WaitErr, c.LogTail())
}

// LogTail is the end of the process's output.
func (c *Child) LogTail() string {
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

// PID is the process's id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// adminMoved is the line flowbridge logs when its admin.listen port is
// taken and it listens on the next free one.
const adminMoved = "admin.listen's port is taken"

// AdminAddr returns where the process serves its admin endpoints:
// configured, unless it logged that the port was taken (by a process of
// another test, which took the port between two starts of a replica) and
// that it listens elsewhere. Asking the configured port then would ask
// that other process whether this one is ready. Once the process logged
// that it runs, its address is known, and the log is not read again.
func (c *Child) AdminAddr(configured string) string {
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

// CPUUse is the CPU time a process has used so far.
type CPUUse struct {
	User, Sys time.Duration
}

// Total is user and system time together.
func (c CPUUse) Total() time.Duration { return c.User + c.Sys }

// Sub is the CPU used between o and c.
func (c CPUUse) Sub(o CPUUse) CPUUse { return CPUUse{User: c.User - o.User, Sys: c.Sys - o.Sys} }

// CPUTime reads a process's user and system CPU time.
func CPUTime(pid int) (CPUUse, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return CPUUse{}, err
	}
	return ParseStat(data)
}

// ParseStat reads utime and stime (fields 14 and 15) of /proc/PID/stat; the
// command name in parentheses may hold spaces, so fields count from the last ')'.
func ParseStat(data []byte) (CPUUse, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return CPUUse{}, errors.New("/proc stat: no command field")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return CPUUse{}, fmt.Errorf("/proc stat: %d fields after the command, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return CPUUse{}, fmt.Errorf("/proc stat: %w", err)
	}
	return CPUUse{User: time.Duration(utime) * time.Second / clockTicks, Sys: time.Duration(stime) * time.Second / clockTicks}, nil
}

// DiskWrites reads how many bytes a process has caused to be sent to the
// storage layer (write_bytes of /proc/PID/io): the pages its commits wrote,
// counted once each. -1 when the kernel does not keep the figure.
func DiskWrites(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return -1, err
	}
	return ParseIO(data)
}

// ParseIO reads write_bytes ("write_bytes: 12345") of /proc/PID/io.
func ParseIO(data []byte) (int64, error) {
	for line := range strings.Lines(string(data)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || key != "write_bytes" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return -1, fmt.Errorf("/proc io: write_bytes: %w", err)
		}
		return n, nil
	}
	return -1, errors.New("/proc io: no write_bytes")
}

// Memory is a process's resident set now and at its peak, in bytes.
type Memory struct {
	RSS  int64
	Peak int64
}

// ReadMemory reads a process's resident set.
func ReadMemory(pid int) (Memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	return ParseStatus(data)
}

// ParseStatus reads VmRSS and VmHWM ("VmHWM:   12345 kB") of /proc/PID/status.
func ParseStatus(data []byte) (Memory, error) {
	var m Memory
	var found int
	for line := range strings.Lines(string(data)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || key != "VmRSS" && key != "VmHWM" {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return Memory{}, fmt.Errorf("/proc status: %s: unexpected %q", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("/proc status: %s: %w", key, err)
		}
		if key == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.Peak = kb << 10
		}
		found++
	}
	if found != 2 {
		return Memory{}, errors.New("/proc status: VmRSS or VmHWM missing")
	}
	return m, nil
}
