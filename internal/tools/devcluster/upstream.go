package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Upstream's own operator on the real node: KubeVirt installed the way a
// user of upstream installs it, from the release's kubevirt-operator.yaml
// and kubevirt-cr.yaml. Both are written by upstream's manifest-templator,
// built from upstream's source by hack/tools/kubevirt.sh, and the
// virt-operator image is the one built there too. This is what virtop
// takes over (docs/migrate.md); no podless patch is applied.

// UpstreamManifests are upstream's release manifests for release, as
// hack/tools/kubevirt.sh writes them into the tools cache.
type UpstreamManifests struct {
	// Operator is kubevirt-operator.yaml: namespace, CRD, RBAC, the
	// Deployment virt-operator.
	Operator string
	// KubeVirt is kubevirt-cr.yaml: the KubeVirt resource.
	KubeVirt string
	// Image is the virt-operator image (a docker-archive naming itself).
	Image string
}

// FindUpstreamManifests returns upstream's release manifests and operator
// image for release, or an error saying how to make them.
func FindUpstreamManifests(release string) (UpstreamManifests, error) {
	dir := filepath.Join(toolpaths.CacheDir(), "kubevirt-"+release)
	m := UpstreamManifests{
		Operator: filepath.Join(dir, "manifests", "kubevirt-operator.yaml"),
		KubeVirt: filepath.Join(dir, "manifests", "kubevirt-cr.yaml"),
		Image:    filepath.Join(dir, "images", "virt-operator.tar"),
	}
	for _, p := range []string{m.Operator, m.KubeVirt, m.Image} {
		if !fileExists(p) {
			return m, fmt.Errorf("upstream's operator of KubeVirt %s is not built (%s is missing): make node-images-upstream KUBEVIRT_RELEASE=%s (hack/tools/kubevirt.sh, from upstream's source, offline)", release, p, release)
		}
	}
	return m, nil
}

// controlPlaneRole is the label kubeadm gives a control-plane node;
// upstream's virt-operator Deployment requires a node with it.
const controlPlaneRole = "node-role.kubernetes.io/control-plane"

// StartUpstreamOperator applies upstream's kubevirt-operator.yaml of
// release as a user does, with the Deployment virt-operator placed on the
// real node (its nodeSelector, as for virtop's), the virt-operator image
// imported into the real node, and waits for it to be Available. The real
// node is labelled a control-plane node first: upstream's Deployment
// requires one. Applied again later (a hand back), the manifest replaces
// whatever Deployment virt-operator runs.
func (c *Cluster) StartUpstreamOperator(ctx context.Context, out io.Writer, release string) error {
	m, err := FindUpstreamManifests(release)
	if err != nil {
		return err
	}
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, controlPlaneRole))
	if _, err := cl.Kube.CoreV1().Nodes().Patch(ctx, c.RealNodeName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: vocab.UpFieldManager}); err != nil {
		return fmt.Errorf("labelling the real node %s: %w", controlPlaneRole, err)
	}
	return c.runOperatorPod(ctx, out, cl, m.Operator, m.Image, false, nil, "upstream's virt-operator "+release)
}

// ApplyUpstreamKubeVirt applies upstream's kubevirt-cr.yaml of release with
// the placement of the real node (placeOnRealNode: the control plane on the
// real node, virt-handler on the fake ones, virt-template off) and nothing
// else: no imageTag, no webhook patch.
func (c *Cluster) ApplyUpstreamKubeVirt(ctx context.Context, out io.Writer, release string) error {
	return c.ApplyUpstreamKubeVirtAt(ctx, out, release, "")
}

// ApplyUpstreamKubeVirtAt is ApplyUpstreamKubeVirt with spec.imageTag set
// to imageTag when it is not empty: the same resource, pinned to a release
// (how virtop is told which release to install).
func (c *Cluster) ApplyUpstreamKubeVirtAt(ctx context.Context, out io.Writer, release, imageTag string) error {
	m, err := FindUpstreamManifests(release)
	if err != nil {
		return err
	}
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(m.KubeVirt)
	if err != nil {
		return err
	}
	t0 := time.Now()
	kv, _, err := applySample(ctx, cl, raw, m.KubeVirt, imageTag, c.placement(ClusterOptions{RealNode: true, VMs: c.RunsVMs()}))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "• Applied upstream's KubeVirt %s/%s (%s), the control plane placed on the real node, virt-handler on the fake nodes (%s)\n",
		kv.GetNamespace(), kv.GetName(), m.KubeVirt, since(t0))
	return nil
}

// DeleteManifest deletes every object of a manifest, in reverse order,
// those already gone included; it does not wait for them to go. It returns
// how many delete requests were accepted.
func (c *Cluster) DeleteManifest(ctx context.Context, path string) (int, error) {
	cl, err := c.Clients()
	if err != nil {
		return 0, err
	}
	objs, err := readObjects(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		gvk := obj.GroupVersionKind()
		mapping, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // its CRD went first
		}
		if err != nil {
			return n, fmt.Errorf("%s: %s %s: %w", path, gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = cl.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = InstallNamespace
			}
			ri = cl.Dynamic.Resource(mapping.Resource).Namespace(ns)
		}
		switch err := ri.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return n, fmt.Errorf("%s: deleting %s %s: %w", path, gvk.Kind, obj.GetName(), err)
		default:
			n++
		}
	}
	return n, nil
}
