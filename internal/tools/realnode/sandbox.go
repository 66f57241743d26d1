package realnode

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/proc"
)

// The node's sandbox: a PID namespace and a mount namespace of the node's
// own, made by unshare(1) inside the cluster's network namespace. Their
// first process, the node's init (a shell that only reaps orphans), stands
// for the machine's init: a hostPID pod's /proc/1 is it, and /proc/1/root
// and /proc/1/ns/mnt — where node agents such as KubeVirt's virt-handler
// look for the node's file system and mount into it — are the node's.
//
// In the node's mount namespace, the directories a node agent assumes are
// bound over the machine's from the node's directory (HostDirs), so that a
// hostPath volume names the node's directory, never the machine's; the
// namespace is a slave of the machine's (the machine's mounts reach the
// node, nothing the node mounts reaches the machine) and shared within
// itself (a volume's Bidirectional propagation works).

const initProcess = "init"

// KubeletRoot is kubelet's root directory as the node's processes see it
// (the node's var/lib/kubelet).
const KubeletRoot = "/var/lib/kubelet"

// HostDirs are the machine directories the node has its own of: each is
// bound, in the node's mount namespace only, from root/<dir> under the
// node's directory. /run holds /var/run (a link to it on Debian).
var HostDirs = []string{"/run", "/var/lib", "/var/log"}

// initScript is the node's init: it binds HostDirs, makes the namespace's
// mounts shared among themselves, says it is ready, and then waits, which
// reaps every orphan the PID namespace hands it (containerd's shims, the
// processes pods leave).
const initScript = `#!/bin/sh
# The real node's init (written by virtop up): PID 1 of the node's PID
# namespace, in the node's mount namespace. $1 is the node's directory.
set -eu
dir=$1
mount --make-rshared /
for d in %s; do
	mount --bind "$dir/root$d" "$d"
done
: > "$dir/pids/init.ready"
trap 'exit 0' TERM INT
while :; do
	sleep 3600 &
	wait || true
done
`

// ensureSandbox starts the node's init unless it runs, and waits until its
// mounts are in place.
func (n *Node) ensureSandbox(ctx context.Context) error {
	if _, ok := n.initPID(); ok {
		return nil
	}
	for _, d := range HostDirs {
		if under(n.Dir, d) {
			return fmt.Errorf("the real node's directory %s is under %s, which the node has its own of: choose another state directory", n.Dir, d)
		}
		if err := os.MkdirAll(n.path("root", d), 0o755); err != nil {
			return err
		}
	}
	script := n.path("config", "node-init.sh")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(initScript, strings.Join(HostDirs, " "))), 0o755); err != nil {
		return err
	}
	ready := n.path("pids", "init.ready")
	_ = os.Remove(ready)
	// unshare forks the init into the new PID namespace and waits for it;
	// when unshare dies (Stop terminates it), the init is killed, and with
	// it every process of the namespace.
	cmd := n.NS.Command("unshare", "--pid", "--mount", "--kill-child=SIGKILL", "--propagation", "slave", "--mount-proc", "--", "/bin/sh", script, n.Dir)
	if err := n.spawn(initProcess, cmd, nil, false); err != nil {
		return err
	}
	if err := waitFor(ctx, 20*time.Second, func() bool { return fileExists(ready) }); err != nil {
		return fmt.Errorf("the real node's init did not set up its namespaces within 20s; the end of %s:\n%s", n.Log(initProcess), proc.Tail(n.Log(initProcess), 15))
	}
	return nil
}

// initPID is the PID (as this machine sees it) of the node's init: the
// child unshare forked.
func (n *Node) initPID() (int, bool) {
	parent, ok := n.pid(initProcess)
	if !ok {
		return 0, false
	}
	kids := children(parent)
	if len(kids) != 1 || !proc.Alive(kids[0]) {
		return 0, false
	}
	return kids[0], true
}

// Command returns a command that runs name inside the node: in its PID,
// mount and network namespaces, as a node's own process would.
func (n *Node) Command(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	pid, ok := n.initPID()
	if !ok {
		return nil, fmt.Errorf("the real node %s is not running", n.Name)
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"--target", strconv.Itoa(pid), "--pid", "--mount", "--net", "--", name}, args...)...), nil
}

// childOf waits until pid has a child and returns it, or fails when pid
// exits first or d passes.
func childOf(pid int, exited <-chan struct{}, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		if kids := children(pid); len(kids) > 0 {
			return kids[0], nil
		}
		select {
		case <-exited:
			return 0, fmt.Errorf("process %d exited before it started its child", pid)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("process %d started no child within %s", pid, d)
		}
	}
}

// children lists the live processes whose parent is pid (from /proc/*/stat:
// this kernel may lack /proc/PID/task/TID/children).
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Leftovers lists what is left on the node of the pod with this UID: its
// directory under kubelet's pods, mounts naming it in the node's mount
// namespace, its cgroups and the processes still in them. A pod deleted
// cleanly leaves none of them.
func (n *Node) Leftovers(podUID string) ([]string, error) {
	if podUID == "" {
		return nil, fmt.Errorf("no pod UID")
	}
	var out []string
	if fileExists(n.path("root", KubeletRoot, "pods", podUID)) {
		out = append(out, "directory "+KubeletRoot+"/pods/"+podUID)
	}
	mounts, err := n.MountsInNode()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if strings.Contains(m, podUID) {
			out = append(out, "mount "+m)
		}
	}
	// kubelet names a pod's cgroup pod<UID> (cgroupfs driver).
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, n.CgroupRoot()), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() || !strings.Contains(d.Name(), podUID) {
				return nil
			}
			out = append(out, "cgroup "+p)
			if procs, err := os.ReadFile(filepath.Join(p, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(procs))) > 0 {
				out = append(out, "processes "+strings.Join(strings.Fields(string(procs)), ",")+" in "+p)
			}
			return filepath.SkipDir
		})
	}
	return out, nil
}

// PodsLeft lists what any pod left on the node: directories under
// kubelet's pods, pod cgroups (kubelet's pod<UID>), network namespaces
// (containerd mounts each sandbox's under its state directory). A node
// with no pod has none.
func (n *Node) PodsLeft() ([]string, error) {
	var out []string
	dirs, _ := os.ReadDir(n.path("root", KubeletRoot, "pods"))
	for _, d := range dirs {
		out = append(out, "directory "+KubeletRoot+"/pods/"+d.Name())
	}
	mounts, err := n.MountsInNode()
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		// The pods' namespaces, under containerd's state directory (the
		// machine's own named namespaces are mounted in /run/netns).
		if strings.HasPrefix(m, n.Dir+"/") && strings.Contains(m, "/netns/") {
			out = append(out, "network namespace "+m)
		}
	}
	hs, err := hierarchies()
	if err != nil {
		return nil, err
	}
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, n.CgroupRoot()), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "pod") {
				out = append(out, "cgroup "+p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	return out, nil
}

// MountsInNode lists the mount points of the node's mount namespace.
func (n *Node) MountsInNode() ([]string, error) {
	initPID, ok := n.initPID()
	if !ok {
		return nil, fmt.Errorf("the real node %s is not running", n.Name)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", initPID))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

// PathOnNode is where a path of the node's file system (as its processes
// and hostPath volumes see it) is on this machine: under the node's
// directory for the directories the node has its own of (HostDirs), the
// machine's own otherwise.
func (n *Node) PathOnNode(p string) string {
	if under(p, "/var/run") {
		p = "/run" + strings.TrimPrefix(p, "/var/run")
	}
	for _, d := range HostDirs {
		if under(p, d) {
			return n.path("root", p)
		}
	}
	return p
}
