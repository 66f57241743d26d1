package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// A cluster of its own: created, runs a Deployment to Ready, deleted, and no
// process that references its state directory is left.
func TestClusterLifecycleLeavesNoProcess(t *testing.T) {
	env := framework.Require(t)
	ctx := context.Background()
	c, err := devcluster.NewAt(framework.UniqueName("life"), filepath.Join(env.Dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_, _ = c.Delete(ctx, &out, 5*time.Second)
		}
		if t.Failed() {
			t.Logf("output:\n%s", out.String())
		}
	})
	tm, err := c.Ensure(ctx, &out, devcluster.ClusterOptions{Nodes: 2, Forwarder: env.VirtopBin})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE kwokctl create cluster %s; API ready %s; 2 nodes Ready %s",
		tm.KwokctlCreate.Round(10*time.Millisecond), tm.APIReady.Round(10*time.Millisecond), tm.NodesReady.Round(10*time.Millisecond))
	if !tm.Created {
		t.Error("Ensure did not report creating the cluster")
	}
	procs, err := c.Processes()
	if err != nil {
		t.Fatal(err)
	}
	if len(procs) < 5 {
		t.Errorf("want at least 5 processes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller), found %v", procs)
	}

	// Ensure again reuses it.
	tm2, err := c.Ensure(ctx, &out, devcluster.ClusterOptions{Nodes: 2, Forwarder: env.VirtopBin})
	if err != nil {
		t.Fatal(err)
	}
	if tm2.Created {
		t.Error("a second Ensure created the cluster again")
	}

	cl, err := c.Clients()
	if err != nil {
		t.Fatal(err)
	}
	d := framework.PauseDeployment("default", "pause", 2)
	start := time.Now()
	if _, err := cl.Kube.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the Deployment to be available", framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
		got, err := cl.Kube.AppsV1().Deployments("default").Get(ctx, d.Name, metav1.GetOptions{})
		return err == nil && framework.DeploymentAvailable(got), err
	})
	t.Logf("MEASURE Deployment of 2 replicas available %s after creation", time.Since(start).Round(10*time.Millisecond))

	start = time.Now()
	res, err := c.Delete(ctx, &out, 5*time.Second)
	deleted = true
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE delete %s", time.Since(start).Round(10*time.Millisecond))
	if !res.Deleted {
		t.Error("kwokctl did not delete the cluster")
	}
	if len(res.Killed) > 0 {
		t.Errorf("kwokctl delete left processes that Delete had to kill: %v", res.Killed)
	}
	if left := processesReferencing(t, c.StateDir); len(left) > 0 {
		t.Errorf("processes left after delete: %v", left)
	}
	if _, err := os.Stat(c.Kubeconfig()); err == nil {
		t.Error("the kubeconfig survived the delete")
	}
}

// processesReferencing scans /proc independently of devcluster.Processes.
func processesReferencing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmdline := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.Contains(cmdline, dir) {
			stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			out = append(out, e.Name()+" "+cmdline)
		}
	}
	return out
}

// `virtop up` and `virtop down` as a user runs them: state under
// XDG_STATE_HOME, up twice is safe, down leaves nothing behind.
func TestUpDownCommands(t *testing.T) {
	env := framework.Require(t)
	state := filepath.Join(env.Dir, "xdg-state")
	name := framework.UniqueName("cli")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(env.VirtopBin, args...)
		cmd.Dir = env.Repo
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		out, err := cmd.CombinedOutput()
		t.Logf("$ virtop %s\n%s", strings.Join(args, " "), out)
		return string(out), err
	}
	c, err := devcluster.NewAt(name, filepath.Join(state, "virtop"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), os.Stderr, 5*time.Second) })

	start := time.Now()
	out, err := run("up", "--name", name, "--nodes", "2")
	if err != nil {
		t.Fatalf("virtop up: %v", err)
	}
	t.Logf("MEASURE virtop up %s", time.Since(start).Round(10*time.Millisecond))
	// The real node is up's default: no webhook patched, the APIServices
	// served by virt-api.
	for _, want := range []string{"The real node " + c.RealNodeName() + " is Ready", "keeps the failurePolicy its release renders", "APIServices", c.Kubeconfig()} {
		if !strings.Contains(out, want) {
			t.Errorf("virtop up output lacks %q", want)
		}
	}
	if !env.OperatorBuilt() && !strings.Contains(out, "operator is not built yet") {
		t.Error("virtop up does not say that the operator is not built")
	}
	if _, err := os.Stat(c.Kubeconfig()); err != nil {
		t.Errorf("no kubeconfig in the state directory: %v", err)
	}

	out, err = run("up", "--name", name, "--nodes", "2")
	if err != nil {
		t.Fatalf("second virtop up: %v", err)
	}
	if !strings.Contains(out, "Reusing the running cluster") {
		t.Error("the second virtop up did not reuse the cluster")
	}
	if env.OperatorBuilt() && !strings.Contains(out, "already running") {
		t.Error("the second virtop up did not reuse the operator")
	}

	if _, err := run("down", "--name", name); err != nil {
		t.Fatalf("virtop down: %v", err)
	}
	if left := processesReferencing(t, c.StateDir); len(left) > 0 {
		t.Errorf("processes left after virtop down: %v", left)
	}
	out, err = run("down", "--name", name)
	if err != nil {
		t.Fatalf("second virtop down: %v", err)
	}
}
