// Package vms boots virtual machines on virtop's install: virt-handler and
// virt-launcher, built from upstream's source on Debian's QEMU and libvirt
// (make node-images-vm), run on the local cluster's real node next to the
// control plane, and a guest made here from Debian's packages boots under
// QEMU's TCG (KubeVirt's software emulation). Its serial console is read
// through virtctl console: virt-api's subresource, virt-handler's console
// server, the launcher's socket. The release before the default one is
// installed first, a VM started, and virtop upgrades to the default one
// while it runs.
//
// make test-all only: the node images cost minutes to build and the suite
// about ten to run.
package vms

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainWith(m, framework.Options{Nodes: 1, VMs: true, AllReleasesOnly: true}))
}

const (
	ns       = "default"
	waitLong = 8 * time.Minute
)

// TestVMsAcrossUpgrade: the release before the default one installed with
// VMs on the real node; a VM boots and answers on its console; virtop
// upgrades to the default release while it runs (virt-handler rolled
// through the staged TLS rollout) and it keeps running and answering; a
// new VM boots on the new release, virtctl stops it and its deletion
// leaves nothing on the node; uninstalling is refused while a VM exists,
// and once none does it leaves no KubeVirt pod, mount or cgroup on the
// node.
func TestVMsAcrossUpgrade(t *testing.T) {
	// Minutes of images and five of run: make test-all's, beyond CI's
	// budget.
	if !testreleases.All(t) {
		t.Skipf("%s=default: VMs on the real node boot in make test-all", testreleases.Env)
	}
	env := framework.Require(t)
	from, to := framework.ReleaseBeforeDefault(t)
	ctx := context.Background()
	c := env.Client(t)
	op := env.Operator(t, append(framework.HostOperatorArgs(t), "--leader-elect")...).Start()
	defer func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", op.Log())
		}
	}()

	start := time.Now()
	env.UpAt(t, devcluster.ClusterOptions{VMs: true}, from)
	framework.WaitKubeVirt(t, c, "Available at "+from, waitLong, framework.RolledOutAt(from))
	t.Logf("MEASURE install of %s with VMs on the real node to Available: %s", from, time.Since(start).Round(100*time.Millisecond))

	t.Run("virt-handler runs on the real node, labels it schedulable, registers its devices", func(t *testing.T) {
		checkHandlerOnRealNode(t, env, from)
	})
	// up --vms started testvm; it is the VM that lives through the upgrade.
	var before devcluster.VMBoot
	t.Run("the VM up started boots; its console answers through virtctl", func(t *testing.T) {
		b, err := env.Cluster.StartTestVM(ctx, env.Clients, ns, devcluster.TestVMName, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		before = b
		t.Logf("MEASURE VM %s at %s: on %s, Running %s after creation, guest line %q %s after creation",
			devcluster.TestVMName, from, b.Node, b.Running.Round(100*time.Millisecond), b.Line, b.Booted.Round(100*time.Millisecond))
		if b.Node != env.Cluster.RealNodeName() {
			t.Errorf("the VM runs on %q, want the real node %s", b.Node, env.Cluster.RealNodeName())
		}
		checkConsole(t, env, from, devcluster.TestVMName)
	})
	if t.Failed() {
		return
	}

	t.Run("upgrade "+from+" -> "+to+" with the VM running", func(t *testing.T) {
		checkUpgradeKeepsVM(t, env, c, from, to)
	})
	if t.Failed() {
		return
	}

	t.Run("a new VM boots at "+to+"; virtctl stops it; deleted, it leaves nothing on the node", func(t *testing.T) {
		b, err := env.Cluster.StartTestVM(ctx, env.Clients, ns, "after", 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("MEASURE VM after at %s: Running %s after creation, guest line %q %s after creation (the first VM: %s)",
			to, b.Running.Round(100*time.Millisecond), b.Line, b.Booted.Round(100*time.Millisecond), before.Booted.Round(100*time.Millisecond))
		checkConsole(t, env, to, "after")
		uid := launcherPodUID(t, env, "after")
		virtctlRun(t, env, to, "stop", "after")
		poll.Eventually(t, "VM after Stopped: no instance, no launcher pod", 3*time.Minute, func(ctx context.Context) (bool, error) {
			if _, err := env.Clients.Dynamic.Resource(devcluster.VMIGVR).Namespace(ns).Get(ctx, "after", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("its instance is still there (%v)", err)
			}
			vm, err := env.Clients.Dynamic.Resource(devcluster.VMGVR).Namespace(ns).Get(ctx, "after", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			st, _, _ := unstructured.NestedString(vm.Object, "status", "printableStatus")
			return st == "Stopped", fmt.Errorf("printableStatus %q", st)
		})
		if err := env.Clients.Dynamic.Resource(devcluster.VMGVR).Namespace(ns).Delete(ctx, "after", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		checkNothingLeft(t, env, uid)
	})

	t.Run("uninstall is refused while a VM runs, and leaves nothing on the node once it is gone", func(t *testing.T) {
		checkUninstall(t, env, c, launcherPodUID(t, env, devcluster.TestVMName))
	})
}

func checkHandlerOnRealNode(t *testing.T, env *framework.Env, rel string) {
	real := env.Cluster.RealNodeName()
	poll.Eventually(t, "virt-handler Ready on the real node, the node schedulable with KubeVirt's devices", 5*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(devcluster.InstallNamespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-handler", FieldSelector: "spec.nodeName=" + real})
		if err != nil {
			return false, err
		}
		if len(pods.Items) != 1 || !ready(&pods.Items[0]) {
			return false, fmt.Errorf("%d virt-handler pods on the real node, ready: %v", len(pods.Items), len(pods.Items) == 1 && ready(&pods.Items[0]))
		}
		if img := pods.Items[0].Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+rel) {
			return false, fmt.Errorf("virt-handler's image %s, want %s's", img, rel)
		}
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, real, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if node.Labels["kubevirt.io/schedulable"] != "true" {
			return false, fmt.Errorf("the real node is not labelled kubevirt.io/schedulable=true: %q", node.Labels["kubevirt.io/schedulable"])
		}
		tun := node.Status.Allocatable["devices.kubevirt.io/tun"]
		if tun.IsZero() {
			return false, fmt.Errorf("the real node offers no devices.kubevirt.io/tun (allocatable %v)", node.Status.Allocatable)
		}
		return true, nil
	})
}

// checkConsole types a command on the VM's serial console through virtctl
// console (in a pseudo-terminal: virtctl wants one) and waits for its
// answer and for a line the guest printed by itself.
func checkConsole(t *testing.T, env *framework.Env, rel, vm string) {
	nonce := fmt.Sprintf("%d", time.Now().UnixNano()%1000000)
	got := consoleSession(t, env, rel, vm, fmt.Sprintf("echo virtop-console-$((%s+1))", nonce), 20*time.Second)
	var want int
	fmt.Sscan(nonce, &want)
	answer := fmt.Sprintf("virtop-console-%d", want+1)
	if !strings.Contains(got, answer) {
		t.Errorf("virtctl console %s: no %q (the guest's shell evaluating what was typed) in:\n%s", vm, answer, got)
	}
	if !strings.Contains(got, devcluster.GuestAlive) {
		t.Errorf("virtctl console %s: no %q line of the guest's in:\n%s", vm, devcluster.GuestAlive, got)
	}
	if !t.Failed() {
		t.Logf("virtctl console %s answered %s", vm, answer)
	}
}

// consoleSession runs virtctl console for d, typing line after 3 seconds,
// and returns what it printed.
func consoleSession(t *testing.T, env *framework.Env, rel, vm, line string, d time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	inner := fmt.Sprintf("%s console %s --kubeconfig %s", framework.Virtctl(t, rel), vm, env.Cluster.Kubeconfig())
	cmd := exec.CommandContext(ctx, "script", "-qfec", inner, "/dev/null")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatalf("virtctl console through script(1): %v", err)
	}
	go func() {
		time.Sleep(3 * time.Second)
		_, _ = io.WriteString(stdin, line+"\r")
		// The guest prints an alive line every 10 seconds.
		time.Sleep(d)
	}()
	_ = cmd.Wait()
	return strings.ReplaceAll(buf.String(), "\r", "")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func virtctlRun(t *testing.T, env *framework.Env, rel string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := exec.CommandContext(ctx, framework.Virtctl(t, rel), append(args, "--kubeconfig", env.Cluster.Kubeconfig())...).CombinedOutput()
	if err != nil {
		t.Fatalf("virtctl %s: %v: %s", strings.Join(args, " "), err, raw)
	}
	t.Logf("virtctl %s: %s", strings.Join(args, " "), strings.TrimSpace(string(raw)))
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func launcherPodUID(t *testing.T, env *framework.Env, vm string) string {
	pods, err := env.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher,kubevirt.io/vm=" + vm})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d launcher pods of VM %s, want 1", len(pods.Items), vm)
	}
	return string(pods.Items[0].UID)
}

// checkNothingLeft waits until the pod with uid is gone from the API and
// from the node: no directory, mount, cgroup or process of it.
func checkNothingLeft(t *testing.T, env *framework.Env, uid string) {
	node := env.Cluster.RealNode(nil)
	poll.Eventually(t, "nothing left of pod "+uid+" on the real node", 3*time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if string(p.UID) == uid {
				return false, fmt.Errorf("pod %s still exists", p.Name)
			}
		}
		left, err := node.Leftovers(uid)
		if err != nil {
			return false, err
		}
		if len(left) > 0 {
			return false, fmt.Errorf("on the node: %s", strings.Join(left, "; "))
		}
		return true, nil
	})
}

// checkUpgradeKeepsVM upgrades with testvm running, watching it every
// second: its instance stays Running with the same UID on the same pod.
func checkUpgradeKeepsVM(t *testing.T, env *framework.Env, c client.Client, from, to string) {
	ctx := context.Background()
	if err := env.Cluster.LoadReleaseImages(ctx, to); err != nil {
		t.Fatal(err)
	}
	vmis := env.Clients.Dynamic.Resource(devcluster.VMIGVR).Namespace(ns)
	vmi, err := vmis.Get(ctx, devcluster.TestVMName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vmiUID := vmi.GetUID()
	launcher := launcherPodUID(t, env, devcluster.TestVMName)
	handlersBefore := handlerPods(t, env)

	// The watcher: every second, the instance's phase and identity.
	var mu sync.Mutex
	var breaks []string
	samples := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			v, err := vmis.Get(ctx, devcluster.TestVMName, metav1.GetOptions{})
			mu.Lock()
			samples++
			switch {
			case err != nil:
				breaks = append(breaks, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05"), err))
			case v.GetUID() != vmiUID:
				breaks = append(breaks, fmt.Sprintf("%s: another instance %s", time.Now().Format("15:04:05"), v.GetUID()))
			default:
				if ph, _, _ := unstructured.NestedString(v.Object, "status", "phase"); ph != "Running" {
					breaks = append(breaks, fmt.Sprintf("%s: phase %s", time.Now().Format("15:04:05"), ph))
				}
			}
			mu.Unlock()
		}
	}()

	start := time.Now()
	framework.SetImageTag(t, c, to)
	framework.WaitKubeVirt(t, c, "Available at "+to, waitLong, framework.RolledOutAt(to))
	took := time.Since(start)
	// virt-handler's staged TLS rollout: Available comes with the last
	// step rolled out; the handler must then serve the VM.
	checkHandlerOnRealNode(t, env, to)
	close(stop)
	<-done

	handlersAfter := handlerPods(t, env)
	for name, uid := range handlersBefore {
		if handlersAfter[name] == uid {
			t.Errorf("virt-handler pod %s was not replaced by the upgrade", name)
		}
	}
	mu.Lock()
	t.Logf("MEASURE upgrade %s -> %s with a running VM: Available after %s; the VM's instance sampled %d times, %d not Running; virt-handler pods before %v, after %v",
		from, to, took.Round(100*time.Millisecond), samples, len(breaks), handlersBefore, handlersAfter)
	if len(breaks) > 0 {
		t.Errorf("the VM's instance did not stay Running through the upgrade:\n%s", strings.Join(breaks, "\n"))
	}
	mu.Unlock()
	if got := launcherPodUID(t, env, devcluster.TestVMName); got != launcher {
		t.Errorf("the VM's launcher pod changed during the upgrade: %s -> %s", launcher, got)
	}
	ds, err := env.Kube.AppsV1().DaemonSets(devcluster.InstallNamespace).Get(ctx, vocab.VirtHandler, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	t.Logf("virt-handler after the upgrade: image %s, args %s", ds.Spec.Template.Spec.Containers[0].Image, args)
	// The new virt-handler serves the old launcher: its console still
	// answers.
	checkConsole(t, env, to, devcluster.TestVMName)
}

// handlerPods maps each virt-handler pod's node to the pod's UID.
func handlerPods(t *testing.T, env *framework.Env) map[string]string {
	pods, err := env.Kube.CoreV1().Pods(devcluster.InstallNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: "kubevirt.io=virt-handler"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = string(p.UID)
		}
	}
	return out
}

func checkUninstall(t *testing.T, env *framework.Env, c client.Client, launcherUID string) {
	ctx := context.Background()
	// The checks of an empty node below must see the pods that run now.
	if left, err := env.Cluster.RealNode(nil).PodsLeft(); err != nil || len(left) == 0 {
		t.Fatalf("with KubeVirt and a VM running, PodsLeft found %v (%v): it could not see what is left after the uninstall", left, err)
	} else {
		kinds := map[string]int{}
		for _, l := range left {
			kinds[strings.SplitN(l, " ", 2)[0]]++
		}
		t.Logf("before the uninstall the node holds, of its pods: %v", kinds)
		if kinds["network"] == 0 {
			t.Errorf("PodsLeft saw no pod's network namespace while pods run: %v", left)
		}
	}
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	// Refused at admission (virtop's webhook, uninstallStrategy
	// BlockUninstallIfWorkloadsExist by default): the resource stays and
	// the VM keeps running.
	err := c.Delete(ctx, kv)
	if err == nil || !strings.Contains(err.Error(), "cannot be deleted while workloads exist") {
		t.Fatalf("deleting KubeVirt with a VM running: %v, want a refusal naming the workloads", err)
	}
	t.Logf("refused: %v", err)
	time.Sleep(10 * time.Second)
	if line, err := env.Cluster.GuestConsoleLine(ctx, env.Clients, ns, devcluster.TestVMName, devcluster.GuestOK); err != nil {
		t.Errorf("the VM after the refused uninstall: %v", err)
	} else if pods := handlerPods(t, env); pods[env.Cluster.RealNodeName()] == "" {
		t.Errorf("virt-handler left the real node while the uninstall was refused")
	} else {
		t.Logf("the VM still runs while the uninstall waits (%q)", line)
	}

	if err := env.Clients.Dynamic.Resource(devcluster.VMGVR).Namespace(ns).Delete(ctx, devcluster.TestVMName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkNothingLeft(t, env, launcherUID)
	poll.Eventually(t, "the VM and its instance gone, KubeVirt's deletion accepted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
			return apierrors.IsNotFound(err), err
		}
		if err := c.Delete(ctx, kv); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return true, nil
	})
	poll.Eventually(t, "KubeVirt uninstalled: the resource gone, no KubeVirt pod", 5*time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, framework.KubeVirtKey, &kvv1.KubeVirt{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("the KubeVirt resource is still there (%v)", err)
		}
		pods, err := env.Kube.CoreV1().Pods(devcluster.InstallNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		var left []string
		for _, p := range pods.Items {
			if p.Labels["kubevirt.io"] != "" {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Errorf("KubeVirt pods left: %v", left)
	})
	// The node: no mount of KubeVirt's, no container, no cgroup of a pod
	// that is gone.
	node := env.Cluster.RealNode(nil)
	poll.Eventually(t, "no KubeVirt mount left in the node's mount namespace", 2*time.Minute, func(ctx context.Context) (bool, error) {
		mounts, err := node.MountsInNode()
		if err != nil {
			return false, err
		}
		var left []string
		for _, m := range mounts {
			if strings.Contains(m, "kubevirt") {
				left = append(left, m)
			}
		}
		return len(left) == 0, fmt.Errorf("%s", strings.Join(left, "; "))
	})
	poll.Eventually(t, "no pod's directory, cgroup or network namespace left on the node", 2*time.Minute, func(ctx context.Context) (bool, error) {
		left, err := node.PodsLeft()
		if err != nil {
			return false, err
		}
		return len(left) == 0, fmt.Errorf("%s", strings.Join(left, "; "))
	})
	// What upstream's virt-handler leaves in its host directories (it
	// removes none of it when it stops): the uninstall's cleanup Job on the
	// node removed it, said so in an event, and took the node's heartbeat
	// off.
	var left []string
	for _, d := range []string{"/var/run/kubevirt", "/var/run/kubevirt-private", "/var/run/kubevirt-libvirt-runtimes", "/var/lib/kubevirt-node-labeller", "/var/lib/kubelet/device-plugins"} {
		_ = filepath.WalkDir(node.PathOnNode(d), func(p string, e os.DirEntry, err error) error {
			rel := d + strings.TrimPrefix(p, node.PathOnNode(d))
			switch {
			case err != nil:
			case d == "/var/lib/kubelet/device-plugins":
				// The kubelet's own directory: only KubeVirt's sockets.
				if strings.HasPrefix(e.Name(), "kubevirt-") {
					left = append(left, rel)
				}
			default:
				left = append(left, rel)
			}
			return nil
		})
	}
	if len(left) > 0 {
		t.Errorf("left on the node by KubeVirt after the uninstall: %v", left)
	}
	var events eventsv1.EventList
	if err := c.List(ctx, &events, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, e := range events.Items {
		if strings.HasPrefix(e.Reason, "Node") && e.Regarding.Kind == "KubeVirt" {
			said = append(said, e.Type+" "+e.Reason+": "+e.Note)
		}
	}
	if want := "Normal NodeCleaned: Node " + env.Cluster.RealNodeName() + ": removed "; len(said) != 1 || !strings.HasPrefix(said[0], want) {
		t.Errorf("the uninstall's node events: %q, want one starting %q", said, want)
	} else {
		t.Logf("the uninstall said: %s", said[0])
	}
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: env.Cluster.RealNodeName()}, n); err != nil {
		t.Fatal(err)
	} else if _, ok := n.Annotations["kubevirt.io/heartbeat"]; ok {
		t.Errorf("the real node still carries virt-handler's heartbeat annotation after the uninstall")
	}
}
