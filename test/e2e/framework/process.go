package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// Process is a child process of the test (normally the virtop binary). Its
// output goes to a log file kept in the suite's directory and printed when
// the test fails; every exit is recorded.
type Process struct {
	t       testing.TB
	Name    string
	Bin     string
	Args    []string
	Env     []string // added to the test's environment
	LogPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	code     int   // exit code of the last run, once done is closed
	exits    []int // exit codes of every run that ended
	starts   int
	stopping bool // the test itself stopped or killed it
	unexp    []int
}

// Virtop returns the virtop binary with args as a process of the test, not
// yet started. It is stopped when the test ends, and its log printed if the
// test failed.
func (e *Env) Virtop(t testing.TB, args ...string) *Process {
	t.Helper()
	name := "virtop"
	if len(args) > 0 {
		name += "-" + args[0]
	}
	safe := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")
	if err := os.MkdirAll(e.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &Process{
		t: t, Name: name, Bin: e.VirtopBin, Args: args,
		LogPath: filepath.Join(e.LogDir(), fmt.Sprintf("%s.%s.%d.log", safe, name, time.Now().UnixNano())),
	}
	t.Cleanup(func() {
		if p.Running() {
			p.Stop(10 * time.Second)
		}
		if t.Failed() {
			t.Logf("---- log of %s (%s) ----\n%s\n---- end of log ----", p.Name, p.LogPath, p.Log())
		}
	})
	return p
}

// Operator returns `virtop operator` for the suite's cluster (not started).
func (e *Env) Operator(t testing.TB, extraArgs ...string) *Process {
	return e.Virtop(t, append(e.Cluster.OperatorArgs(), extraArgs...)...)
}

// Start starts the process; it fails the test if it cannot.
func (p *Process) Start() *Process {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		p.t.Fatalf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	p.starts++
	fmt.Fprintf(logf, "---- %s: start #%d: %s %s\n", time.Now().Format(time.RFC3339Nano), p.starts, p.Bin, strings.Join(p.Args, " "))
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Env = append(os.Environ(), p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Kill reaches its children too
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.t.Fatalf("starting %s: %v", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.stopping = cmd, done, false
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode() // -1 when killed by a signal
		} else if err != nil {
			code = -2
		}
		fmt.Fprintf(logf, "---- %s: exited with code %d (%v)\n", time.Now().Format(time.RFC3339Nano), code, cmd.ProcessState)
		logf.Close()
		p.mu.Lock()
		p.code = code
		p.exits = append(p.exits, code)
		if !p.stopping {
			p.unexp = append(p.unexp, code)
		}
		p.mu.Unlock()
		close(done)
	}()
	return p
}

// PID is the PID of the current (or last) run; 0 if never started.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the current run is alive.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !isClosed(p.done)
}

// Exited reports whether the current run has exited, and its exit code.
func (p *Process) Exited() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || !isClosed(p.done) {
		return false, 0
	}
	return true, p.code
}

// EverExited reports whether any run exited on its own (not stopped or
// killed by the test), with the exit codes of those runs.
func (p *Process) EverExited() (bool, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.unexp) > 0, append([]int(nil), p.unexp...)
}

// Exits returns the exit codes of every run that ended, in order.
func (p *Process) Exits() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.exits...)
}

// Starts is how many times the process was started.
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Wait waits up to timeout for the current run to exit and returns its code.
func (p *Process) Wait(timeout time.Duration) int {
	p.t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		p.t.Fatalf("%s was never started", p.Name)
	}
	select {
	case <-done:
	case <-time.After(timeout):
		p.t.Fatalf("%s (pid %d) did not exit within %s", p.Name, p.PID(), timeout)
	}
	_, code := p.Exited()
	return code
}

func (p *Process) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || isClosed(p.done) {
		return
	}
	p.stopping = true
	_ = syscall.Kill(-p.cmd.Process.Pid, sig) // the process group
}

// Stop sends SIGTERM, then SIGKILL after grace; it returns the exit code
// (-1 when ended by a signal).
func (p *Process) Stop(grace time.Duration) int {
	p.t.Helper()
	if !p.Running() {
		_, code := p.Exited()
		return code
	}
	p.signal(syscall.SIGTERM)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(grace):
		p.t.Logf("%s (pid %d) did not exit within %s of SIGTERM: sending SIGKILL", p.Name, p.PID(), grace)
		p.signal(syscall.SIGKILL)
		p.awaitKilled(done)
	}
	_, code := p.Exited()
	return code
}

// Kill sends SIGKILL (a crash) and waits for the process to end.
func (p *Process) Kill() {
	p.t.Helper()
	if !p.Running() {
		return
	}
	p.signal(syscall.SIGKILL)
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	p.awaitKilled(done)
}

// killedWithin bounds the wait for a process to be gone after SIGKILL.
const killedWithin = 30 * time.Second

// awaitKilled waits for a process sent SIGKILL to be reaped; past
// killedWithin it fails the test naming the process and its kernel state
// (a process in uninterruptible sleep outlives SIGKILL) rather than hang.
func (p *Process) awaitKilled(done chan struct{}) {
	p.t.Helper()
	select {
	case <-done:
	case <-time.After(killedWithin):
		pid := p.PID()
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		p.t.Fatalf("%s (pid %d) still running %s after SIGKILL; /proc/%d/stat: %s", p.Name, pid, killedWithin, pid, strings.TrimSpace(string(stat)))
	}
}

// Restart stops the process (SIGTERM, SIGKILL after grace) and starts it again.
func (p *Process) Restart(grace time.Duration) *Process {
	p.t.Helper()
	p.Stop(grace)
	return p.Start()
}

// Log returns everything the process wrote so far (all runs).
func (p *Process) Log() string {
	raw, err := os.ReadFile(p.LogPath)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return string(raw)
}

func isClosed(c chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// OperatorBuilt reports whether the suite's virtop binary has the operator
// command.
func (e *Env) OperatorBuilt() bool {
	return devcluster.OperatorBuilt(context.Background(), e.VirtopBin) // bounded there (30 s)
}
