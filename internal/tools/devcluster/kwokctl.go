package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// Tools are the paths of every binary the local cluster runs. kwokctl
// defaults each of them to a download URL, which cannot be reached here, so
// every one is passed explicitly.
type Tools struct {
	Kwokctl, KwokController, KubeAPIServer, KubeControllerManager, KubeScheduler, Etcd, Kubectl string
}

// FindTools returns the cached tool binaries, or one error naming every
// missing binary and telling the user to run `make tools`.
func FindTools() (Tools, error) {
	var t Tools
	var missing, names []string
	for _, b := range []struct {
		bin toolpaths.Binary
		dst *string
	}{
		{toolpaths.Kwokctl, &t.Kwokctl},
		{toolpaths.Kwok, &t.KwokController},
		{toolpaths.KubeAPIServer, &t.KubeAPIServer},
		{toolpaths.KubeControllerManager, &t.KubeControllerManager},
		{toolpaths.KubeScheduler, &t.KubeScheduler},
		{toolpaths.Etcd, &t.Etcd},
		{toolpaths.Kubectl, &t.Kubectl},
	} {
		p, err := b.bin.Require()
		if err != nil {
			missing = append(missing, "  "+b.bin.Path())
			names = append(names, b.bin.Name)
			continue
		}
		*b.dst = p
	}
	if len(missing) > 0 {
		return t, &MissingToolsError{Names: names, Paths: missing}
	}
	return t, nil
}

// MissingToolsError names the tool binaries the local cluster needs that
// the tools cache does not hold, and how to build them.
type MissingToolsError struct {
	Names []string // binary names, in FindTools' order
	Paths []string // where each is looked for
}

func (e *MissingToolsError) Error() string {
	return fmt.Sprintf("the local cluster needs %d tool binaries that the tools cache (%s) does not hold:\n%s\n"+
		"Build them from a virtop checkout (Go %s or newer; the Go module proxy must be reachable):\n"+
		"  make tools-demo                      # all that virtop up runs, about 10-20 minutes on 2 cores the first time\n"+
		"  hack/tools/build.sh %s   # only the missing ones\n"+
		"or point VIRTOP_TOOLS_DIR at a cache that has them",
		len(e.Names), toolpaths.CacheDir(), strings.Join(e.Paths, "\n"), "1.26", strings.Join(e.Names, " "))
}

// kwokctl runs kwokctl with the cluster's work directory and binaries in its
// environment. Its combined output is returned in the error on failure and
// copied to out (if not nil).
func (c *Cluster) kwokctl(ctx context.Context, t Tools, out io.Writer, args ...string) error {
	// kwokctl's components inherit its namespace: the cluster's, sealed.
	ns := c.Netns()
	if err := ns.Ensure(); err != nil {
		return err
	}
	cmd := ns.CommandContext(ctx, t.Kwokctl, append(args, "--name", c.Name)...)
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+c.KwokWorkdir(),
		// Neither of these has a flag; both would otherwise be URLs.
		"KWOK_KUBECTL_BINARY="+t.Kubectl,
		"KWOK_KUBE_VERSION="+toolpaths.KubernetesVersion,
		"KWOK_VERSION="+toolpaths.KwokVersion,
	)
	var buf bytes.Buffer
	if out != nil {
		cmd.Stdout = io.MultiWriter(&buf, out)
	} else {
		cmd.Stdout = &buf
	}
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(buf.String()))
	}
	return nil
}

// createCluster runs `kwokctl create cluster --runtime binary` with every
// binary path given, writing the kubeconfig into the state directory.
//
// kwokctl picks ports by counting down from 32767 and test-binding each, so
// two kwokctl processes with different work directories (two engineers, two
// test suites) pick the same ports at the same moment, and one cluster fails
// with "address already in use". Ports are chosen here instead, at random
// below the kernel's ephemeral range, and creation is retried with new ports
// if a component could not bind.
func (c *Cluster) createCluster(ctx context.Context, t Tools) error {
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return err
	}
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var ports []uint32
		ports, err = freePorts(6)
		if err != nil {
			return err
		}
		// etcd's peer port has no flag: it goes through a configuration file,
		// which also keeps kwokctl from reading ~/.kwok/kwok.yaml, and holds
		// the components' extra arguments (kwokctl v0.8.0's --extra-args
		// mixes them up when a component is named twice).
		// The API server's certificate also names the kubernetes Service's
		// ClusterIP and the Gateway, which the real node's pods dial.
		conf := fmt.Sprintf("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\noptions:\n  etcdPeerPort: %d\n  kubeApiserverCertSANs: [%q, %q]\n%s",
			ports[5], KubernetesServiceIP, c.Gateway(), c.componentPatches())
		confPath := filepath.Join(c.StateDir, "kwokctl.yaml")
		if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
			return err
		}
		err = c.kwokctl(ctx, t, nil, "create", "cluster",
			"--config", confPath,
			"--runtime", "binary",
			"--kubeconfig", c.Kubeconfig(),
			"--kube-apiserver-binary", t.KubeAPIServer,
			"--kube-controller-manager-binary", t.KubeControllerManager,
			"--kube-scheduler-binary", t.KubeScheduler,
			"--kwok-controller-binary", t.KwokController,
			"--etcd-binary", t.Etcd,
			"--kube-apiserver-port", strconv.Itoa(int(ports[0])),
			"--etcd-port", strconv.Itoa(int(ports[1])),
			"--kube-controller-manager-port", strconv.Itoa(int(ports[2])),
			"--kube-scheduler-port", strconv.Itoa(int(ports[3])),
			"--controller-port", strconv.Itoa(int(ports[4])),
			"--disable-qps-limits",
			"--quiet-pull",
			"--timeout", "2m",
		)
		if err == nil {
			if !c.kwokRunning() {
				err = fmt.Errorf("kwokctl created cluster %s but kube-apiserver is not running", c.Name)
			} else {
				return nil
			}
		}
		if !c.portClash() {
			return err
		}
		// Another process took a port meanwhile: start over with new ones.
		_ = c.deleteCluster(ctx, t)
		for _, pid := range c.kwokPIDs() {
			_ = proc.Terminate(ctx, pid, 5*time.Second)
		}
		_ = os.RemoveAll(c.KwokClusterDir())
	}
	return err
}

// componentArgs are the flags the cluster's components get beyond
// kwokctl's own, by component.
func (c *Cluster) componentArgs() []struct {
	component string
	args      [][2]string
} {
	apiserver := [][2]string{
		{"advertise-address", c.Gateway()},
		{"service-cluster-ip-range", ServiceCIDR},
		// Kubelets by their address: a node's name resolves nowhere here.
		{"kubelet-preferred-address-types", "InternalIP"},
		{"enable-aggregator-routing", "true"},
		{"requestheader-client-ca-file", c.pki("ca.crt")},
		{"requestheader-allowed-names", "kwok-admin"},
		{"requestheader-username-headers", "X-Remote-User"},
		{"requestheader-group-headers", "X-Remote-Group"},
		{"requestheader-extra-headers-prefix", "X-Remote-Extra-"},
		{"kubelet-client-certificate", c.pki("admin.crt")},
		{"kubelet-client-key", c.pki("admin.key")},
	}
	if c.AuditPolicy != "" {
		// The runtime is "binary": the API server reads and writes these
		// host paths itself. Written synchronously (blocking), never rotated.
		apiserver = append(apiserver,
			[2]string{"audit-policy-file", c.AuditPolicy},
			[2]string{"audit-log-path", c.AuditLog()},
			[2]string{"audit-log-format", "json"},
			[2]string{"audit-log-mode", "blocking"},
			[2]string{"audit-log-maxsize", "0"})
	}
	return []struct {
		component string
		args      [][2]string
	}{
		// With leader election, kube-controller-manager and kube-scheduler
		// exit when the API server is away longer than their renew deadline
		// (10 s), and nothing restarts them; one instance needs no election.
		{ComponentKubeControllerManager, [][2]string{{"leader-elect", "false"}}},
		{ComponentKubeScheduler, [][2]string{{"leader-elect", "false"}}},
		// The API server advertises the bridge's address in the cluster's
		// namespace (Gateway): the kubernetes Service's endpoint, where the
		// real node's pods reach it. It dials webhooks and APIServices at
		// their endpoints rather than at Service ClusterIPs (nothing
		// implements those for the API server itself), asks kubelets with
		// the admin certificate (logs, exec), and lets aggregated API
		// servers (virt-api) trust the request headers it sets, signed by
		// the cluster's CA for its proxy client certificate.
		{ComponentKubeAPIServer, apiserver},
		// Fake pods' and nodes' IPs come from ranges of this cluster's own.
		// kwok fakes only the nodes FakeNode annotates (kwokctl's default
		// is every node: it faked the real node's pods Running with fake
		// IPs, which the API server then dialled for webhooks).
		{ComponentKwokController, [][2]string{{"cidr", c.PodCIDR()}, {"node-ip", c.NodeIP()},
			{"manage-all-nodes", "false"}, {"manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake"}}},
	}
}

// ServiceCIDR is the cluster's Service range (kube-apiserver's
// --service-cluster-ip-range; kwokctl's default would be 10.0.0.0/24).
const ServiceCIDR = "10.96.0.0/12"

// KubernetesServiceIP is the kubernetes Service's ClusterIP: the first
// address of ServiceCIDR.
const KubernetesServiceIP = "10.96.0.1"

// pki is a file of the cluster's PKI, which kwokctl writes (ca.crt, ca.key,
// admin.crt, admin.key).
func (c *Cluster) pki(name string) string { return filepath.Join(c.KwokClusterDir(), "pki", name) }

// componentPatches is componentArgs as the componentsPatches of a
// KwokctlConfiguration (YAML, indented for the document's top level).
func (c *Cluster) componentPatches() string {
	var b strings.Builder
	b.WriteString("componentsPatches:\n")
	for _, comp := range c.componentArgs() {
		fmt.Fprintf(&b, "- name: %s\n  extraArgs:\n", comp.component)
		for _, kv := range comp.args {
			fmt.Fprintf(&b, "  - key: %s\n    value: %q\n", kv[0], kv[1])
		}
	}
	return b.String()
}

// portClash reports whether a component's log says a port was taken.
func (c *Cluster) portClash() bool {
	logs, _ := filepath.Glob(filepath.Join(c.KwokClusterDir(), "logs", "*.log"))
	for _, l := range logs {
		if raw, err := os.ReadFile(l); err == nil && bytes.Contains(raw, []byte("address already in use")) {
			return true
		}
	}
	return false
}

// freePorts returns n distinct TCP ports in [20000, 32000) that are free on
// every address right now.
func freePorts(n int) ([]uint32, error) {
	seen := map[uint32]bool{}
	var out []uint32
	for tries := 0; len(out) < n && tries < 1000; tries++ {
		p := uint32(20000 + mrand.IntN(12000))
		if seen[p] {
			continue
		}
		seen[p] = true
		if portFree(p) {
			out = append(out, p)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("cannot find %d free TCP ports", n)
	}
	return out, nil
}

func portFree(p uint32) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(int(p))))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

// startCluster runs `kwokctl start cluster` (all components).
func (c *Cluster) startCluster(ctx context.Context, t Tools) error {
	return c.kwokctl(ctx, t, nil, "start", "cluster")
}

// StopAll runs `kwokctl stop cluster`: every component stops, the files stay.
func (c *Cluster) StopAll(ctx context.Context) error {
	t, err := FindTools()
	if err != nil {
		return err
	}
	return c.kwokctl(ctx, t, nil, "stop", "cluster")
}

// StartAll runs `kwokctl start cluster` and waits for the API server.
func (c *Cluster) StartAll(ctx context.Context) error {
	t, err := FindTools()
	if err != nil {
		return err
	}
	if err := c.startCluster(ctx, t); err != nil {
		return err
	}
	if err := c.ensureForwarder(""); err != nil {
		return err
	}
	return c.WaitAPI(ctx, time.Minute)
}

// deleteCluster runs `kwokctl delete cluster`, which stops every component
// and removes kwokctl's files and the kubeconfig's context.
func (c *Cluster) deleteCluster(ctx context.Context, t Tools) error {
	return c.kwokctl(ctx, t, nil, "delete", "cluster", "--kubeconfig", c.Kubeconfig())
}

// Component is one process of the binary runtime as kwokctl recorded it in
// its configuration (kwok.yaml): how to start it again.
type Component struct {
	Name    string   `json:"name"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	WorkDir string   `json:"workDir"`
	Envs    []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"envs"`
}

// Component names of the binary runtime.
const (
	ComponentEtcd                  = "etcd"
	ComponentKubeAPIServer         = "kube-apiserver"
	ComponentKubeControllerManager = "kube-controller-manager"
	ComponentKubeScheduler         = "kube-scheduler"
	ComponentKwokController        = "kwok-controller"
)

// Components reads the components kwokctl recorded for this cluster.
func (c *Cluster) Components() ([]Component, error) {
	raw, err := os.ReadFile(filepath.Join(c.KwokClusterDir(), "kwok.yaml"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, errNotExist
		}
		return nil, err
	}
	for _, doc := range splitYAML(raw) {
		var obj struct {
			Kind       string      `json:"kind"`
			Components []Component `json:"components"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("reading kwokctl's configuration: %w", err)
		}
		if obj.Kind == "KwokctlConfiguration" {
			return obj.Components, nil
		}
	}
	return nil, fmt.Errorf("no KwokctlConfiguration in %s", filepath.Join(c.KwokClusterDir(), "kwok.yaml"))
}

// Component returns the recorded component called name.
func (c *Cluster) Component(name string) (Component, error) {
	comps, err := c.Components()
	if err != nil {
		return Component{}, err
	}
	for _, comp := range comps {
		if comp.Name == name {
			return comp, nil
		}
	}
	return Component{}, fmt.Errorf("cluster %s has no component %q", c.Name, name)
}

// pidPath is where kwokctl keeps a component's PID: <workDir>/pids/<binary name>.pid.
func (comp Component) pidPath() string {
	return filepath.Join(comp.WorkDir, "pids", filepath.Base(comp.Binary)+".pid")
}

// LogPath is where the component writes its output.
func (comp Component) LogPath() string {
	return filepath.Join(comp.WorkDir, "logs", filepath.Base(comp.Binary)+".log")
}

// PID returns the component's PID from kwokctl's pidfile and whether that
// process is alive.
func (comp Component) PID() (int, bool) {
	pid, err := proc.ReadPID(comp.pidPath())
	if err != nil {
		return 0, false
	}
	return pid, proc.Alive(pid)
}

// StopComponent stops one component (for example ComponentKubeAPIServer or
// ComponentEtcd) as kwokctl's own stop does, but alone: SIGTERM, then SIGKILL
// after grace, then the pidfile is removed. kwokctl v0.8.0 has no command
// for this (only `stop cluster`).
func (c *Cluster) StopComponent(ctx context.Context, name string, grace time.Duration) error {
	comp, err := c.Component(name)
	if err != nil {
		return err
	}
	pid, ok := comp.PID()
	if ok {
		if err := proc.Terminate(ctx, pid, grace); err != nil {
			return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
		}
	}
	if err := os.Remove(comp.pidPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// KillComponent sends SIGKILL to a component (a crash, not a stop); the
// pidfile stays, as it would after a crash.
func (c *Cluster) KillComponent(name string) error {
	comp, err := c.Component(name)
	if err != nil {
		return err
	}
	pid, ok := comp.PID()
	if !ok {
		return fmt.Errorf("%s is not running", name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return err
	}
	proc.WaitGone(context.Background(), pid, 10*time.Second)
	return nil
}

// StartComponent starts one component again with the command line kwokctl
// recorded, the way kwokctl starts it: in its own session, in its work
// directory, appending to its log, writing its pidfile. A running component
// is left alone.
func (c *Cluster) StartComponent(name string) (int, error) {
	comp, err := c.Component(name)
	if err != nil {
		return 0, err
	}
	if pid, ok := comp.PID(); ok {
		return pid, nil
	}
	if err := os.MkdirAll(filepath.Dir(comp.LogPath()), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(comp.pidPath()), 0o755); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(comp.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	ns := c.Netns()
	if err := ns.Ensure(); err != nil {
		return 0, err
	}
	cmd := ns.Command(comp.Binary, comp.Args...)
	cmd.Dir = comp.WorkDir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	for _, e := range comp.Envs {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while we live, so that it does not look alive as a zombie.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(comp.pidPath(), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return pid, err
	}
	return pid, nil
}

// kwokPIDs returns the PIDs in kwokctl's pidfiles for this cluster.
func (c *Cluster) kwokPIDs() []int {
	var pids []int
	files, _ := filepath.Glob(filepath.Join(c.KwokClusterDir(), "pids", "*.pid"))
	for _, f := range files {
		if pid, err := proc.ReadPID(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kwokRunning reports whether kube-apiserver's process (per kwokctl's
// pidfile) is alive.
func (c *Cluster) kwokRunning() bool {
	comp, err := c.Component(ComponentKubeAPIServer)
	if err != nil {
		return false
	}
	_, ok := comp.PID()
	return ok
}

func splitYAML(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), raw...), []byte("\n---")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}
