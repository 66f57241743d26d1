package strategy

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenName is the file of one object: <kind>_<namespace>_<name>.yaml.
func goldenName(o interface{ GetName() string }, kind, ns string) string {
	name := strings.NewReplacer(":", "_", "/", "_").Replace(o.GetName())
	if ns == "" {
		ns = "cluster"
	}
	return fmt.Sprintf("%s_%s_%s.yaml", strings.ToLower(kind), ns, name)
}

// TestGolden guards every object of the default version's strategy (the
// catalog default, for the minimal KubeVirt resource) against unintended
// change: one file per object under testdata/<version>/. Regenerate with
// `go test ./internal/strategy -update`.
func TestGolden(t *testing.T) {
	s := generateFor(t, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "" })
	if s.Version != release.Default {
		t.Fatalf("rendered %s, the default is %s", s.Version, release.Default)
	}
	dir := filepath.Join("testdata", release.Default)
	want := map[string]bool{}
	for _, o := range s.Objects {
		b, err := EncodeObject(o)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, goldenName(o, Kind(o), o.GetNamespace()))
		want[filepath.Base(file)] = true
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		golden, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no golden file (run with -update): %v", KeyOf(o), err)
			continue
		}
		if !bytes.Equal(golden, b) {
			t.Errorf("%s differs from %s (run with -update if the change is intended)", KeyOf(o), file)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if *update {
				_ = os.Remove(filepath.Join(dir, e.Name()))
				continue
			}
			t.Errorf("golden file %s has no object any more (run with -update)", e.Name())
		}
	}
}

func TestDeterministic(t *testing.T) {
	mutate := func(kv *kvv1.KubeVirt) {
		withFeatureGates("VMExport", "Snapshot")(kv)
		kv.Spec.Infra = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{
			NodeSelector: map[string]string{"a": "1", "b": "2", "c": "3"},
			Tolerations:  []corev1.Toleration{{Key: "x", Operator: corev1.TolerationOpExists}, {Key: "y", Operator: corev1.TolerationOpExists}},
		}}
	}
	var first []byte
	for i := 0; i < 5; i++ {
		s := generateFor(t, mutate)
		cm, err := s.ConfigMap("kubevirt")
		if err != nil {
			t.Fatal(err)
		}
		b := []byte(cm.Data[vocab.ManifestsKey] + cm.Name)
		if i == 0 {
			first = b
			continue
		}
		if !bytes.Equal(first, b) {
			t.Fatalf("render %d differs from the first", i)
		}
	}
}

func TestConfigMapRoundTrip(t *testing.T) {
	s := generateFor(t, withFeatureGates("VMExport"))
	cm, err := s.ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != "kubevirt-install-strategy-"+s.ID[:10] {
		t.Errorf("name %q", cm.Name)
	}
	for k, v := range map[string]string{
		vocab.InstallStrategyVersionAnnotation:    "v1.5.3",
		vocab.InstallStrategyRegistryAnnotation:   "quay.io/kubevirt",
		vocab.InstallStrategyIdentifierAnnotation: s.ID,
		vocab.InstallStrategyEncodingAnnotation:   "gzip+base64",
	} {
		if cm.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, cm.Annotations[k], v)
		}
	}
	if _, ok := cm.Labels[vocab.InstallStrategyLabel]; !ok || cm.Labels[vocab.ManagedByLabel] != vocab.ManagedByValue {
		t.Errorf("labels %v", cm.Labels)
	}
	back, err := FromConfigMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != s.ID || back.Version != s.Version || back.Registry != s.Registry {
		t.Errorf("metadata changed: %+v", back)
	}
	if len(back.Objects) != len(s.Objects) {
		t.Fatalf("%d objects back, %d in", len(back.Objects), len(s.Objects))
	}
	for i := range s.Objects {
		a, b := s.Objects[i], back.Objects[i]
		if reflect.TypeOf(a) != reflect.TypeOf(b) {
			t.Errorf("%s decoded as %T, want %T", KeyOf(a), b, a)
			continue
		}
		ea, _ := EncodeObject(a)
		eb, _ := EncodeObject(b)
		if !bytes.Equal(ea, eb) {
			t.Errorf("%s changed in the round trip", KeyOf(a))
		}
	}
}

// Every rendered object is of a type the scheme knows, so the operator and
// the API server can decode it.
func TestEveryObjectKnownToScheme(t *testing.T) {
	s := generateFor(t, withFeatureGates("VMExport"))
	for _, o := range s.Objects {
		if _, isU := o.(*unstructured.Unstructured); isU {
			continue // kinds without Go types (OpenShift) stay unstructured
		}
		gvks, _, err := scheme.Scheme.ObjectKinds(o)
		if err != nil {
			t.Errorf("%s: %v", KeyOf(o), err)
			continue
		}
		if gvks[0] != o.GetObjectKind().GroupVersionKind() {
			t.Errorf("%s: TypeMeta says %v, the scheme %v", KeyOf(o), o.GetObjectKind().GroupVersionKind(), gvks[0])
		}
	}
}

func TestFromConfigMapRefusesBadData(t *testing.T) {
	good, err := generateFor(t, nil).ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	encoded := good.Data[vocab.ManifestsKey]
	gz, _ := base64.StdEncoding.DecodeString(encoded)
	cases := map[string]func(*corev1.ConfigMap){
		"not base64": func(cm *corev1.ConfigMap) { cm.Data[vocab.ManifestsKey] = "!!!not base64!!!" },
		"not gzip": func(cm *corev1.ConfigMap) {
			cm.Data[vocab.ManifestsKey] = base64.StdEncoding.EncodeToString([]byte("plain text"))
		},
		"truncated gzip": func(cm *corev1.ConfigMap) {
			cm.Data[vocab.ManifestsKey] = base64.StdEncoding.EncodeToString(gz[:len(gz)/2])
		},
		"truncated base64":  func(cm *corev1.ConfigMap) { cm.Data[vocab.ManifestsKey] = encoded[:len(encoded)/2+1] },
		"no manifests key":  func(cm *corev1.ConfigMap) { delete(cm.Data, vocab.ManifestsKey) },
		"no strategy label": func(cm *corev1.ConfigMap) { delete(cm.Labels, vocab.InstallStrategyLabel) },
		"plain yaml without kind": func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			cm.Data[vocab.ManifestsKey] = "---\nmetadata:\n  name: x\n"
		},
		"plain garbage": func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			cm.Data[vocab.ManifestsKey] = "---\n: : :\n\t- ["
		},
		"a Deployment with a wrong field type": func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			cm.Data[vocab.ManifestsKey] = "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replicas: many\n"
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cm := good.DeepCopy()
			mutate(cm)
			if _, err := FromConfigMap(cm); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

// A ConfigMap as upstream's operator writes it: generateName-style name,
// managed-by virt-operator, plain-YAML (legacy) or encoded manifests that
// also hold kinds virtop has no Go type for.
func TestFromUpstreamConfigMap(t *testing.T) {
	manifests := `---
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    kubevirt.io: ""
  name: kubevirt-apiserver
  namespace: kubevirt
---
apiVersion: security.openshift.io/v1
kind: SecurityContextConstraints
metadata:
  name: kubevirt-handler
allowPrivilegedContainer: true
---
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: prometheus-kubevirt-rules
  namespace: kubevirt
spec:
  groups:
  - name: alerts.rules
    rules:
    - alert: VirtAPIDown
      expr: kubevirt_virt_api_up == 0
      for: 10m
`
	cm := &corev1.ConfigMap{}
	cm.Name = "kubevirt-install-strategy-jbfgg"
	cm.Namespace = "kubevirt"
	cm.Labels = map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.UpstreamManagedByValue}
	cm.Annotations = map[string]string{vocab.InstallStrategyVersionAnnotation: "v1.5.3", vocab.InstallStrategyIdentifierAnnotation: "abc"}
	cm.Data = map[string]string{vocab.ManifestsKey: manifests}
	for _, encoded := range []bool{false, true} {
		if encoded {
			var buf bytes.Buffer
			zw := newGzip(&buf)
			zw.Write([]byte(manifests))
			zw.Close()
			cm.Annotations[vocab.InstallStrategyEncodingAnnotation] = vocab.InstallStrategyEncodingGzipBase64
			cm.Data[vocab.ManifestsKey] = base64.StdEncoding.EncodeToString(buf.Bytes())
		}
		s, err := FromConfigMap(cm)
		if err != nil {
			t.Fatalf("encoded=%v: %v", encoded, err)
		}
		if len(s.Objects) != 3 || s.ID != "abc" || s.Version != "v1.5.3" {
			t.Fatalf("encoded=%v: got %d objects, id %q, version %q", encoded, len(s.Objects), s.ID, s.Version)
		}
		if _, ok := s.Objects[0].(*corev1.ServiceAccount); !ok {
			t.Errorf("ServiceAccount decoded as %T", s.Objects[0])
		}
		if _, ok := s.Objects[1].(*unstructured.Unstructured); !ok {
			t.Errorf("SCC decoded as %T, want unstructured", s.Objects[1])
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	var size int
	for i := 0; i < b.N; i++ {
		s := generateFor(b, withFeatureGates("VMExport"))
		cm, err := s.ConfigMap("kubevirt")
		if err != nil {
			b.Fatal(err)
		}
		size = len(cm.Data[vocab.ManifestsKey])
	}
	b.ReportMetric(float64(size), "encoded-bytes")
}

func newGzip(w *bytes.Buffer) *gzip.Writer { return gzip.NewWriter(w) }

func BenchmarkRender(b *testing.B) {
	for i := 0; i < b.N; i++ {
		generateFor(b, withFeatureGates("VMExport"))
	}
}

// BenchmarkEncodeConfigMap encodes each release's strategy (VMExport on)
// into its ConfigMap; raw-bytes is the YAML stream, encoded-bytes the
// ConfigMap's data (gzip, base64).
func BenchmarkEncodeConfigMap(b *testing.B) {
	for _, v := range release.Versions() {
		b.Run(v, func(b *testing.B) {
			s := generateFor(b, atRelease(v))
			raw, err := s.Manifests()
			if err != nil {
				b.Fatal(err)
			}
			var cm *corev1.ConfigMap
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if cm, err = s.ConfigMap("kubevirt"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw)), "raw-bytes")
			b.ReportMetric(float64(len(cm.Data[vocab.ManifestsKey])), "encoded-bytes")
		})
	}
}

// BenchmarkRenderEachRelease renders every release (VMExport on), after a
// first render that parsed the release's data.
func BenchmarkRenderEachRelease(b *testing.B) {
	for _, v := range release.Versions() {
		b.Run(v, func(b *testing.B) {
			mutate := atRelease(v)
			generateFor(b, mutate)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				generateFor(b, mutate)
			}
		})
	}
}
