package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
func NodeImages(release string) ([]string, error) {
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
	for _, comp := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtExportProxy, vocab.VirtSynchronizationController} {
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
func (c *Cluster) ensureRealNode(ctx context.Context, out io.Writer, release string) error {
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
	imgs, err := NodeImages(release)
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
// DaemonSet off nodes through the KubeVirt resource. A placement the
// resource already has is kept.
//
// virt-template (v1.9.0 deploys it by default: its Template gate is Beta)
// is turned off unless the resource says otherwise: its images come from
// another upstream repository, which is not built here.
func placeOnRealNode(kv *kvv1.KubeVirt) {
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
	if kv.Spec.Workloads.NodePlacement == nil {
		kv.Spec.Workloads.NodePlacement = &kvv1.NodePlacement{NodeSelector: map[string]string{"type": "kwok"}}
	}
}

// RealNodePods lists the pods bound to the real node in namespace ns.
func (c *Cluster) RealNodePods(ctx context.Context, cl *Clients, ns string) ([]corev1.Pod, error) {
	l, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + c.RealNodeName()})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
