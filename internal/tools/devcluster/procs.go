package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func readPID(path string) (int, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a PID: %q", path, raw)
	}
	return pid, nil
}

// alive reports whether pid is a live process (a zombie is not alive).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		if s := stat[i+2]; s == 'Z' || s == 'X' {
			return false
		}
	}
	return true
}

// waitGone waits until pid is no longer alive, for at most d; it reports
// whether it is gone.
func waitGone(ctx context.Context, pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// terminate sends SIGTERM, waits up to grace, then sends SIGKILL and waits
// again.
func terminate(ctx context.Context, pid int, grace time.Duration) error {
	if !alive(pid) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if waitGone(ctx, pid, grace) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if !waitGone(context.Background(), pid, 10*time.Second) {
		return fmt.Errorf("process %d still alive after SIGKILL", pid)
	}
	return nil
}

// Process is a host process belonging to a cluster.
type Process struct {
	PID     int
	Cmdline string
}

func (p Process) String() string { return fmt.Sprintf("%d %s", p.PID, p.Cmdline) }

// Processes lists live processes whose command line or working directory
// references the cluster's state directory: kwokctl's components (their
// binaries are copied under it and they run in it) and the operator (its
// --kubeconfig is in it). After Delete the list must be empty.
func (c *Cluster) Processes() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if !refersTo(cmdline, c.StateDir) && !within(cwd, c.StateDir) {
			continue
		}
		if !alive(pid) {
			continue
		}
		out = append(out, Process{PID: pid, Cmdline: cmdline})
	}
	return out, nil
}

func refersTo(s, dir string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], dir)
		if j < 0 {
			return false
		}
		end := i + j + len(dir)
		if end == len(s) || s[end] == '/' || s[end] == ' ' || s[end] == '=' {
			return true
		}
		i = end
	}
}

func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+"/")
}
