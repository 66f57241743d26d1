//go:build packaging

package packaging

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func keyOf(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k := keyOf(o)
		if _, dup := out[k]; dup {
			t.Fatalf("%s twice", k)
		}
		out[k] = o
	}
	return out
}

// TestChartMatchesKustomize renders the Helm chart and the kustomize
// configuration for the same settings and finds the same objects.
func TestChartMatchesKustomize(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	kustomize := requireTool(t, toolpaths.Kustomize)
	for _, tc := range []struct {
		name, kustomization, namespace string
		helmArgs                       []string
	}{
		{"default", "config/default", "kubevirt", nil},
		{"custom-namespace", "config/overlays/custom-namespace", "virtop-system", nil},
		{"openshift", "config/overlays/openshift", "kubevirt", []string{"--set", "podSecurityContext.runAsUser=null", "--set", "podSecurityContext.runAsGroup=null",
			"--set-string", `namespace.labels.openshift\.io/cluster-monitoring=true`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := byKey(t, decodeStream(t, run(t, kustomize, "build", tc.kustomization)))
			args := []string{"template", "virtop", "charts/virtop", "--namespace", tc.namespace, "--include-crds",
				"--set", "namespace.create=true", "--set", "image.tag=latest"}
			args = append(args, tc.helmArgs...)
			h := byKey(t, withoutHelmOnly(decodeStream(t, run(t, helm, args...))))
			var keys []string
			for key := range k {
				keys = append(keys, key)
			}
			for key := range h {
				if _, ok := k[key]; !ok {
					keys = append(keys, key)
				}
			}
			sort.Strings(keys)
			for _, key := range keys {
				ko, kok := k[key]
				ho, hok := h[key]
				switch {
				case !kok:
					t.Errorf("%s: only in the Helm chart", key)
				case !hok:
					t.Errorf("%s: only in the kustomize output", key)
				case !reflect.DeepEqual(ko.Object, ho.Object):
					kb, _ := yaml.Marshal(ko.Object)
					hb, _ := yaml.Marshal(ho.Object)
					t.Errorf("%s differs:\n%s", key, lineDiff(string(kb), string(hb)))
				}
			}
			if len(k) < 9 {
				t.Errorf("kustomize rendered %d objects, want at least 9", len(k))
			}
		})
	}
}

// helmOnlyLabels are the labels the chart sets and kustomize does not:
// they name the Helm release.
var helmOnlyLabels = []string{"helm.sh/chart", vocab.AppInstanceLabel, vocab.AppVersionLabel, vocab.ManagedByLabel}

// withoutHelmOnly drops what only a Helm release has: its hooks (the
// uninstall Job and its RBAC), the release's labels (on the objects and
// the pod template) and the keep policy of its CRDs.
func withoutHelmOnly(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
			continue
		}
		strip := func(fields ...string) {
			labels, _, _ := unstructured.NestedStringMap(o.Object, fields...)
			for _, l := range helmOnlyLabels {
				delete(labels, l)
			}
			if labels != nil {
				_ = unstructured.SetNestedStringMap(o.Object, labels, fields...)
			}
		}
		strip("metadata", "labels")
		strip("spec", "template", "metadata", "labels")
		if a := o.GetAnnotations(); a != nil {
			delete(a, "helm.sh/resource-policy")
			if len(a) == 0 {
				a = nil
			}
			o.SetAnnotations(a)
		}
		out = append(out, o)
	}
	return out
}

// lineDiff lists the lines only in a (-) or only in b (+).
func lineDiff(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "- kustomize: "+l)
		case n < 0:
			out = append(out, "+ helm:      "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
