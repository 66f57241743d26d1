// Package realnode runs a real Kubernetes node inside the local cluster's
// network namespace: containerd (with runc and the CNI plugins, from the
// machine's packages), kubelet and kube-proxy (from the tools cache). Pods
// scheduled to it run as real containers.
//
// Everything stays sealed. The node's processes run in the cluster's network
// namespace, where the API server listens; the pod network is a bridge in
// that namespace whose gateway address is also the node's address and the
// address the API server advertises for the kubernetes Service. Each pod's
// own network namespace is created by containerd (under the node's state
// directory). No route leaves the cluster's namespace, so a pod's dial to any
// address outside the bridge fails at once.
//
// The node is also a machine of its own, as far as its pods can tell: its
// processes run in a PID namespace and a mount namespace the node creates
// (see sandbox.go), whose first process stands for the machine's init. A
// pod with hostPID sees the node's processes and nothing else of this
// machine, its /proc/1/root is the node's root, and the paths a node agent
// assumes (/var/lib/kubelet, /run/kubevirt, /var/lib/cni, /var/log) are the
// node's own directories, bound over the machine's in the node's mount
// namespace only. Mounts made on the node (volumes, pod network
// namespaces, anything a privileged pod mounts) stay in that namespace and
// vanish with it.
//
// Everything the node owns lives under its directory (Node.Dir): containerd's
// root and state, kubelet's root, CNI configuration and IPAM data, the
// processes' pidfiles and logs. Its cgroups live under a root of their own
// (Node.CgroupRoot), so two nodes on one machine never see each other's pods.
// Stop removes all of it.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/netns"
	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// Label marks the real node; the local cluster places KubeVirt's control
// plane on the node carrying it.
const Label = "node.virtop.dev/real"

// Bridge is the pod network's bridge in the cluster's network namespace.
const Bridge = "virtop0"

// SandboxImage is the image of every pod's sandbox (built by the project:
// hack/image's pause).
const SandboxImage = "registry.k8s.io/pause:3.10"

// NoProxy is the proxy containerd sends registry requests to: loopback's
// discard port, where nothing listens.
const NoProxy = "http://127.0.0.1:9"

// Node is one real node.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds everything the node owns.
	Dir string
	// NS is the cluster's network namespace.
	NS netns.NS
	// PodCIDR is the bridge's subnet, from which pods take their IPs; its
	// first address (Gateway) is the bridge's and the node's.
	PodCIDR string
	// Kubeconfig is the kubeconfig kubelet and kube-proxy use (reachable
	// from inside NS).
	Kubeconfig string
	// ClientCA verifies the clients of kubelet's API (the API server).
	ClientCA string
	// Images are docker-archive tars imported into containerd before
	// kubelet starts: the sandbox image and whatever pods will run.
	Images []string
	// Labels are the Node's labels beyond Label.
	Labels map[string]string
}

// Gateway is the first address of PodCIDR: the bridge's, the node's, and
// where pods reach the API server.
func Gateway(podCIDR string) (string, error) {
	ip, ipnet, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return "", err
	}
	ip = ip.Mask(ipnet.Mask).To4()
	if ip == nil {
		return "", fmt.Errorf("%s is not an IPv4 range", podCIDR)
	}
	ip[3]++
	return ip.String(), nil
}

// Gateway is the node's address.
func (n *Node) Gateway() string {
	g, _ := Gateway(n.PodCIDR)
	return g
}

// CgroupRoot is the cgroup under which kubelet puts every pod of this
// node: one per node directory.
func (n *Node) CgroupRoot() string {
	return "/virtop/" + n.NS.Name
}

func (n *Node) path(p ...string) string { return filepath.Join(append([]string{n.Dir}, p...)...) }

// ContainerdSocket is containerd's socket.
func (n *Node) ContainerdSocket() string { return n.path("containerd", "containerd.sock") }

// Log is the path of a node process's log (containerd, kubelet, kube-proxy).
func (n *Node) Log(process string) string { return n.path("logs", process+".log") }

func (n *Node) pidfile(process string) string { return n.path("pids", process+".pid") }

// processes in start order: the node's init first (sandbox.go).
var processes = []string{initProcess, "containerd", "kubelet", "kube-proxy"}

// EnsureNetwork creates the pod network's bridge in the cluster's network
// namespace with the gateway address, if it is not there. The API server
// advertises that address, so it must exist before pods start; it can be
// created before the API server.
func EnsureNetwork(ns netns.NS, podCIDR string) error {
	gw, err := Gateway(podCIDR)
	if err != nil {
		return err
	}
	ones := strings.SplitN(podCIDR, "/", 2)[1]
	if err := ns.Ensure(); err != nil {
		return err
	}
	ip := func(args ...string) (string, error) {
		out, err := ns.Command("ip", args...).CombinedOutput()
		return string(out), err
	}
	if _, err := ip("link", "show", Bridge); err != nil {
		if out, err := ip("link", "add", Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("creating bridge %s in %s: %v: %s", Bridge, ns.Name, err, out)
		}
	}
	if out, _ := ip("-4", "addr", "show", "dev", Bridge); !strings.Contains(out, " "+gw+"/") {
		if out, err := ip("addr", "add", gw+"/"+ones, "dev", Bridge); err != nil {
			return fmt.Errorf("adding %s to %s: %v: %s", gw, Bridge, err, out)
		}
	}
	if out, err := ip("link", "set", Bridge, "up"); err != nil {
		return fmt.Errorf("bringing %s up: %v: %s", Bridge, err, out)
	}
	// Pods reach Services through the bridge's gateway: the namespace
	// forwards between its own interfaces (it has no other route).
	if out, err := ns.Command("sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		return fmt.Errorf("enabling forwarding in %s: %v: %s", ns.Name, err, out)
	}
	return nil
}

// Tools are the binaries the node runs.
type Tools struct {
	Kubelet, KubeProxy, Containerd, Ctr, Runc, CNIBinDir string
}

// MissingError names what the machine lacks to run a real node and how to
// get it.
type MissingError struct{ Missing []string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("a real node needs what this machine lacks:\n  %s\n"+
		"Install containerd, runc and the CNI plugins (Debian: apt-get install containerd runc containernetworking-plugins iptables),\n"+
		"build kubelet and kube-proxy with `hack/tools/build.sh kubelet kube-proxy`, or start the cluster with --real-node=false",
		strings.Join(e.Missing, "\n  "))
}

// FindTools finds the node's binaries: kubelet and kube-proxy in the tools
// cache, containerd, ctr and runc on PATH (or /usr/sbin), the CNI plugins
// in /usr/lib/cni or /opt/cni/bin.
func FindTools() (Tools, error) {
	var t Tools
	var missing []string
	for _, b := range []struct {
		bin toolpaths.Binary
		dst *string
	}{{toolpaths.Kubelet, &t.Kubelet}, {toolpaths.KubeProxy, &t.KubeProxy}} {
		p, err := b.bin.Require()
		if err != nil {
			missing = append(missing, b.bin.Path())
			continue
		}
		*b.dst = p
	}
	for _, b := range []struct {
		name string
		dst  *string
	}{{"containerd", &t.Containerd}, {"ctr", &t.Ctr}, {"runc", &t.Runc}, {"containerd-shim-runc-v2", new(string)}, {"iptables", new(string)}} {
		p, err := lookPath(b.name)
		if err != nil {
			missing = append(missing, b.name+" (not on PATH)")
			continue
		}
		*b.dst = p
	}
	for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			t.CNIBinDir = d
			break
		}
	}
	if t.CNIBinDir == "" {
		missing = append(missing, "the CNI plugins (bridge, host-local, loopback, portmap in /usr/lib/cni or /opt/cni/bin)")
	}
	if len(missing) > 0 {
		return t, &MissingError{Missing: missing}
	}
	return t, nil
}

func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Running reports whether each of the node's processes is alive.
func (n *Node) Running() bool {
	for _, p := range processes {
		if _, ok := n.pid(p); !ok {
			return false
		}
	}
	return true
}

func (n *Node) pid(process string) (int, bool) {
	pid, err := proc.ReadPID(n.pidfile(process))
	if err != nil || !proc.Alive(pid) {
		return 0, false
	}
	return pid, true
}

// Start starts what is not running of the node: containerd, the images'
// import, kubelet, kube-proxy. Progress goes to out.
func (n *Node) Start(ctx context.Context, out io.Writer, t Tools) error {
	if err := EnsureNetwork(n.NS, n.PodCIDR); err != nil {
		return err
	}
	for _, d := range []string{"logs", "pids", "containerd", "kubelet", "cni/net.d", "cni/ipam", "config"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := n.ensureCgroupRoot(); err != nil {
		return err
	}
	if err := n.writeConfigs(t); err != nil {
		return err
	}
	if err := n.ensureSandbox(ctx); err != nil {
		return err
	}
	if _, ok := n.pid("containerd"); !ok {
		// Every image is imported: a pull of a missing one must not even
		// ask the machine's DNS server for the registry's address, so
		// every registry request goes to a proxy on loopback where nothing
		// listens, and fails there at once.
		if err := n.startProcess("containerd", t.Containerd, []string{"HTTPS_PROXY=" + NoProxy, "HTTP_PROXY=" + NoProxy, "NO_PROXY="},
			"--config", n.path("config", "containerd.toml")); err != nil {
			return err
		}
		if err := waitFor(ctx, 30*time.Second, func() bool {
			return exec.CommandContext(ctx, t.Ctr, "--address", n.ContainerdSocket(), "version").Run() == nil
		}); err != nil {
			return fmt.Errorf("containerd did not answer on %s within 30s; the end of %s:\n%s", n.ContainerdSocket(), n.Log("containerd"), proc.Tail(n.Log("containerd"), 15))
		}
	}
	t0 := time.Now()
	if err := n.ImportImages(ctx, t); err != nil {
		return err
	}
	if len(n.Images) > 0 {
		fmt.Fprintf(out, "  imported %d images into the node's containerd in %s\n", len(n.Images), time.Since(t0).Round(100*time.Millisecond))
	}
	if _, ok := n.pid("kubelet"); !ok {
		if err := n.startProcess("kubelet", t.Kubelet, nil, n.kubeletArgs()...); err != nil {
			return err
		}
	}
	if _, ok := n.pid("kube-proxy"); !ok {
		if err := n.startProcess("kube-proxy", t.KubeProxy, nil, "--config", n.path("config", "kube-proxy.yaml")); err != nil {
			return err
		}
	}
	// A process that exits at once says why in its log.
	time.Sleep(500 * time.Millisecond)
	for _, p := range processes {
		if _, ok := n.pid(p); !ok {
			return fmt.Errorf("the real node's %s exited at once; the end of %s:\n%s", p, n.Log(p), proc.Tail(n.Log(p), 20))
		}
	}
	return nil
}

// ImportImage imports an image archive (a docker-archive, or an OCI layout
// whose index names its tag, as make image writes it) into the node's
// containerd. ref is the reference pods will name it by: its repository
// names the OCI layout's image, and a digest in it (a release manifest pins
// one) is given the image as a name of its own, repository@digest, which
// is how containerd's CRI finds an image by digest without pulling it.
func (n *Node) ImportImage(ctx context.Context, t Tools, archive, ref string) error {
	ctr := func(args ...string) error {
		args = append([]string{"--address", n.ContainerdSocket(), "-n", "k8s.io"}, args...)
		raw, err := exec.CommandContext(ctx, t.Ctr, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr %s: %v: %s", strings.Join(args[4:], " "), err, raw)
		}
		return nil
	}
	repo, tag, digest := splitRef(ref)
	args := []string{"images", "import", "--no-unpack"}
	if repo != "" {
		args = append(args, "--base-name", repo)
	}
	if err := ctr(append(args, archive)...); err != nil {
		return fmt.Errorf("importing %s into the real node's containerd: %w", archive, err)
	}
	if digest != "" && tag != "" {
		_ = ctr("images", "rm", repo+"@"+digest)
		if err := ctr("images", "tag", repo+":"+tag, repo+"@"+digest); err != nil {
			return fmt.Errorf("naming %s by its digest (the archive %s must hold exactly that image): %w", ref, archive, err)
		}
	}
	return nil
}

// ImportImages imports every archive of Images, each naming its own image.
func (n *Node) ImportImages(ctx context.Context, t Tools) error {
	for _, img := range n.Images {
		if err := n.ImportImage(ctx, t, img, ""); err != nil {
			return err
		}
	}
	return nil
}

// splitRef splits an image reference into its repository, tag and digest.
func splitRef(ref string) (repo, tag, digest string) {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref, tag = ref[:i], ref[i+1:]
	}
	return ref, tag, digest
}

func (n *Node) kubeletArgs() []string {
	labels := []string{Label + "=true"}
	for k, v := range n.Labels {
		labels = append(labels, k+"="+v)
	}
	return []string{
		"--config", n.path("config", "kubelet.yaml"),
		"--kubeconfig", n.Kubeconfig,
		"--hostname-override", n.Name,
		"--node-ip", n.Gateway(),
		"--node-labels", strings.Join(slices.Sorted(slices.Values(labels)), ","),
		"--root-dir", KubeletRoot,
		"--cert-dir", KubeletRoot + "/pki",
		"--v", "1",
	}
}

// startProcess starts one of the node's processes inside the node's
// namespaces (its init's PID and mount namespaces, the cluster's network
// namespace), in its own session, logging to its log and writing its
// pidfile with the process's own PID as this machine sees it.
func (n *Node) startProcess(name, bin string, env []string, args ...string) error {
	initPID, ok := n.initPID()
	if !ok {
		return fmt.Errorf("starting the real node's %s: the node's init is not running", name)
	}
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(initPID), "--pid", "--mount", "--net", "--wd=" + n.Dir, "--", bin}, args...)...)
	return n.spawn(name, cmd, env, true)
}

// spawn starts cmd in its own session with the node's environment, logging
// to name's log. The pidfile gets cmd's PID, or with viaFork the PID of the
// child cmd forks (nsenter forks to enter a PID namespace and waits for its
// child; the child is the node's process).
func (n *Node) spawn(name string, cmd *exec.Cmd, env []string, viaFork bool) error {
	logf, err := os.OpenFile(n.Log(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Dir = n.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	path := os.Getenv("PATH")
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if !strings.Contains(":"+path+":", ":"+d+":") {
			path += ":" + d
		}
	}
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + n.Dir}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the real node's %s: %w", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	pid := cmd.Process.Pid
	if viaFork {
		child, err := childOf(pid, exited, 10*time.Second)
		if err != nil {
			return fmt.Errorf("starting the real node's %s: %w; the end of %s:\n%s", name, err, n.Log(name), proc.Tail(n.Log(name), 10))
		}
		pid = child
	}
	return os.WriteFile(n.pidfile(name), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// ensureCgroupRoot creates the node's cgroup root in every cgroup v1
// hierarchy (kubelet refuses a root that does not exist), giving the cpuset
// hierarchy its parent's CPUs and memory nodes.
func (n *Node) ensureCgroupRoot() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := h
		for _, part := range strings.Split(strings.Trim(n.CgroupRoot(), "/"), "/") {
			parent := dir
			dir = filepath.Join(dir, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
			if filepath.Base(h) == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if cur, _ := os.ReadFile(filepath.Join(dir, f)); strings.TrimSpace(string(cur)) != "" {
						continue
					}
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return fmt.Errorf("writing %s: %w", filepath.Join(dir, f), err)
					}
				}
			}
		}
	}
	return nil
}

// hierarchies lists the mounted cgroup v1 hierarchies (and the v2 one).
func hierarchies() ([]string, error) {
	raw, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out, nil
}

// Stop stops the node and removes everything it owns: kube-proxy and
// kubelet, every container and sandbox (their tasks killed), containerd and
// its shims, the mounts under Dir, the pods' network namespaces, the cgroup
// root, and Dir itself. It is safe to call on a node that is not running or
// only half started.
func (n *Node) Stop(ctx context.Context, t Tools) error {
	var errs []error
	for _, p := range []string{"kube-proxy", "kubelet"} {
		if pid, ok := n.pid(p); ok {
			if err := proc.Terminate(ctx, pid, 10*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Every container's task, then containerd; the shims exit with their
	// tasks, and whatever is left is killed below.
	if _, ok := n.pid("containerd"); ok && t.Ctr != "" {
		n.killTasks(ctx, t.Ctr)
	}
	if pid, ok := n.pid("containerd"); ok {
		if err := proc.Terminate(ctx, pid, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// The init last: when it dies, whatever still runs in the node's PID
	// namespace is killed with it, and the node's mount namespace (every
	// volume, pod network namespace and mount a pod made) goes when its
	// last process has.
	// (unshare, the init's parent, ignores SIGTERM: the init is told first.)
	if pid, ok := n.initPID(); ok {
		if err := proc.Terminate(ctx, pid, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if pid, ok := n.pid(initProcess); ok {
		if err := proc.Terminate(ctx, pid, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pid := range n.leftovers() {
		if err := proc.Terminate(ctx, pid, 5*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.unmountAll(); err != nil {
		errs = append(errs, err)
	}
	if err := n.removeCgroups(); err != nil {
		errs = append(errs, err)
	}
	// The bridge, the pods' veths and kube-proxy's rules go with the
	// cluster's namespace, which the cluster removes.
	if len(errs) == 0 {
		if err := os.RemoveAll(n.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killTasks kills every task in containerd's k8s.io namespace and removes
// the containers.
func (n *Node) killTasks(ctx context.Context, ctr string) {
	run := func(args ...string) string {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		raw, _ := exec.CommandContext(cctx, ctr, append([]string{"--address", n.ContainerdSocket(), "-n", "k8s.io"}, args...)...).Output()
		return string(raw)
	}
	ids := strings.Fields(run("tasks", "ls", "-q"))
	for _, id := range ids {
		run("tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range ids {
		run("tasks", "delete", "-f", id)
	}
	for _, id := range strings.Fields(run("containers", "ls", "-q")) {
		run("containers", "delete", id)
	}
}

// leftovers are live processes that reference Dir: containerd's shims
// (their -address is under it), and any node process whose pidfile is gone.
func (n *Node) leftovers() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(strings.ReplaceAll(string(raw), "\x00", " "), n.Dir+"/") && proc.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Mounts lists the mount points under Dir, deepest first.
func (n *Node) Mounts() ([]string, error) {
	raw, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		mp := unescapeMount(f[1])
		if mp == n.Dir || strings.HasPrefix(mp, n.Dir+"/") {
			out = append(out, mp)
		}
	}
	// Deepest (and latest) first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func (n *Node) unmountAll() error {
	for attempt := 0; attempt < 5; attempt++ {
		mps, err := n.Mounts()
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
	mps, _ := n.Mounts()
	if len(mps) > 0 {
		return fmt.Errorf("mounts under %s remain: %s", n.Dir, strings.Join(mps, ", "))
	}
	return nil
}

// removeCgroups removes the node's cgroup root in every hierarchy, deepest
// cgroups first; processes still in them are killed.
func (n *Node) removeCgroups() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hs {
		root := filepath.Join(h, n.CgroupRoot())
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if raw, err := os.ReadFile(filepath.Join(dirs[i], "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(raw)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			var err error
			for try := 0; try < 20; try++ {
				if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
			}
		}
		// The parent every node shares goes when no other node uses it.
		_ = os.Remove(filepath.Dir(root))
	}
	return errors.Join(errs...)
}

// unescapeMount undoes /proc/mounts' octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func waitFor(ctx context.Context, d time.Duration, ok func() bool) error {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
