package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// The local cluster runs a Deployment on its fake nodes to Ready.
func TestDeploymentBecomesReady(t *testing.T) {
	env := framework.Require(t)
	ns := env.Namespace(t, "deploy")
	start := time.Now()
	d := framework.PauseDeployment(ns, "pause", 3)
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitDeploymentAvailable(t, ns, d.Name, 0)
	t.Logf("MEASURE Deployment of 3 replicas available %s after creation", time.Since(start).Round(10*time.Millisecond))

	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app=pause"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s: node %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}

// A DaemonSet runs a ready pod on every fake node.
func TestDaemonSetRunsOnEveryNode(t *testing.T) {
	env := framework.Require(t)
	ns := env.Namespace(t, "ds")
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if _, err := env.Kube.AppsV1().DaemonSets(ns).Create(context.Background(), ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := env.WaitDaemonSetReady(t, ns, ds.Name, 0)
	t.Logf("MEASURE DaemonSet ready on %d nodes after %s", env.Nodes, took.Round(10*time.Millisecond))
	got, err := env.Kube.AppsV1().DaemonSets(ns).Get(context.Background(), ds.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if int(got.Status.NumberReady) != env.Nodes {
		t.Errorf("DaemonSet ready on %d nodes, want %d", got.Status.NumberReady, env.Nodes)
	}
}

// What `virtop up` installs besides the operator is there.
func TestBaseInstalled(t *testing.T) {
	env := framework.Require(t)
	ctx := context.Background()
	ns, err := env.Kube.CoreV1().Namespaces().Get(ctx, devcluster.InstallNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := ns.Labels["kubevirt.io"]; !ok || v != "" {
		t.Errorf("namespace %s labels %v, want kubevirt.io: \"\"", ns.Name, ns.Labels)
	}
	if _, err := env.Kube.SchedulingV1().PriorityClasses().Get(ctx, "kubevirt-cluster-critical", metav1.GetOptions{}); err != nil {
		t.Error(err)
	}
	nodes, err := env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/control-plane"})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Errorf("%d control-plane nodes, want 1", len(nodes.Items))
	}
}

// The API server can be stopped and started on its own; what was stored
// survives.
func TestAPIServerStopStart(t *testing.T) {
	env := framework.Require(t)
	ns := env.Namespace(t, "apiserver")
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: ns}, Data: map[string]string{"k": "v"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	oldPID, _ := env.ComponentPID(t, devcluster.ComponentKubeAPIServer)

	env.StopAPIServer(t)
	if _, ok := env.ComponentPID(t, devcluster.ComponentKubeAPIServer); ok {
		t.Fatal("kube-apiserver still running after stop")
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("the API answered while kube-apiserver was stopped")
	}

	start := time.Now()
	env.StartAPIServer(t)
	t.Logf("MEASURE kube-apiserver ready %s after restart", time.Since(start).Round(10*time.Millisecond))
	newPID, ok := env.ComponentPID(t, devcluster.ComponentKubeAPIServer)
	if !ok || newPID == oldPID {
		t.Errorf("kube-apiserver pid %d (alive %v) after restart, was %d", newPID, ok, oldPID)
	}
	got, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil || got.Data["k"] != "v" {
		t.Fatalf("ConfigMap after restart: %v %v", got, err)
	}
	env.CheckComponents(t)
}

// etcd can be stopped and started on its own: the API server is not ready
// meanwhile, and is again afterwards with the data intact.
func TestEtcdStopStart(t *testing.T) {
	env := framework.Require(t)
	ns := env.Namespace(t, "etcd")
	ctx := context.Background()

	env.StopEtcd(t)
	poll.Eventually(t, "the API server to report not ready without etcd", framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
		return !env.APIReady(ctx), nil
	})

	start := time.Now()
	env.StartEtcd(t)
	t.Logf("MEASURE API server ready %s after etcd restart", time.Since(start).Round(10*time.Millisecond))
	poll.Eventually(t, "namespace "+ns+" to be readable", 0, func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil, err
	})
	env.CheckComponents(t)

	// The cluster still works: a Deployment becomes available.
	d := framework.PauseDeployment(ns, "after-etcd", 1)
	if _, err := env.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitDeploymentAvailable(t, ns, d.Name, 0)
}

// The process helpers see a child's PID, exit and exit code, and keep its log.
func TestVirtopChildProcess(t *testing.T) {
	env := framework.Require(t)

	v := env.Virtop(t, "version").Start()
	if v.PID() == 0 {
		t.Fatal("no PID")
	}
	if code := v.Wait(framework.DefaultTimeout); code != 0 {
		t.Fatalf("virtop version exited %d; log:\n%s", code, v.Log())
	}
	if ever, codes := v.EverExited(); !ever || len(codes) != 1 || codes[0] != 0 {
		t.Errorf("EverExited = %v %v, want true [0]", ever, codes)
	}
	if !strings.Contains(v.Log(), "virtop ") {
		t.Errorf("log lacks the version line:\n%s", v.Log())
	}

	bad := env.Virtop(t, "no-such-command").Start()
	if code := bad.Wait(framework.DefaultTimeout); code == 0 {
		t.Errorf("an unknown command exited 0")
	}

	if !env.OperatorBuilt() {
		t.Skip("the operator command is not built yet: Kill/Restart of a long-running virtop not exercised")
	}
	op := env.Operator(t).Start()
	first := op.PID()
	time.Sleep(2 * time.Second)
	if exited, code := op.Exited(); exited {
		t.Fatalf("operator exited at once with code %d", code)
	}
	op.Kill()
	if exited, _ := op.Exited(); !exited {
		t.Fatal("operator alive after Kill")
	}
	if ever, _ := op.EverExited(); ever {
		t.Error("a kill by the test counted as the operator exiting on its own")
	}
	op.Start()
	if op.PID() == first || !op.Running() {
		t.Errorf("after Start: pid %d (was %d), running %v", op.PID(), first, op.Running())
	}
	op.Restart(10 * time.Second)
	if op.Starts() != 3 {
		t.Errorf("starts = %d, want 3", op.Starts())
	}
}
