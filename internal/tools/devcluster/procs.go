package devcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/virtop-dev/virtop/internal/tools/proc"
)

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
		if !proc.Alive(pid) {
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
