package benchcompare

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// How the operator's process is found: the real node's containers are
// processes of this machine (containerd, runc), each in its pod's cgroup,
// whose path holds the pod's UID (kubelet's cgroupfs driver:
// .../pod<uid>/<container>, the systemd driver: ...-pod<uid with _>.slice).
// A process belongs to the pod when a line of /proc/<pid>/cgroup holds
// the UID in either spelling; of the pod's processes, the operator is the
// one whose command line is the operator's (upstream: the virt-operator
// binary; virtop: its binary's `operator` command), never the sandbox's
// pause.

// InPod says whether the contents of /proc/<pid>/cgroup put the process in
// the pod with UID uid.
func InPod(cgroup, uid string) bool {
	if uid == "" {
		return false
	}
	alt := strings.ReplaceAll(uid, "-", "_")
	for _, l := range strings.Split(cgroup, "\n") {
		if strings.Contains(l, "pod"+uid) || strings.Contains(l, "pod"+alt) {
			return true
		}
	}
	return false
}

// IsOperatorCmdline says whether argv (of /proc/<pid>/cmdline) is the
// operator's: upstream's virt-operator binary, or virtop's binary running
// its operator command.
func IsOperatorCmdline(operator string, argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch operator {
	case Upstream:
		return filepath.Base(argv[0]) == "virt-operator"
	case Virtop:
		return len(argv) > 1 && argv[1] == "operator" && filepath.Base(argv[0]) != "pause"
	}
	return false
}

// Memory reads VmRSS and VmHWM (KiB) from the contents of /proc/<pid>/status.
func Memory(status string) (rss, hwm float64, err error) {
	found := 0
	for _, l := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: unexpected %q", k, v)
		}
		n, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("no VmRSS and VmHWM in the status")
	}
	return rss, hwm, nil
}

// OperatorProcess is an operator's process found in /proc.
type OperatorProcess struct {
	PID      int
	PodUID   string
	Cmdline  string
	RSS, HWM float64 // KiB
}

// FindOperatorProcesses scans procRoot (/proc) for the operator's process
// of each pod UID; a pod without one is an error.
func FindOperatorProcesses(procRoot, operator string, podUIDs []string) ([]OperatorProcess, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var out []OperatorProcess
	for _, uid := range podUIDs {
		var found []OperatorProcess
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			dir := filepath.Join(procRoot, e.Name())
			cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
			if err != nil || !InPod(string(cg), uid) {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
			if err != nil {
				continue
			}
			argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
			if !IsOperatorCmdline(operator, argv) {
				continue
			}
			st, err := readSmall(filepath.Join(dir, "status"))
			if err != nil {
				continue
			}
			rss, hwm, err := Memory(st)
			if err != nil {
				return nil, fmt.Errorf("pid %d: %w", pid, err)
			}
			found = append(found, OperatorProcess{PID: pid, PodUID: uid, Cmdline: strings.Join(argv, " "), RSS: rss, HWM: hwm})
		}
		if len(found) != 1 {
			return nil, fmt.Errorf("pod %s: %d processes of %s's operator in its cgroup, want 1: %v", uid, len(found), operator, found)
		}
		out = append(out, found[0])
	}
	return out, nil
}

func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return b.String(), sc.Err()
}
