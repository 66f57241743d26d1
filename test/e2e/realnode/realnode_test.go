// Package realnode runs upstream KubeVirt's own control plane on the local
// cluster's real node against virtop's install: virt-api, virt-controller,
// virt-exportproxy and the synchronization controller, built from upstream's
// source at the installed release (make node-images), run as containers by
// kubelet and containerd. No webhook is patched: each fails as its release
// renders it.
package realnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainWith(m, framework.Options{Nodes: 2, RealNode: true}))
}

const (
	installNS = devcluster.InstallNamespace
	// waitLong bounds the install: images are local, but five real
	// containers start on a loaded 2-core machine.
	waitLong = 6 * time.Minute
)

var vmGVR, vmiGVR = framework.VMGVR, framework.VMIGVR

// TestUpstreamControlPlaneOnRealNode installs each release it covers
// (testreleases: the default one in make test, every one in make test-all)
// as `virtop up` does on a cluster with a real node (the operator a host
// process, the sample KubeVirt resource placed on the real node), checks
// it with upstream's own components, one subtest a question — everything
// running, logs, the webhooks as rendered, the APIServices served,
// upstream's admission, virtctl, virt-controller acting — and uninstalls
// it, leaving the node empty for the next release. Last, no component
// dialled an address outside the cluster's namespace.
func TestUpstreamControlPlaneOnRealNode(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	c := env.Client(t)
	// One operator for every release, stopped when the whole test ends.
	op := env.Operator(t, append(framework.HostOperatorArgs(t), "--leader-elect")...).Start()
	for _, rel := range testreleases.Select(t, release.Builtin().Versions()) {
		t.Run(rel, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(upstreamSrc(env), "kubevirt-"+rel+".tar.gz")); err != nil {
				t.Skipf("no upstream source for %s in %s: its components cannot be built here", rel, upstreamSrc(env))
			}
			start := time.Now()
			env.UpAt(t, devcluster.ClusterOptions{RealNode: true}, rel)
			framework.WaitKubeVirt(t, c, "Available at "+rel, waitLong, framework.RolledOutAt(rel))
			t.Logf("MEASURE install of %s on the real node to Available: %s", rel, time.Since(start).Round(100*time.Millisecond))

			t.Run("control plane runs on the real node, Ready, no restarts", func(t *testing.T) {
				checkRealPods(t, env, c)
			})
			t.Run("the API server reads a container's log through kubelet", func(t *testing.T) {
				checkLogs(t, env)
			})
			t.Run("every webhook keeps its release's failurePolicy", func(t *testing.T) {
				checkWebhooksAsRendered(t, env)
			})
			t.Run("every APIService virtop registers is Available", func(t *testing.T) {
				checkAPIServicesAvailable(t, c)
			})
			t.Run("upstream's admission refuses an invalid VM and mutates a valid one", func(t *testing.T) {
				checkAdmission(t, env, rel)
			})
			t.Run("virtctl version answers through the subresources APIService", func(t *testing.T) {
				checkVirtctlVersion(t, env, rel)
			})
			t.Run("virt-controller starts a VM with runStrategy Always", func(t *testing.T) {
				checkVMStarts(t, env)
			})
			t.Run("certificates rotate under load: no request refused, virt-api serves each new one", func(t *testing.T) {
				// Three minutes: make test-all's, beyond CI's budget
				// (TestTrustReachesWebhooksBeforeRollout covers its defect in CI).
				if !testreleases.All(t) {
					t.Skipf("%s=default: the rotation under load runs in make test-all", testreleases.Env)
				}
				checkRotationUnderLoad(t, env, c, rel)
			})
			t.Run("uninstall leaves nothing on the real node", func(t *testing.T) {
				checkUninstall(t, env, c)
			})
		})
	}
	t.Run("nothing dialled an address outside the cluster's namespace", func(t *testing.T) {
		checkNoDialOut(t, env)
	})
	if t.Failed() {
		t.Logf("operator log:\n%s", op.Log())
	}
}

// upstreamSrc is where upstream's source archives are (hack/tools/kubevirt.sh's default).
func upstreamSrc(env *framework.Env) string {
	if d := os.Getenv("VIRTOP_UPSTREAM_SRC"); d != "" {
		return d
	}
	return filepath.Join(env.Repo, "..", "shared", "upstream-src")
}

// controlPlane is what must run on the real node in every release; the
// others (virt-exportproxy, the synchronization controller) when their
// Deployments exist (their gates deploy them).
var controlPlane = []string{"virt-api", "virt-controller"}

func checkRealPods(t *testing.T, env *framework.Env, c client.Client) {
	ctx := context.Background()
	poll.Eventually(t, "every KubeVirt pod Running and Ready on the real node", waitLong, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var bad []string
		seen := map[string]int{}
		for _, p := range pods.Items {
			comp := p.Labels["kubevirt.io"]
			if comp == "virt-handler" {
				if p.Spec.NodeName == env.Cluster.RealNodeName() {
					bad = append(bad, fmt.Sprintf("virt-handler pod %s is on the real node", p.Name))
				}
				continue
			}
			seen[comp]++
			if p.Spec.NodeName != env.Cluster.RealNodeName() {
				bad = append(bad, fmt.Sprintf("%s on node %q", p.Name, p.Spec.NodeName))
				continue
			}
			if p.Status.Phase != corev1.PodRunning || !podReady(&p) {
				bad = append(bad, fmt.Sprintf("%s %s ready=%v %s", p.Name, p.Status.Phase, podReady(&p), containerStates(&p)))
			}
		}
		want := slices.Clone(controlPlane)
		if ds, err := env.Kube.AppsV1().Deployments(installNS).List(ctx, metav1.ListOptions{}); err == nil {
			for _, d := range ds.Items {
				if !slices.Contains(want, d.Name) && d.Name != "virt-operator" {
					want = append(want, d.Name)
				}
			}
		}
		for _, comp := range want {
			if seen[comp] == 0 {
				bad = append(bad, comp+": no pod")
			}
		}
		if len(bad) > 0 {
			return false, fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return true, nil
	})
	pods, err := env.Cluster.RealNodePods(ctx, env.Clients, installNS)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("pod %s container %s restarted %d times; last state %+v", p.Name, cs.Name, cs.RestartCount, cs.LastTerminationState)
			}
		}
		t.Logf("on the real node: %s %s ip %s", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	if len(pods) < len(controlPlane) {
		t.Errorf("%d pods on the real node, want at least %d", len(pods), len(controlPlane))
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func containerStates(p *corev1.Pod) string {
	var s []string
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			s = append(s, fmt.Sprintf("%s waiting %s: %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			s = append(s, fmt.Sprintf("%s terminated %s (%d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		default:
			s = append(s, fmt.Sprintf("%s running restarts=%d", cs.Name, cs.RestartCount))
		}
	}
	return strings.Join(s, ", ")
}

// checkWebhooksAsRendered: upstream renders every KubeVirt webhook Fail
// except virt-launcher-pod-mutator (v1.8+), which is Ignore; the local
// cluster patches none.
func checkWebhooksAsRendered(t *testing.T, env *framework.Env) {
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: vocab.ManagedByLabel + "=" + vocab.ManagedByValue}
	check := func(config, name string, fp *admissionregistrationv1.FailurePolicyType) {
		want := admissionregistrationv1.Fail
		if name == "virt-launcher-pod-mutator.kubevirt.io" {
			want = admissionregistrationv1.Ignore
		}
		if fp == nil || *fp != want {
			t.Errorf("%s webhook %s: failurePolicy %v, want %s", config, name, fp, want)
		}
	}
	n := 0
	vw, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range vw.Items {
		for _, w := range c.Webhooks {
			check(c.Name, w.Name, w.FailurePolicy)
			n++
		}
	}
	mw, err := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mw.Items {
		for _, w := range c.Webhooks {
			check(c.Name, w.Name, w.FailurePolicy)
			n++
		}
	}
	if n < 20 {
		t.Errorf("found %d KubeVirt webhooks managed by virtop; want the release's (more than 20)", n)
	}
	t.Logf("%d webhooks, each with the failurePolicy its release renders", n)
}

func checkAPIServicesAvailable(t *testing.T, c client.Client) {
	want := []string{"v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"}
	start := time.Now()
	defer func() {
		t.Logf("MEASURE the subresources APIServices Available %s after the install was", time.Since(start).Round(100*time.Millisecond))
	}()
	poll.Eventually(t, "the subresources APIServices Available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var bad []string
		for _, name := range want {
			as := &apiregistrationv1.APIService{}
			if err := c.Get(ctx, client.ObjectKey{Name: name}, as); err != nil {
				bad = append(bad, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			ok := false
			for _, c := range as.Status.Conditions {
				if c.Type == apiregistrationv1.Available {
					ok = c.Status == apiregistrationv1.ConditionTrue
					if !ok {
						bad = append(bad, fmt.Sprintf("%s: Available %s %s: %s", name, c.Status, c.Reason, c.Message))
					}
				}
			}
			if !ok && len(as.Status.Conditions) == 0 {
				bad = append(bad, name+": no conditions")
			}
		}
		if len(bad) > 0 {
			return false, fmt.Errorf("%s", strings.Join(bad, "; "))
		}
		return true, nil
	})
}

func checkAdmission(t *testing.T, env *framework.Env, rel string) {
	ctx := context.Background()
	vms := env.Clients.Dynamic.Resource(vmGVR).Namespace("default")
	_, err := vms.Create(ctx, framework.VM("refused", "Halted", true), metav1.CreateOptions{})
	if err == nil {
		t.Fatal("a VM with a disk that names no volume was accepted; upstream's validator refuses it")
	}
	msg := err.Error()
	t.Logf("invalid VM refused: %s", msg)
	if !strings.Contains(msg, "virtualmachine-validator.kubevirt.io") || !strings.Contains(msg, "orphan") {
		t.Errorf("the refusal is not upstream's validator naming the disk: %s", msg)
	}
	got, err := vms.Create(ctx, framework.VM("accepted", "Halted", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a valid VM was refused: %v", err)
	}
	t.Cleanup(func() { _ = vms.Delete(context.Background(), "accepted", metav1.DeleteOptions{}) })
	// Upstream's mutator fills what the VM left out: the machine type, and
	// the firmware's UUID (v1.6 on; v1.5 sets a serial instead).
	machine, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "domain", "machine", "type")
	field := "uuid"
	if strings.HasPrefix(rel, "v1.5.") {
		field = "serial"
	}
	fw, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "domain", "firmware", field)
	if machine == "" || fw == "" {
		t.Errorf("the valid VM was not mutated as upstream %s mutates it: machine type %q, firmware %s %q", rel, machine, field, fw)
	}
	t.Logf("valid VM accepted and mutated: machine type %q, firmware %s %q", machine, field, fw)
}

func checkVirtctlVersion(t *testing.T, env *framework.Env, rel string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, framework.Virtctl(t, rel), "version", "--kubeconfig", env.Cluster.Kubeconfig())
	raw, err := cmd.CombinedOutput()
	t.Logf("virtctl version:\n%s", raw)
	if err != nil {
		t.Fatalf("virtctl version: %v", err)
	}
	server := false
	for _, line := range strings.Split(string(raw), "\n") {
		server = server || strings.HasPrefix(line, "Server Version") && strings.Contains(line, `GitVersion:"`+rel+`"`)
	}
	if !server {
		t.Errorf("virtctl version did not report the server at %s", rel)
	}
}

func checkVMStarts(t *testing.T, env *framework.Env) {
	ctx := context.Background()
	env.PrepareFakeNodesForVMs(t)
	vms := env.Clients.Dynamic.Resource(vmGVR).Namespace("default")
	if _, err := vms.Create(ctx, framework.VM("running", "Always", false), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a VM with runStrategy Always: %v", err)
	}
	t.Cleanup(func() { _ = vms.Delete(context.Background(), "running", metav1.DeleteOptions{}) })
	var phase, node string
	poll.Eventually(t, "the VM's VMI and virt-launcher pod", 3*time.Minute, func(ctx context.Context) (bool, error) {
		vmi, err := env.Clients.Dynamic.Resource(vmiGVR).Namespace("default").Get(ctx, "running", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		phase, _, _ = unstructured.NestedString(vmi.Object, "status", "phase")
		pods, err := env.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher,vm.kubevirt.io/name=running"})
		if err != nil {
			return false, err
		}
		if len(pods.Items) == 0 {
			return false, fmt.Errorf("VMI phase %q; no virt-launcher pod yet", phase)
		}
		node = pods.Items[0].Spec.NodeName
		if node == "" {
			return false, fmt.Errorf("VMI phase %q; virt-launcher pod %s not scheduled", phase, pods.Items[0].Name)
		}
		return true, nil
	})
	if node == env.Cluster.RealNodeName() {
		t.Errorf("the virt-launcher pod landed on the real node; workloads are placed on the fake nodes")
	}
	t.Logf("VMI phase %q, its virt-launcher pod on %s (a fake node: no real virt-handler takes it further)", phase, node)
}

func checkUninstall(t *testing.T, env *framework.Env, c client.Client) {
	ctx := context.Background()
	// The default uninstall strategy refuses while workloads exist: the
	// VMs go first, and their VMIs with them (virt-controller acts).
	vms := env.Clients.Dynamic.Resource(vmGVR).Namespace("default")
	if err := vms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "no VM and no VMI left", 3*time.Minute, func(ctx context.Context) (bool, error) {
		l, err := vms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		li, err := env.Clients.Dynamic.Resource(vmiGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		if n := len(l.Items) + len(li.Items); n > 0 {
			return false, fmt.Errorf("%d VMs, %d VMIs", len(l.Items), len(li.Items))
		}
		return true, nil
	})

	// While KubeVirt uninstalls: when the last of its webhook
	// configurations went, and when virt-api started to stop.
	type moments struct{ webhooksGone, virtAPIStopping time.Time }
	seen := make(chan moments, 1)
	stop := make(chan struct{})
	go func() {
		var m moments
		defer func() { seen <- m }()
		sel := metav1.ListOptions{LabelSelector: vocab.ManagedByLabel + "=" + vocab.ManagedByValue}
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			now := time.Now()
			if m.webhooksGone.IsZero() {
				vw, err1 := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel)
				mw, err2 := env.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, sel)
				if err1 == nil && err2 == nil && len(vw.Items)+len(mw.Items) == 0 {
					m.webhooksGone = now
				}
			}
			if m.virtAPIStopping.IsZero() {
				pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-api"})
				if err == nil {
					stopping := len(pods.Items) == 0
					for _, p := range pods.Items {
						if p.DeletionTimestamp != nil {
							stopping = true
						}
					}
					if stopping {
						m.virtAPIStopping = now
					}
				}
			}
		}
	}()
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the KubeVirt resource gone", waitLong, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, framework.KubeVirtKey, &kvv1.KubeVirt{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
	poll.Eventually(t, "no pod left on the real node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + env.Cluster.RealNodeName()})
		if err != nil {
			return false, err
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		if len(left) > 0 {
			return false, fmt.Errorf("pods left: %s", strings.Join(left, ", "))
		}
		return true, nil
	})
	close(stop)
	m := <-seen
	switch {
	case m.webhooksGone.IsZero():
		t.Error("KubeVirt's webhook configurations were never all gone")
	case m.virtAPIStopping.IsZero():
		t.Error("virt-api was never seen stopping")
	case m.virtAPIStopping.Before(m.webhooksGone):
		t.Errorf("virt-api began to stop %s before the last webhook configuration went: requests its webhooks match were refused meanwhile",
			m.webhooksGone.Sub(m.virtAPIStopping).Round(time.Millisecond))
	default:
		t.Logf("webhook configurations gone %s before virt-api began to stop", m.virtAPIStopping.Sub(m.webhooksGone).Round(time.Millisecond))
	}
}

// checkNoDialOut reads every log of the cluster (its components', the
// real node's, its containers') for a dial that the sealed namespace
// refused: "network is unreachable" means something tried an address
// outside loopback and the cluster's bridge, which must never happen (a
// hostname looked up at the machine's DNS server, a registry asked for an
// image, a fake pod's IP dialled).
func checkNoDialOut(t *testing.T, env *framework.Env) {
	dirs := []string{filepath.Join(env.Cluster.KwokClusterDir(), "logs"), filepath.Join(env.Cluster.NodeDir(), "logs"), env.LogDir()}
	var found []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(raw), "\n") {
				if strings.Contains(line, "network is unreachable") {
					rel, _ := filepath.Rel(env.Dir, p)
					found = append(found, rel+": "+line)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) > 0 {
		if len(found) > 20 {
			found = append(found[:20], fmt.Sprintf("… and %d more", len(found)-20))
		}
		t.Errorf("%d dials were refused by the sealed namespace:\n%s", len(found), strings.Join(found, "\n"))
	}
}

// checkLogs reads virt-api's log as `kubectl logs` does: the API server
// asks the real node's kubelet, at the node's address.
func checkLogs(t *testing.T, env *framework.Env) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-api"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no virt-api pod: %v", err)
	}
	raw, err := env.Kube.CoreV1().Pods(installNS).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{TailLines: ptrTo(int64(5))}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the log of %s through the API server: %v", pods.Items[0].Name, err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		t.Fatalf("the log of %s is empty", pods.Items[0].Name)
	}
	t.Logf("the last lines of %s's log:\n%s", pods.Items[0].Name, raw)
}

func ptrTo[T any](v T) *T { return &v }

// rotationWindow is how long the rotation case watches: with the lifetimes
// it sets, the CA is issued again at once and after 2 minutes, the serving
// certificates at once, every minute, and re-signed by the new CA.
const rotationWindow = 3 * time.Minute

// servedBound bounds how long after its Secret changes virt-api may serve
// the previous certificate: kubelet refreshes a Secret volume on its sync
// (1 minute, plus its cache's TTL and jitter), then virt-api reloads the
// files.
const servedBound = 3 * time.Minute

// checkRotationUnderLoad sets short certificate lifetimes (a changed
// lifetime re-issues every certificate at once, the CA included) and, for
// rotationWindow, sends a VM create (dry run, through upstream's mutating
// and validating webhooks, which fail closed) every 250 ms while it
// watches virt-api's certificate Secret and what virt-api's pods present.
// No request may be refused; each pod must present the Secret's current
// certificate within servedBound of its change.
func checkRotationUnderLoad(t *testing.T, env *framework.Env, c client.Client, rel string) {
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kv.DeepCopy())
	kv.Spec.CertificateRotateStrategy.SelfSigned = &kvv1.KubeVirtSelfSignConfiguration{
		CA:     &kvv1.CertConfig{Duration: &metav1.Duration{Duration: 6 * time.Minute}, RenewBefore: &metav1.Duration{Duration: 4 * time.Minute}},
		Server: &kvv1.CertConfig{Duration: &metav1.Duration{Duration: 3 * time.Minute}, RenewBefore: &metav1.Duration{Duration: 2 * time.Minute}},
	}
	if err := c.Patch(ctx, kv, patch); err != nil {
		t.Fatal(err)
	}
	// The lifetimes go back to the defaults afterwards (issued again, once).
	t.Cleanup(func() {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(context.Background(), framework.KubeVirtKey, kv); err == nil {
			p := client.MergeFrom(kv.DeepCopy())
			kv.Spec.CertificateRotateStrategy.SelfSigned = nil
			_ = c.Patch(context.Background(), kv, p)
		}
	})

	vms := env.Clients.Dynamic.Resource(vmGVR).Namespace("default")
	deadline := time.Now().Add(rotationWindow)
	var sent, refused int
	var refusals []string
	// The serials virtop wrote into virt-api's Secret, in order, and when;
	// at each look, the index (in written) of what each virt-api pod presents.
	type write struct {
		serial string
		at     time.Time
	}
	var written []write
	type look struct {
		at      time.Time
		indexOf map[string]int // pod IP -> index of the presented serial; -1 unknown
	}
	var looks []look
	for i := 0; time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("rotation-%d", i)
		if _, err := vms.Create(ctx, framework.VM(name, "Halted", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			refused++
			if len(refusals) < 5 {
				refusals = append(refusals, fmt.Sprintf("%s: %v", time.Now().Format(time.TimeOnly), err))
			}
		}
		sent++
		if i%4 == 0 {
			if sec, err := env.Kube.CoreV1().Secrets(installNS).Get(ctx, vocab.VirtAPICertSecretName, metav1.GetOptions{}); err == nil {
				if serial := framework.CertSerial(sec.Data["tls.crt"]); serial != "" && (len(written) == 0 || written[len(written)-1].serial != serial) {
					written = append(written, write{serial, time.Now()})
				}
			}
			pods, err := env.Kube.CoreV1().Pods(installNS).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-api"})
			if err == nil {
				l := look{at: time.Now(), indexOf: map[string]int{}}
				for _, p := range pods.Items {
					if p.Status.PodIP == "" || p.DeletionTimestamp != nil || !podReady(&p) {
						continue
					}
					serial := presented(p.Status.PodIP + ":8443")
					l.indexOf[p.Status.PodIP] = slices.IndexFunc(written, func(w write) bool { return w.serial == serial })
				}
				looks = append(looks, l)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("%d VM creates (dry run) through upstream's webhooks while certificates rotated; %d refused", sent, refused)
	if refused > 0 {
		t.Errorf("%d of %d requests refused during rotation, first ones:\n%s", refused, sent, strings.Join(refusals, "\n"))
	}
	if len(written) < 2 {
		t.Fatalf("virt-api's certificate was written %d times in %s: the rotation did not happen", len(written), rotationWindow)
	}
	// A write has reached virt-api at the first look where every ready
	// virt-api pod presents it or a later one; the time it took is its lag.
	// A write not reached by the end is judged only once servedBound has
	// passed since it.
	var worst time.Duration
	judged := 0
	for i, w := range written {
		reached := time.Time{}
		for _, l := range looks {
			if l.at.Before(w.at) || len(l.indexOf) == 0 {
				continue
			}
			all := true
			for _, idx := range l.indexOf {
				all = all && idx >= i
			}
			if all {
				reached = l.at
				break
			}
		}
		switch {
		case !reached.IsZero():
			judged++
			worst = max(worst, reached.Sub(w.at))
		case time.Since(w.at) > servedBound:
			judged++
			t.Errorf("virt-api's pods did not all present certificate %s (or a later one) within %s of its writing", w.serial, servedBound)
		}
	}
	if judged == 0 {
		t.Fatalf("no certificate write could be judged in %s (%d written): the window is too short", rotationWindow, len(written))
	}
	if worst > servedBound {
		t.Errorf("virt-api presented a new certificate %s after its Secret changed; bound %s", worst.Round(time.Second), servedBound)
	}
	t.Logf("MEASURE %s: %d certificates written for virt-api in %s, %d judged; every ready virt-api pod presented each at most %s after it was written (bound %s)",
		rel, len(written), rotationWindow, judged, worst.Round(time.Second), servedBound)
}

// presented is the serial number of the certificate a TLS server at addr
// (a pod on the real node's bridge, reachable from the suite's namespace)
// presents.
func presented(addr string) string {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only reads the certificate
	if err != nil {
		return ""
	}
	defer conn.Close()
	certs := conn.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return ""
	}
	return certs[0].SerialNumber.String()
}
