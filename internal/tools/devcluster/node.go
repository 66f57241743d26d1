package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/realnode"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The real node: kubelet, kube-proxy and containerd in the cluster's network
// namespace (internal/tools/realnode), where KubeVirt's control plane runs as
// real containers from images built from upstream's source
// (hack/tools/kubevirt.sh). kwok's fake nodes keep virt-handler and any
// number of nodes for scale.

// VirtLauncher is the image virt-controller gives VMs' pods (it is no
// component the operator deploys, so vocab has no name for it).
const VirtLauncher = "virt-launcher"

// ImagesEnv names a directory of docker-archive tars that replaces the
// tools cache's kubevirt-<release>/images/ for the real node.
const ImagesEnv = "VIRTOP_KUBEVIRT_IMAGES"

// RealNodeName is the real node's Node name.
func (c *Cluster) RealNodeName() string { return c.Name + "-real" }

// NodeDir is where the real node keeps everything it owns.
func (c *Cluster) NodeDir() string { return filepath.Join(c.StateDir, "node") }

// HasRealNode reports whether the cluster has a real node (running or not).
func (c *Cluster) HasRealNode() bool { return fileExists(c.NodeDir()) }

// RealNode is the cluster's real node, with the images to load for release.
func (c *Cluster) RealNode(images []string) *realnode.Node {
	return &realnode.Node{
		Name:       c.RealNodeName(),
		Dir:        c.NodeDir(),
		NS:         c.Netns(),
		PodCIDR:    c.NodePodCIDR(),
		Kubeconfig: filepath.Join(c.KwokClusterDir(), "kubeconfig.yaml"),
		ClientCA:   c.pki("ca.crt"),
		Images:     images,
		Labels:     map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
	}
}

// NodeImages lists the image tars the real node loads for release: the
// sandbox image and KubeVirt's images built from upstream's source at that
// release (or those in $VIRTOP_KUBEVIRT_IMAGES), or an error saying how to
// build them.
func NodeImages(release string, vms bool) ([]string, error) {
	pause := filepath.Join(toolpaths.CacheDir(), "node-images", "pause.tar")
	dir := os.Getenv(ImagesEnv)
	if dir == "" {
		dir = filepath.Join(toolpaths.CacheDir(), "kubevirt-"+release, "images")
	}
	var missing []string
	if !fileExists(pause) {
		missing = append(missing, pause)
	}
	var imgs []string
	comps := []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtExportProxy, vocab.VirtSynchronizationController}
	if vms {
		comps = append(comps, vocab.VirtHandler, VirtLauncher)
	}
	for _, comp := range comps {
		p := filepath.Join(dir, comp+".tar")
		switch {
		case fileExists(p):
			imgs = append(imgs, p)
		case comp == vocab.VirtSynchronizationController && release < "v1.6":
			// Before v1.6 KubeVirt has no synchronization controller.
		default:
			missing = append(missing, p)
		}
	}
	nodeOnly := len(missing) > 0
	for _, m := range missing {
		if b := filepath.Base(m); b != vocab.VirtHandler+".tar" && b != VirtLauncher+".tar" {
			nodeOnly = false
		}
	}
	if nodeOnly {
		return nil, fmt.Errorf("a real node that runs VMs needs KubeVirt %s's virt-handler and virt-launcher images, which are not built:\n  %s\n"+
			"Build them from upstream's source on Debian's QEMU and libvirt (root, Debian's mirror, several minutes): make node-images-vm KUBEVIRT_RELEASE=%s\n"+
			"or point %s at a directory of docker-archive tars, or start the cluster without --vms",
			release, strings.Join(missing, "\n  "), release, ImagesEnv)
	}
	if vms && len(missing) == 0 {
		g, err := FindGuest()
		if err != nil {
			return nil, err
		}
		imgs = append(imgs, g.Archive)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the real node needs KubeVirt %s's images, which are not built:\n  %s\n"+
			"Build them from upstream's source (../shared/upstream-src, offline): make node-images KUBEVIRT_RELEASE=%s\n"+
			"or point %s at a directory of docker-archive tars, or start the cluster with --real-node=false",
			release, strings.Join(missing, "\n  "), release, ImagesEnv)
	}
	return append([]string{pause}, imgs...), nil
}

// ensureRealNode starts the real node if it is not running, or gives the
// running one release's images (another release may be installed next),
// and waits for its Node to be Ready.
func (c *Cluster) ensureRealNode(ctx context.Context, out io.Writer, release string, vms bool) error {
	if vms && !c.RunsVMs() {
		if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(c.vmsMarker(), []byte("virt-handler and VMs on the real node (virtop up --vms)\n"), 0o644); err != nil {
			return err
		}
	}
	n, tools, err := c.releaseNode(release)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if !n.Running() {
		fmt.Fprintf(out, "• Starting the real node %s (containerd, kubelet, kube-proxy in network namespace %s; pods on %s)\n", n.Name, n.NS.Name, n.PodCIDR)
		if err := n.Start(ctx, out, tools); err != nil {
			return err
		}
	} else {
		if err := n.ImportImages(ctx, tools); err != nil {
			return err
		}
		fmt.Fprintf(out, "• The real node %s runs; imported %s's %d images\n", n.Name, release, len(n.Images))
	}
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	err = poll(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		node, err := cl.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return nodeReady(node), nil
	})
	if err != nil {
		return fmt.Errorf("the real node %s is not Ready after 3m; the end of %s:\n%s", n.Name, n.Log("kubelet"), proc.Tail(n.Log("kubelet"), 20))
	}
	fmt.Fprintf(out, "• The real node %s is Ready (%s)\n", n.Name, since(t0))
	return nil
}

// LoadReleaseImages imports release's images into the running real node,
// as a registry would serve them to it (an upgrade's next release).
func (c *Cluster) LoadReleaseImages(ctx context.Context, release string) error {
	n, tools, err := c.releaseNode(release)
	if err != nil {
		return err
	}
	return n.ImportImages(ctx, tools)
}

// releaseNode is the real node with release's images, and its tools.
func (c *Cluster) releaseNode(release string) (*realnode.Node, realnode.Tools, error) {
	tools, err := realnode.FindTools()
	if err != nil {
		return nil, tools, err
	}
	imgs, err := NodeImages(release, c.RunsVMs())
	if err != nil {
		return nil, tools, err
	}
	return c.RealNode(imgs), tools, nil
}

// stopRealNode stops the real node and removes what it owns.
func (c *Cluster) stopRealNode(ctx context.Context) error {
	if !c.HasRealNode() {
		return nil
	}
	tools, _ := realnode.FindTools()
	return c.RealNode(nil).Stop(ctx, tools)
}

// placeOnRealNode places KubeVirt's control plane (infra) on the real node
// and virt-handler (workloads) on kwok's fake nodes, the way a user keeps a
// DaemonSet off nodes through the KubeVirt resource; with vms, virt-handler
// goes on every node and software emulation is turned on. A placement the
// resource already has is kept.
//
// virt-template (v1.9.0 deploys it by default: its Template gate is Beta)
// is turned off unless the resource says otherwise: its images come from
// another upstream repository, which is not built here.
func placeOnRealNode(kv *kvv1.KubeVirt, vms bool) {
	if vms {
		// virt-handler on every node (the real one runs VMs), and QEMU's
		// software emulation: this machine has no /dev/kvm to give it.
		if kv.Spec.Configuration.DeveloperConfiguration == nil {
			kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{}
		}
		dc := kv.Spec.Configuration.DeveloperConfiguration
		dc.UseEmulation = true
		// KubeVirt's ImageVolume gate (Beta since v1.8: on unless turned
		// off) makes a VM's pod mount its container disk or kernel as a
		// Kubernetes image volume, which the node's containerd (Debian's
		// 1.6) cannot mount: it fails the pod with `failed to mkdir ""`.
		// Off, virt-controller uses its container-disk containers.
		if !slices.Contains(dc.FeatureGates, imageVolumeGate) && !slices.Contains(dc.DisabledFeatureGates, imageVolumeGate) {
			dc.DisabledFeatureGates = append(dc.DisabledFeatureGates, imageVolumeGate)
		}
		if kv.Spec.Workloads == nil {
			kv.Spec.Workloads = &kvv1.ComponentConfig{}
		}
	}
	if kv.Spec.Configuration.VirtTemplateDeployment == nil {
		kv.Spec.Configuration.VirtTemplateDeployment = &kvv1.VirtTemplateDeployment{Enabled: ptr.To(false)}
	}
	if kv.Spec.Infra == nil {
		kv.Spec.Infra = &kvv1.ComponentConfig{}
	}
	if kv.Spec.Infra.NodePlacement == nil {
		kv.Spec.Infra.NodePlacement = &kvv1.NodePlacement{NodeSelector: map[string]string{realnode.Label: "true"}}
	}
	if kv.Spec.Workloads == nil {
		kv.Spec.Workloads = &kvv1.ComponentConfig{}
	}
	if kv.Spec.Workloads.NodePlacement == nil && !vms {
		kv.Spec.Workloads.NodePlacement = &kvv1.NodePlacement{NodeSelector: map[string]string{"type": "kwok"}}
	}
}

// imageVolumeGate is KubeVirt's feature gate for image volumes.
const imageVolumeGate = "ImageVolume"

// placement is where the local cluster puts KubeVirt.
type placement int

const (
	// placeFake: every pod faked by kwok; webhooks patched to Ignore.
	placeFake placement = iota
	// placeRealNode: the control plane on the real node, virt-handler faked.
	placeRealNode
	// placeVMs: virt-handler on the real node too, VMs under emulation.
	placeVMs
)

func (c *Cluster) placement(o ClusterOptions) placement {
	switch {
	case o.VMs:
		return placeVMs
	case o.RealNode:
		return placeRealNode
	}
	return placeFake
}

// vmsMarker records that the cluster's real node runs VMs (up --vms): a
// later release's images include virt-handler's and virt-launcher's.
func (c *Cluster) vmsMarker() string { return filepath.Join(c.StateDir, "vms") }

// RunsVMs reports whether the cluster's real node runs virt-handler and VMs.
func (c *Cluster) RunsVMs() bool { return fileExists(c.vmsMarker()) }

// RealNodePods lists the pods bound to the real node in namespace ns.
func (c *Cluster) RealNodePods(ctx context.Context, cl *Clients, ns string) ([]corev1.Pod, error) {
	l, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.RealNodeName()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
