package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/virtop-dev/virtop/internal/tools/realnode"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// VMs on the real node (up --vms): a guest made here from Debian's packages
// (hack/tools/smoke-guest.sh: Debian's cloud kernel and an initramfs with
// busybox), booted by KubeVirt's kernel boot under QEMU's TCG.

// GuestOK is the line the guest prints on its serial console once booted.
const GuestOK = "virtop-guest-ok"

// GuestAlive starts the line the guest prints every 10 seconds while up.
const GuestAlive = "virtop-guest-alive"

// TestVMName is the VM `up --vms` starts (namespace default).
const TestVMName = "testvm"

var (
	// VMGVR and VMIGVR are KubeVirt's VirtualMachine and instance.
	VMGVR  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	VMIGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
)

// Guest is the guest image for kernel boot.
type Guest struct {
	// Archive is its docker-archive tar (imported into the real node).
	Archive string
	// Image is the name the archive gives it.
	Image string
}

// FindGuest finds the newest guest smoke-guest.sh made in the tools cache,
// or says how to make it.
func FindGuest() (Guest, error) {
	dirs, _ := filepath.Glob(filepath.Join(toolpaths.CacheDir(), "kubevirt-node-debian", "guest-*-r*"))
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		name, err := os.ReadFile(filepath.Join(dirs[i], "image-name"))
		archive := filepath.Join(dirs[i], "guest-image.tar")
		if err == nil && fileExists(archive) {
			return Guest{Archive: archive, Image: strings.TrimSpace(string(name))}, nil
		}
	}
	return Guest{}, fmt.Errorf("no guest image for VMs in %s: make it from Debian's packages with hack/tools/smoke-guest.sh (make node-images-vm does)",
		filepath.Join(toolpaths.CacheDir(), "kubevirt-node-debian"))
}

// TestVM is a VirtualMachine of the guest, pinned to the real node: one
// vCPU, 128 MiB, no disk and no network (kernel boot from the guest image,
// its serial console the only way in). The guest stays up (virtop.stay)
// and prints GuestOK once, then GuestAlive every 10 seconds.
func TestVM(namespace, name string, g Guest, runStrategy string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"runStrategy": runStrategy,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"kubevirt.io/vm": name}},
				"spec": map[string]any{
					"nodeSelector":                  map[string]any{realnode.Label: "true"},
					"terminationGracePeriodSeconds": int64(0),
					"domain": map[string]any{
						"cpu":    map[string]any{"cores": int64(1)},
						"memory": map[string]any{"guest": "128Mi"},
						"firmware": map[string]any{"kernelBoot": map[string]any{
							"kernelArgs": "console=ttyS0 virtop.stay panic=-1",
							"container": map[string]any{
								"image":           g.Image,
								"kernelPath":      "/boot/vmlinuz",
								"initrdPath":      "/boot/initrd.img",
								"imagePullPolicy": "IfNotPresent",
							},
						}},
						"devices": map[string]any{"autoattachPodInterface": false},
					},
				},
			},
		},
	}}
}

// VMBoot is what StartTestVM saw.
type VMBoot struct {
	// Node is where the VM runs.
	Node string
	// Running is from the VM's creation to its instance Running.
	Running time.Duration
	// Booted is from the VM's creation to the guest's GuestOK line on its
	// serial console.
	Booted time.Duration
	// Line is that line.
	Line string
}

// StartTestVM creates the VM name in namespace (runStrategy Always) unless
// it exists, and waits up to timeout for its guest's GuestOK line in the
// serial console's log (the launcher pod's guest-console-log container).
func (c *Cluster) StartTestVM(ctx context.Context, cl *Clients, namespace, name string, timeout time.Duration) (VMBoot, error) {
	var b VMBoot
	g, err := FindGuest()
	if err != nil {
		return b, err
	}
	start := time.Now()
	vm := TestVM(namespace, name, g, "Always")
	if _, err := cl.Dynamic.Resource(VMGVR).Namespace(namespace).Create(ctx, vm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return b, fmt.Errorf("creating VirtualMachine %s/%s: %w", namespace, name, err)
	}
	last := "no VirtualMachineInstance yet"
	err = poll(ctx, timeout, time.Second, func(ctx context.Context) (bool, error) {
		vmi, err := cl.Dynamic.Resource(VMIGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		phase, _, _ := unstructured.NestedString(vmi.Object, "status", "phase")
		node, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
		last = "instance " + phase
		if phase != "Running" {
			return false, nil
		}
		if b.Running == 0 {
			b.Running, b.Node = time.Since(start), node
		}
		line, err := c.GuestConsoleLine(ctx, cl, namespace, name, GuestOK)
		if err != nil {
			last = "instance Running; " + err.Error()
			return false, nil
		}
		b.Booted, b.Line = time.Since(start), line
		return true, nil
	})
	if err != nil {
		return b, fmt.Errorf("VM %s/%s: no %q on its serial console within %s (%s)", namespace, name, GuestOK, timeout, last)
	}
	return b, nil
}

// GuestConsoleLine returns the first line holding want in the serial
// console's log of VM name's running instance (KubeVirt's guest-console-log
// container of its launcher pod).
func (c *Cluster) GuestConsoleLine(ctx context.Context, cl *Clients, namespace, name, want string) (string, error) {
	pods, err := cl.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/vm=" + name + ",kubevirt.io=virt-launcher"})
	if err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		raw, err := cl.Kube.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "guest-console-log"}).DoRaw(ctx)
		if err != nil {
			return "", fmt.Errorf("the serial console's log of %s: %w", p.Name, err)
		}
		for _, l := range strings.Split(string(raw), "\n") {
			if strings.Contains(l, want) {
				return strings.TrimSpace(l), nil
			}
		}
		return "", fmt.Errorf("%s's serial console has no %q yet", p.Name, want)
	}
	return "", errors.New("no running launcher pod")
}

// startTestVM is up --vms' last step: the test VM, and how to reach it.
func (c *Cluster) startTestVM(ctx context.Context, out io.Writer, cl *Clients, release string) error {
	fmt.Fprintf(out, "• Starting VirtualMachine default/%s on the real node (kernel boot of a guest made from Debian's packages, QEMU's TCG)\n", TestVMName)
	b, err := c.StartTestVM(ctx, cl, "default", TestVMName, 5*time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "• VM %s runs on %s (Running after %s; its guest said %q after %s)\n", TestVMName, b.Node, b.Running.Round(100*time.Millisecond), b.Line, b.Booted.Round(100*time.Millisecond))
	fmt.Fprintf(out, "  its console: %s console %s   (Ctrl+] leaves it)\n", virtctlHint(release), TestVMName)
	return nil
}

// VirtctlPath is where virtctl built from upstream's source at release is
// (make node-images), built or not.
func VirtctlPath(release string) string {
	return filepath.Join(toolpaths.CacheDir(), "kubevirt-"+release, "bin", "virtctl")
}

// virtctlHint names the virtctl built from upstream's source at release,
// if there is one.
func virtctlHint(release string) string {
	if p := VirtctlPath(release); fileExists(p) {
		return p
	}
	return "virtctl"
}
