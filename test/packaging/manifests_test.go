//go:build packaging

package packaging

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// TestReleaseManifestsApplyTwice applies what `make release-manifests`
// writes with `kubectl apply --server-side` (strict server-side field
// validation), then the KubeVirt resource, then both again: the second
// apply changes nothing.
func TestReleaseManifestsApplyTwice(t *testing.T) {
	env := testenv.Get(t)
	kustomize := requireTool(t, toolpaths.Kustomize)
	kubectl, err := toolpaths.Kubectl.Require()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	operatorYAML := filepath.Join(dir, "virtop-operator.yaml")
	if err := os.WriteFile(operatorYAML, run(t, kustomize, "build", "config/default"), 0o644); err != nil {
		t.Fatal(err)
	}
	crYAML := filepath.Join(repoRoot(t), "config", "samples", "kubevirt-cr.yaml")
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	apply := func(file string) string {
		cmd := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "--server-side", "--field-manager", "kubectl", "--validate=strict", "-f", file)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl apply --server-side -f %s: %v\n%s", filepath.Base(file), err, out)
		}
		return string(out)
	}
	apply(operatorYAML)
	apply(crYAML)
	objs := decodeStream(t, append(append(run(t, "cat", operatorYAML), []byte("\n---\n")...), run(t, "cat", crYAML)...))
	before := versions(t, env.Client, objs)
	apply(operatorYAML)
	apply(crYAML)
	after := versions(t, env.Client, objs)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed on the second apply (resourceVersion %s -> %s)", k, v, after[k])
		}
	}
	// Leave nothing cluster-wide that other tests could trip on.
	t.Cleanup(func() {
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
				continue
			}
			_ = env.Client.Delete(context.Background(), o)
		}
	})
}

func versions(t *testing.T, c client.Client, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out[strings.Join([]string{o.GetKind(), o.GetNamespace(), o.GetName()}, "/")] = live.GetResourceVersion()
	}
	return out
}
