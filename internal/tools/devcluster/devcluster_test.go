package devcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testpoll "github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/realnode"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

func TestNewNamesAndPaths(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/tmp/xdg")
	c, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != DefaultName || c.StateDir != "/tmp/xdg/virtop/virtop" {
		t.Errorf("New(\"\") = %+v", c)
	}
	if c.Kubeconfig() != "/tmp/xdg/virtop/virtop/kubeconfig" || c.OperatorPIDFile() != "/tmp/xdg/virtop/virtop/operator.pid" {
		t.Errorf("paths: %s %s", c.Kubeconfig(), c.OperatorPIDFile())
	}
	if c.KwokClusterDir() != "/tmp/xdg/virtop/virtop/kwok/clusters/virtop" {
		t.Errorf("kwok dir: %s", c.KwokClusterDir())
	}
	for _, bad := range []string{"UP", "a_b", "-a", "a-", strings.Repeat("a", 41), "../x"} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestParsePrometheusMode(t *testing.T) {
	for in, want := range map[string]PrometheusMode{"": PrometheusNone, "none": PrometheusNone, "before": PrometheusBefore, "late": PrometheusLate} {
		if got, err := ParsePrometheusMode(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParsePrometheusMode("early"); err == nil {
		t.Error("early accepted")
	}
}

func TestFakeNode(t *testing.T) {
	cp := FakeNode("x", 0, false)
	if cp.Name != "x-control-plane" || cp.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Errorf("control-plane node: %s %v", cp.Name, cp.Annotations)
	}
	if _, ok := cp.Labels["node-role.kubernetes.io/control-plane"]; !ok {
		t.Error("node 0 lacks the control-plane label")
	}
	if len(cp.Spec.Taints) != 0 {
		t.Errorf("taints without kwokTaint: %v", cp.Spec.Taints)
	}
	w := FakeNode("x", 2, true)
	if w.Name != "x-worker2" || len(w.Spec.Taints) != 1 || w.Spec.Taints[0].Key != "kwok.x-k8s.io/node" {
		t.Errorf("worker: %s %v", w.Name, w.Spec.Taints)
	}
	if _, ok := w.Labels["node-role.kubernetes.io/control-plane"]; ok {
		t.Error("worker labelled control-plane")
	}
	if w.Status.Allocatable.Pods().Value() != 110 || w.Status.Allocatable.Cpu().Value() != 32 {
		t.Errorf("allocatable: %v", w.Status.Allocatable)
	}
}

func TestComponentsAndRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("components start in the cluster's network namespace, which needs root")
	}
	c, err := NewAt("t", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Netns().Delete(); err != nil {
			t.Error(err)
		}
	})
	dir := c.KwokClusterDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	conf := `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
components:
- name: etcd
  binary: ` + sleep + `
  args: ["300"]
  workDir: ` + dir + `
  envs:
  - name: FOO
    value: bar
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
`
	if err := os.WriteFile(filepath.Join(dir, "kwok.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if !c.Exists() {
		t.Fatal("Exists = false")
	}
	comp, err := c.Component(ComponentEtcd)
	if err != nil {
		t.Fatal(err)
	}
	if comp.Binary != sleep || len(comp.Envs) != 1 {
		t.Fatalf("component: %+v", comp)
	}
	pid, err := c.StartComponent(ComponentEtcd)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := comp.PID(); !ok || got != pid {
		t.Fatalf("PID() = %d %v, want %d alive", got, ok, pid)
	}
	// nsenter enters the namespace, then executes the component in its
	// place (same PID): just after the start it may still be doing either.
	testpoll.Eventually(t, "the component in the cluster's namespace, among its processes", 10*time.Second, func() (bool, string) {
		if !c.Netns().Holds(pid) {
			return false, fmt.Sprintf("the component (pid %d) runs outside the cluster's network namespace", pid)
		}
		procs, err := c.Processes()
		if err != nil {
			return false, err.Error()
		}
		return len(procs) == 1 && procs[0].PID == pid, fmt.Sprintf("Processes() = %v, want the one with pid %d (its cwd is in the state dir)", procs, pid)
	})
	again, err := c.StartComponent(ComponentEtcd)
	if err != nil || again != pid {
		t.Errorf("second start: %d %v, want the running %d", again, err, pid)
	}
	if err := c.StopComponent(t.Context(), ComponentEtcd, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if proc.Alive(pid) {
		t.Error("still alive after StopComponent")
	}
	if _, ok := comp.PID(); ok {
		t.Error("PID() alive after stop")
	}
}

func TestRefersTo(t *testing.T) {
	for s, want := range map[string]bool{
		"/bin/x --kubeconfig /s/virtop/a/kubeconfig":  true,
		"/bin/x --kubeconfig=/s/virtop/a":             true,
		"/bin/x --kubeconfig /s/virtop/ab/kubeconfig": false,
		"/s/virtop/a": true,
	} {
		if got := refersTo(s, "/s/virtop/a"); got != want {
			t.Errorf("refersTo(%q) = %v", s, got)
		}
	}
}

func TestFindRepoRoot(t *testing.T) {
	root := FindRepoRoot("")
	if root == "" || !fileExists(filepath.Join(root, "go.mod")) || !toolpaths.IsVirtopModule(filepath.Join(root, "go.mod")) {
		t.Errorf("FindRepoRoot = %q", root)
	}
}

// A cluster's fake pod and node addresses come from ranges of its own,
// stable for its state directory and clear of the Service range.
func TestAddressRanges(t *testing.T) {
	services := &net.IPNet{IP: net.IPv4(10, 96, 0, 0), Mask: net.CIDRMask(12, 32)}
	pods := &net.IPNet{IP: net.IPv4(10, 128, 0, 0), Mask: net.CIDRMask(10, 32)}
	nodes := &net.IPNet{IP: net.IPv4(10, 192, 0, 0), Mask: net.CIDRMask(10, 32)}
	seen := map[string]string{}
	for _, root := range []string{"/a", "/b", "/c", "/d"} {
		c, err := NewAt("x", root)
		if err != nil {
			t.Fatal(err)
		}
		ip, cidr, err := net.ParseCIDR(c.PodCIDR())
		if err != nil {
			t.Fatal(err)
		}
		node := net.ParseIP(c.NodeIP())
		if !pods.Contains(ip) || services.Contains(ip) || !nodes.Contains(node) || cidr.Contains(node) {
			t.Errorf("state %s: pods %s, node %s", c.StateDir, c.PodCIDR(), c.NodeIP())
		}
		// The real node's bridge: in the pod block, clear of kwok's pods
		// and the Services, its gateway the subnet's first address.
		_, bridge, err := net.ParseCIDR(c.NodePodCIDR())
		if err != nil {
			t.Fatal(err)
		}
		gw := net.ParseIP(c.Gateway())
		if !pods.Contains(bridge.IP) || bridge.Contains(ip) || cidr.Contains(bridge.IP) || !bridge.Contains(gw) ||
			services.Contains(gw) || gw.To4()[3] != 1 {
			t.Errorf("state %s: kwok's pods %s, the real node's %s, gateway %s", c.StateDir, c.PodCIDR(), c.NodePodCIDR(), c.Gateway())
		}
		if gwRN, _ := realnode.Gateway(c.NodePodCIDR()); gwRN != c.Gateway() {
			t.Errorf("state %s: devcluster's gateway %s, realnode's %s", c.StateDir, c.Gateway(), gwRN)
		}
		again, _ := NewAt("x", root)
		if again.PodCIDR() != c.PodCIDR() || again.NodeIP() != c.NodeIP() {
			t.Errorf("state %s: ranges not stable", c.StateDir)
		}
		seen[c.PodCIDR()] = root
	}
	if len(seen) < 2 {
		t.Errorf("four state directories share one pod range: %v", seen)
	}
	if _, svc, _ := net.ParseCIDR(ServiceCIDR); !svc.Contains(net.ParseIP(KubernetesServiceIP)) || svc.String() != services.String() {
		t.Errorf("Service range %s, kubernetes Service %s", ServiceCIDR, KubernetesServiceIP)
	}
}

// TestFreeLoopbackAddrDistinct: the addresses handed out one after the
// other are distinct, though each is closed before the next is picked (the
// kernel hands a just-closed port out again: without the check, within
// 75 to 120 picks in each of three runs).
func TestFreeLoopbackAddrDistinct(t *testing.T) {
	seen := map[string]int{}
	for i := range 600 {
		a, err := FreeLoopbackAddr()
		if err != nil {
			t.Fatal(err)
		}
		if j, ok := seen[a]; ok {
			t.Fatalf("pick %d returned %s, as pick %d did", i, a, j)
		}
		seen[a] = i
	}
}
