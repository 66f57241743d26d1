package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/virtop-dev/virtop/internal/tools/realnode"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The operator as users run it: the release manifest (make
// release-manifests: dist/virtop-operator.yaml) applied, its image (make
// image: dist/virtop-image.tar, the OCI layout whose index digest the
// manifest pins) imported into the real node's containerd, so the
// Deployment virt-operator runs unchanged but for its placement.

// PodOperator names the release manifest and the image of an operator run
// as a pod on the real node.
type PodOperator struct {
	// Manifest is the release manifest (dist/virtop-operator.yaml).
	Manifest string
	// Image is the operator's image: an OCI layout tar (make image) or a
	// docker-archive (make node-images-operator).
	Image string
}

// readObjects decodes every object of a YAML stream.
func readObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// manifestImage is the image the manifest's operator Deployment runs.
func manifestImage(path string, objs []*unstructured.Unstructured) (string, error) {
	for _, obj := range objs {
		if obj.GetKind() != "Deployment" || obj.GetName() != vocab.VirtOperator {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if len(containers) > 0 {
			if img, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image"); img != "" {
				return img, nil
			}
		}
		return "", fmt.Errorf("%s: Deployment %s has no container image", path, vocab.VirtOperator)
	}
	return "", fmt.Errorf("%s holds no Deployment %s", path, vocab.VirtOperator)
}

// startOperatorPod imports the operator's image into the real node,
// applies the release manifest, places the Deployment on the real node,
// lets it trust the monitoring namespace `up --prometheus late` creates
// (--prometheus-namespaces, as HostOperatorFlags' operator does), and
// waits for it to be Available.
func (c *Cluster) startOperatorPod(ctx context.Context, out io.Writer, cl *Clients, po PodOperator) error {
	const trust = "--prometheus-namespaces=" + MonitoringNamespace + ",openshift-monitoring"
	return c.runOperatorPod(ctx, out, cl, po.Manifest, po.Image, true, func(c0 map[string]any) {
		args, _, _ := unstructured.NestedStringSlice(c0, "args")
		if !containsPrefix(args, "--prometheus-namespaces") {
			_ = unstructured.SetNestedStringSlice(c0, append(args, trust), "args")
		}
	}, "with "+trust)
}

// StartPodOperator is what `up --operator-manifest` does: virtop's release
// manifest applied (over whatever operator ran before: the Deployment
// virt-operator is replaced in place) and its operator a pod on the real
// node, Available.
func (c *Cluster) StartPodOperator(ctx context.Context, out io.Writer, po PodOperator) error {
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	return c.startOperatorPod(ctx, out, cl, po)
}

// runOperatorPod imports image into the real node (named by the manifest
// when byRef, by itself when it is a docker-archive), applies every object
// of manifest with the Deployment virt-operator placed on the real node
// (and its first container changed by container, if not nil: said by
// what), and waits for the Deployment to be Available.
func (c *Cluster) runOperatorPod(ctx context.Context, out io.Writer, cl *Clients, manifest, image string, byRef bool, container func(map[string]any), what string) error {
	if !c.HasRealNode() {
		return fmt.Errorf("the operator runs as a pod only on the real node: start the cluster with --real-node")
	}
	objs, err := readObjects(manifest)
	if err != nil {
		return err
	}
	ref, err := manifestImage(manifest, objs)
	if err != nil {
		return err
	}
	tools, err := realnode.FindTools()
	if err != nil {
		return err
	}
	t0 := time.Now()
	importRef := ""
	if byRef {
		importRef = ref
	}
	if err := c.RealNode(nil).ImportImage(ctx, tools, image, importRef); err != nil {
		return err
	}
	// The manifest as it is, but for the Deployment's placement (and
	// container), set before it is applied so that no pod of it ever lands
	// on a fake node.
	for _, obj := range objs {
		if obj.GetKind() == "Deployment" && obj.GetName() == vocab.VirtOperator {
			sel, _, _ := unstructured.NestedStringMap(obj.Object, "spec", "template", "spec", "nodeSelector")
			if sel == nil {
				sel = map[string]string{}
			}
			sel[realnode.Label] = "true"
			if err := unstructured.SetNestedStringMap(obj.Object, sel, "spec", "template", "spec", "nodeSelector"); err != nil {
				return err
			}
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			if len(containers) > 0 && container != nil {
				container(containers[0].(map[string]any))
				_ = unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
			}
		}
	}
	for _, obj := range objs {
		if err := apply(ctx, cl, obj, InstallNamespace); err != nil {
			return fmt.Errorf("%s: %w", manifest, err)
		}
	}
	fmt.Fprintf(out, "• Applied the release manifest %s (%d objects), the operator's image %s imported into the real node\n  (Deployment %s placed on the real node%s)\n", manifest, len(objs), ref, vocab.VirtOperator, prefixed(", ", what))
	deploys := cl.Kube.AppsV1().Deployments(InstallNamespace)
	err = poll(ctx, 3*time.Minute, time.Second, func(ctx context.Context) (bool, error) {
		d, err := deploys.Get(ctx, vocab.VirtOperator, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == "True" && d.Status.UpdatedReplicas == d.Status.Replicas {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("Deployment %s is not Available after 3m: see `kubectl -n %s describe deploy %s` and %s", vocab.VirtOperator, InstallNamespace, vocab.VirtOperator, c.RealNode(nil).Log("pods"))
	}
	fmt.Fprintf(out, "• The operator runs as a pod on the real node: Deployment %s Available (%s)\n", vocab.VirtOperator, since(t0))
	return nil
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func containsPrefix(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}
