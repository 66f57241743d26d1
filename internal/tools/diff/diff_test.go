package diff

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

const ns = "kubevirt"

func deployment(version, identifier string, replicas int32, env []corev1.EnvVar, args []string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "virt-api", Namespace: ns,
			Labels: map[string]string{"kubevirt.io": "virt-api", vocab.AppVersionLabel: version},
			Annotations: map[string]string{
				vocab.InstallStrategyVersionAnnotation:    version,
				vocab.InstallStrategyIdentifierAnnotation: identifier,
			},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io": "virt-api"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"kubevirt.io": "virt-api"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "virt-api", Image: "quay.io/kubevirt/virt-api:" + version, Env: env, Args: args},
					{Name: "sidecar", Image: "example.com/sidecar:1"},
				}},
			},
		},
	}
}

func service(name string, port int32) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port}}},
	}
}

func serviceAccount(name string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{"k": "v"},
	}
}

// operands returns two object lists with these known differences: B adds
// ServiceAccount kubevirt-apiserver and removes ConfigMap old-config; in
// Deployment virt-api the version label and annotation, the image, one env
// value, an added env var, an arg (by index) and an added arg differ, and
// the identifier annotation differs (ignored); Service virt-api's port
// differs; Service virt-exportproxy is equal.
func operands() (a, b []client.Object) {
	a = []client.Object{
		deployment("v1.5.0", "id-a", 2,
			[]corev1.EnvVar{{Name: "LOG", Value: "2"}, {Name: "KEEP", Value: "x"}},
			[]string{"--port", "8443"}),
		service("virt-api", 443),
		service("virt-exportproxy", 443),
		configMap("old-config"),
	}
	b = []client.Object{
		serviceAccount("kubevirt-apiserver"),
		service("virt-exportproxy", 443),
		service("virt-api", 8443),
		deployment("v1.5.3", "id-b", 2,
			[]corev1.EnvVar{{Name: "KEEP", Value: "x"}, {Name: "LOG", Value: "3"}, {Name: "NEW", Value: "1"}},
			[]string{"--port", "8444", "--verbose"}),
	}
	return a, b
}

func TestCompareKnownDifferences(t *testing.T) {
	a, b := operands()
	got := Options{ShowStamps: true}.Compare(a, b)
	want := Result{
		Added:   []ObjectRef{{Kind: "ServiceAccount", Namespace: ns, Name: "kubevirt-apiserver"}},
		Removed: []ObjectRef{{Kind: "ConfigMap", Namespace: ns, Name: "old-config"}},
		Changed: []ObjectDiff{
			{
				ObjectRef: ObjectRef{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "virt-api"},
				Fields: []FieldChange{
					{Path: `metadata.annotations["kubevirt.io/install-strategy-version"]`, Change: FieldChanged, Old: "v1.5.0", New: "v1.5.3"},
					{Path: `metadata.labels["app.kubernetes.io/version"]`, Change: FieldChanged, Old: "v1.5.0", New: "v1.5.3"},
					{Path: "spec.template.spec.containers[name=virt-api].args[1]", Change: FieldChanged, Old: "8443", New: "8444"},
					{Path: "spec.template.spec.containers[name=virt-api].args[2]", Change: FieldAdded, New: "--verbose"},
					{Path: "spec.template.spec.containers[name=virt-api].env[name=LOG].value", Change: FieldChanged, Old: "2", New: "3"},
					{Path: "spec.template.spec.containers[name=virt-api].env[name=NEW]", Change: FieldAdded, New: map[string]interface{}{"name": "NEW", "value": "1"}},
					{Path: "spec.template.spec.containers[name=virt-api].image", Change: FieldChanged, Old: "quay.io/kubevirt/virt-api:v1.5.0", New: "quay.io/kubevirt/virt-api:v1.5.3"},
				},
			},
			{
				ObjectRef: ObjectRef{Kind: "Service", Namespace: ns, Name: "virt-api"},
				Fields:    []FieldChange{{Path: "spec.ports[0].port", Change: FieldChanged, Old: 443.0, New: 8443.0}},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Compare:\n got %#v\nwant %#v", got, want)
	}
	if got.Equal() {
		t.Error("Equal() = true for different operands")
	}

	// Reversed operands swap added and removed.
	rev := Options{ShowStamps: true}.Compare(b, a)
	if !reflect.DeepEqual(rev.Added, want.Removed) || !reflect.DeepEqual(rev.Removed, want.Added) {
		t.Errorf("reversed: added %v removed %v", rev.Added, rev.Removed)
	}

	wantText := `1 added, 1 removed, 2 changed

added:
  + ServiceAccount/kubevirt/kubevirt-apiserver

removed:
  - ConfigMap/kubevirt/old-config

changed:
  ~ Deployment.apps/kubevirt/virt-api
      metadata.annotations["kubevirt.io/install-strategy-version"]: "v1.5.0" -> "v1.5.3"
      metadata.labels["app.kubernetes.io/version"]: "v1.5.0" -> "v1.5.3"
      spec.template.spec.containers[name=virt-api].args[1]: "8443" -> "8444"
      spec.template.spec.containers[name=virt-api].args[2]: (absent) -> "--verbose"
      spec.template.spec.containers[name=virt-api].env[name=LOG].value: "2" -> "3"
      spec.template.spec.containers[name=virt-api].env[name=NEW]: (absent) -> {"name":"NEW","value":"1"}
      spec.template.spec.containers[name=virt-api].image: "quay.io/kubevirt/virt-api:v1.5.0" -> "quay.io/kubevirt/virt-api:v1.5.3"
  ~ Service/kubevirt/virt-api
      spec.ports[0].port: 443 -> 8443
`
	if text := got.Text(); text != wantText {
		t.Errorf("Text:\n%s\nwant:\n%s", text, wantText)
	}

	// By default the version stamps are not changes.
	def := Compare(a, b)
	if len(def.Changed) != 2 || len(def.Changed[0].Fields) != len(want.Changed[0].Fields)-2 {
		t.Fatalf("default: %+v", def.Changed)
	}
	for _, f := range def.Changed[0].Fields {
		if strings.HasPrefix(f.Path, "metadata.") {
			t.Errorf("default comparison kept the stamp %s", f.Path)
		}
	}
}

// TestCompareStampsAndBookkeeping: objects that differ only in version
// stamps and virtop's bookkeeping annotations are equal by default, also
// in pod templates; ShowStamps shows them.
func TestCompareStampsAndBookkeeping(t *testing.T) {
	mk := func(version, stage string) []client.Object {
		d := deployment(version, "id-"+version, 2, nil, nil)
		d.Spec.Template.Annotations = map[string]string{vocab.InstallStrategyVersionAnnotation: version}
		d.Annotations[vocab.StageAnnotation] = stage
		d.Annotations[vocab.UpstreamGenerationAnnotation] = version
		d.Spec.Template.Spec.Containers[0].Image = "img"
		return []client.Object{d}
	}
	a, b := mk("v1.5.0", "virt-api"), mk("v1.5.3", "other")
	if got := Compare(a, b); !got.Equal() {
		t.Errorf("default: %+v", got.Changed)
	}
	if got := (Options{ShowStamps: true}).Compare(a, b); len(got.Changed) != 1 || len(got.Changed[0].Fields) != 5 {
		t.Errorf("ShowStamps: %+v", got.Changed)
	}
}

func TestCompareIgnoreMetadata(t *testing.T) {
	a, b := operands()
	b[3].(*appsv1.Deployment).Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	if got := (Options{ShowStamps: true}).Compare(a, b); len(got.Changed[0].Fields) != 8 {
		t.Fatalf("the template annotation is not a change: %+v", got.Changed[0].Fields)
	}
	got := Options{IgnoreMetadata: true}.Compare(a, b)
	if len(got.Changed) != 2 {
		t.Fatalf("changed = %v", got.Changed)
	}
	for _, f := range got.Changed[0].Fields {
		if strings.HasPrefix(f.Path, "metadata.") {
			t.Errorf("--ignore-metadata kept %s", f.Path)
		}
	}
	if n := len(got.Changed[0].Fields); n != 5 {
		t.Errorf("Deployment has %d field changes, want 5", n)
	}
}

func TestCompareEqual(t *testing.T) {
	a, _ := operands()
	// Same objects, in another order, with a different identifier
	// annotation, as unstructured objects: equal.
	var b []client.Object
	for i := len(a) - 1; i >= 0; i-- {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(a[i])
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAnnotations() != nil {
			ann := u.GetAnnotations()
			ann[vocab.InstallStrategyIdentifierAnnotation] = "another"
			u.SetAnnotations(ann)
		}
		b = append(b, u)
	}
	got := Compare(a, b)
	if !got.Equal() {
		t.Fatalf("not equal: %s", got.Text())
	}
	if text := got.Text(); text != "0 added, 0 removed, 0 changed\n" {
		t.Errorf("Text = %q", text)
	}
	js, err := got.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "equal": true,
  "summary": {
    "added": 0,
    "removed": 0,
    "changed": 0
  },
  "added": [],
  "removed": [],
  "changed": []
}
`
	if string(js) != want {
		t.Errorf("JSON:\n%s\nwant:\n%s", js, want)
	}
}

func rule(alert, record, expr, forDur string, labels, annotations map[string]string) monitoringv1.Rule {
	r := monitoringv1.Rule{Alert: alert, Record: record, Expr: intstr.FromString(expr), Labels: labels, Annotations: annotations}
	if forDur != "" {
		r.For = ptr.To(monitoringv1.Duration(forDur))
	}
	return r
}

func prometheusRule(groups ...monitoringv1.RuleGroup) *monitoringv1.PrometheusRule {
	return &monitoringv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"},
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-kubevirt-rules", Namespace: ns},
		Spec:       monitoringv1.PrometheusRuleSpec{Groups: groups},
	}
}

func TestCompareRules(t *testing.T) {
	warn := map[string]string{"severity": "warning"}
	crit := map[string]string{"severity": "critical"}
	sum := func(s string) map[string]string { return map[string]string{"summary": s} }
	a := prometheusRule(
		monitoringv1.RuleGroup{Name: "recordingRules.rules", Rules: []monitoringv1.Rule{
			rule("", "kubevirt_virt_api_up", "sum(up{job='a'})", "", nil, nil),
			rule("", "cluster:dup", "sum(x)", "", map[string]string{"k": "1"}, nil),
			rule("", "cluster:dup", "sum(y)", "", map[string]string{"k": "2"}, nil),
		}},
		monitoringv1.RuleGroup{Name: "alerts.rules", Rules: []monitoringv1.Rule{
			rule("VirtApiRESTErrorsHigh", "", "ratio >= 0.05", "", warn, sum("errors")),
			rule("VMCannotBeEvicted", "", "kubevirt_vmi_non_evictable > 0", "1m", warn, sum("s")),
			rule("VirtAPIDown", "", "up == 0", "10m", crit, sum("down")),
			rule("Moved", "", "1", "", nil, nil),
		}},
	)
	b := prometheusRule(
		monitoringv1.RuleGroup{Name: "recordingRules.rules", Rules: []monitoringv1.Rule{
			rule("", "kubevirt_virt_api_up", "sum(up{job='a'})", "", nil, nil),
			rule("", "cluster:dup", "sum(x)", "", map[string]string{"k": "1"}, nil),
			rule("", "cluster:dup", "sum(z)", "", map[string]string{"k": "2"}, nil),
			rule("", "kubevirt_new:sum", "sum(n)", "", nil, nil),
		}},
		monitoringv1.RuleGroup{Name: "alerts.rules", Rules: []monitoringv1.Rule{
			rule("VMCannotBeEvicted", "", "kubevirt_vmi_non_evictable * on(name) x == 1", "1m", warn, sum("s")),
			rule("VirtAPIDown", "", "up == 0", "5m", warn, map[string]string{"summary": "down", "runbook_url": "u"}),
		}},
		monitoringv1.RuleGroup{Name: "other.rules", Rules: []monitoringv1.Rule{
			rule("Moved", "", "1", "", nil, nil),
		}},
	)
	got := Compare([]client.Object{a}, []client.Object{b})
	if len(got.Changed) != 1 || got.Changed[0].Rules == nil {
		t.Fatalf("want one changed PrometheusRule with rules, got %+v", got)
	}
	want := RuleDiff{
		Added:   []RuleRef{{Type: "record", Name: "kubevirt_new:sum", Occurrence: 1, Group: "recordingRules.rules"}},
		Removed: []RuleRef{{Type: "alert", Name: "VirtApiRESTErrorsHigh", Occurrence: 1, Group: "alerts.rules"}},
		Changed: []RuleChange{
			{RuleRef: RuleRef{Type: "alert", Name: "Moved", Occurrence: 1, Group: "other.rules"}, Fields: []string{"group"}},
			{RuleRef: RuleRef{Type: "alert", Name: "VMCannotBeEvicted", Occurrence: 1, Group: "alerts.rules"}, Fields: []string{"expr"}},
			{RuleRef: RuleRef{Type: "alert", Name: "VirtAPIDown", Occurrence: 1, Group: "alerts.rules"}, Fields: []string{"for", "annotations.runbook_url", "labels.severity"}},
			{RuleRef: RuleRef{Type: "record", Name: "cluster:dup", Occurrence: 2, Group: "recordingRules.rules"}, Fields: []string{"expr"}},
		},
	}
	if !reflect.DeepEqual(*got.Changed[0].Rules, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", *got.Changed[0].Rules, want)
	}
	// The field diff names rules by alert and record name too.
	var paths []string
	for _, f := range got.Changed[0].Fields {
		paths = append(paths, f.Path)
	}
	for _, p := range []string{
		"spec.groups[name=alerts.rules].rules[alert=VMCannotBeEvicted].expr",
		"spec.groups[name=alerts.rules].rules[alert=VirtAPIDown].for",
		"spec.groups[name=recordingRules.rules].rules[record=cluster:dup#2].expr",
		"spec.groups[name=other.rules]",
	} {
		if !slices.Contains(paths, p) {
			t.Errorf("field diff lacks %s; has %v", p, paths)
		}
	}
	text := got.Text()
	for _, line := range []string{
		"    rules: 1 added, 1 removed, 4 changed\n",
		"      + record kubevirt_new:sum (group recordingRules.rules)\n",
		"      - alert VirtApiRESTErrorsHigh (group alerts.rules)\n",
		"      ~ alert VirtAPIDown: for, annotations.runbook_url, labels.severity\n",
		"      ~ record cluster:dup #2: expr\n",
		"    fields:\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("text lacks %q:\n%s", line, text)
		}
	}

	// Equal rules, other metadata: the object changes, its rules do not,
	// and the JSON still carries the (empty) rules section.
	a2 := prometheusRule(a.Spec.Groups...)
	a2.Labels = map[string]string{"x": "y"}
	got = Compare([]client.Object{a2}, []client.Object{a})
	if len(got.Changed) != 1 || got.Changed[0].Rules == nil || !got.Changed[0].Rules.Empty() {
		t.Fatalf("got %+v", got)
	}
	if strings.Contains(got.Text(), "rules:") {
		t.Errorf("text shows an empty rules section:\n%s", got.Text())
	}
}

func TestJSONSchema(t *testing.T) {
	a, b := operands()
	a = append(a, prometheusRule(monitoringv1.RuleGroup{Name: "g", Rules: []monitoringv1.Rule{rule("X", "", "a > b && c < d", "", nil, nil)}}))
	b = append(b, prometheusRule(monitoringv1.RuleGroup{Name: "g", Rules: []monitoringv1.Rule{rule("X", "", "2", "", nil, nil)}}))
	js, err := Options{ShowStamps: true}.Compare(a, b).JSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js, []byte(`"old": "a > b && c < d"`)) {
		t.Errorf("JSON escapes PromQL:\n%s", js)
	}
	var rep struct {
		Equal   bool           `json:"equal"`
		Summary map[string]int `json:"summary"`
		Added   []map[string]interface{}
		Removed []map[string]interface{}
		Changed []struct {
			Kind   string                   `json:"kind"`
			Fields []map[string]interface{} `json:"fields"`
			Rules  *struct {
				Added, Removed []interface{}
				Changed        []struct {
					Name   string   `json:"name"`
					Fields []string `json:"fields"`
				}
			} `json:"rules"`
		}
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Equal || !reflect.DeepEqual(rep.Summary, map[string]int{"added": 1, "removed": 1, "changed": 3}) {
		t.Errorf("equal %v summary %v", rep.Equal, rep.Summary)
	}
	if !reflect.DeepEqual(rep.Added[0], map[string]interface{}{"group": "", "kind": "ServiceAccount", "namespace": ns, "name": "kubevirt-apiserver"}) {
		t.Errorf("added[0] = %v", rep.Added[0])
	}
	// Changed objects sort by kind: Deployment, PrometheusRule, Service.
	if k := []string{rep.Changed[0].Kind, rep.Changed[1].Kind, rep.Changed[2].Kind}; !reflect.DeepEqual(k, []string{"Deployment", "PrometheusRule", "Service"}) {
		t.Errorf("changed kinds %v", k)
	}
	f := rep.Changed[0].Fields[3]
	if _, hasOld := f["old"]; hasOld || f["change"] != "added" || f["new"] != "--verbose" {
		t.Errorf("added field = %v", f)
	}
	if rep.Changed[0].Rules != nil || rep.Changed[1].Rules == nil {
		t.Errorf("rules section on the wrong objects")
	}
	if r := rep.Changed[1].Rules; r.Added == nil || r.Removed == nil || len(r.Changed) != 1 || r.Changed[0].Name != "X" || !reflect.DeepEqual(r.Changed[0].Fields, []string{"expr"}) {
		t.Errorf("rules = %+v", r)
	}
}

// testStrategy is a small strategy, as its ConfigMaps carry it.
func testStrategy() *strategy.Strategy {
	a, _ := operands()
	return &strategy.Strategy{Version: "v1.5.0", Registry: "quay.io/kubevirt", ID: "0123456789abcdef", Objects: a}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func printObjs(t *testing.T, objs []client.Object, format string) []byte {
	t.Helper()
	b, err := strategy.Print(objs, format)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipBase64(t *testing.T, data []byte) string {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// upstreamConfigMap is shaped as upstream's operator writes its strategy
// ConfigMap and as kubectl prints it: generated name, managed-by
// virt-operator, server-written metadata; manifests encoded or, as older
// releases wrote them, plain.
func upstreamConfigMap(manifests string, encoded bool) *corev1.ConfigMap {
	ann := map[string]string{
		vocab.InstallStrategyVersionAnnotation:    "v1.5.0",
		vocab.InstallStrategyRegistryAnnotation:   "quay.io/kubevirt",
		vocab.InstallStrategyIdentifierAnnotation: "e8c9f2b1d0a4e3f56789",
	}
	if encoded {
		ann[vocab.InstallStrategyEncodingAnnotation] = "gzip+base64"
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kubevirt-install-strategy-x7k2p", GenerateName: "kubevirt-install-strategy-", Namespace: ns,
			ResourceVersion: "4711", UID: "2f1e6a0c-8d3b-4b61-9a55-1c2d3e4f5a6b",
			Labels: map[string]string{
				vocab.ManagedByLabel:       vocab.UpstreamManagedByValue,
				vocab.InstallStrategyLabel: "",
			},
			Annotations: ann,
		},
		Data: map[string]string{"manifests": manifests},
	}
}

func TestLoadOperands(t *testing.T) {
	s := testStrategy()
	manifests := printObjs(t, s.Objects, "yaml")
	virtopCM, err := s.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	// kubectl get configmaps -l kubevirt.io/install-strategy -o json, with
	// exactly one match, is a List of one ConfigMap.
	listOfOne := printObjs(t, []client.Object{upstreamConfigMap(gzipBase64(t, manifests), true)}, "json")
	files := map[string][]byte{
		"dump.yaml":                 manifests,
		"dump.json":                 printObjs(t, s.Objects, "json"),
		"virtop-configmap.yaml":     printObjs(t, []client.Object{virtopCM}, "yaml"),
		"upstream-configmap.yaml":   printObjs(t, []client.Object{upstreamConfigMap(gzipBase64(t, manifests), true)}, "yaml"),
		"upstream-legacy-plain.yml": printObjs(t, []client.Object{upstreamConfigMap(string(manifests), false)}, "yaml"),
		"configmap-list.json":       listOfOne,
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			if name == "dump.json" && !bytes.Contains(data, []byte(`"kind": "List"`)) {
				t.Fatalf("not a JSON List:\n%s", data)
			}
			objs, err := Load(writeFile(t, name, data), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != len(s.Objects) {
				t.Fatalf("%d objects, want %d", len(objs), len(s.Objects))
			}
			if res := Compare(s.Objects, objs); !res.Equal() {
				t.Errorf("differs from the objects it was written from:\n%s", res.Text())
			}
		})
	}
}

func TestLoadVersion(t *testing.T) {
	var asked []string
	render := func(v string) (*strategy.Strategy, error) {
		asked = append(asked, v)
		if v != "v1.5.0" {
			return nil, errors.New("not in catalog")
		}
		return testStrategy(), nil
	}
	objs, err := Load("version:v1.5.0", render)
	if err != nil || len(objs) != 4 {
		t.Fatalf("Load = %d objects, %v", len(objs), err)
	}
	if _, err := Load("version:v9.9.9", render); err == nil || !strings.Contains(err.Error(), "version:v9.9.9: not in catalog") {
		t.Errorf("unknown version: err = %v", err)
	}
	if !reflect.DeepEqual(asked, []string{"v1.5.0", "v9.9.9"}) {
		t.Errorf("rendered %v", asked)
	}
	if _, err := Load("version:", render); err == nil {
		t.Error("version: with no tag loaded")
	}
}

func TestLoadErrors(t *testing.T) {
	s := testStrategy()
	manifests := printObjs(t, s.Objects, "yaml")
	cm := upstreamConfigMap(gzipBase64(t, manifests), true)
	// One key twice with different content; identical copies are
	// upstream's quirk and kept once (below).
	changed := s.Objects[0].DeepCopyObject().(client.Object)
	changed.SetLabels(map[string]string{"changed": "yes"})
	dup := append([]client.Object{}, s.Objects...)
	dup = append(dup, changed)
	cm2 := cm.DeepCopy()
	cm2.Name += "-other"
	corrupt := upstreamConfigMap("H4sIAAAA-not-base64", true)
	for name, data := range map[string][]byte{
		"empty.yaml":         []byte("# nothing\n"),
		"two-strategies.yml": printObjs(t, []client.Object{cm, cm2}, "yaml"),
		"cm-and-more.yaml":   printObjs(t, append([]client.Object{cm}, s.Objects...), "yaml"),
		"duplicate.yaml":     printObjs(t, dup, "yaml"),
		"not-yaml.yaml":      []byte("{{{"),
		"corrupt-cm.yaml":    printObjs(t, []client.Object{corrupt}, "yaml"),
	} {
		t.Run(name, func(t *testing.T) {
			if objs, err := Load(writeFile(t, name, data), nil); err == nil {
				t.Errorf("loaded %d objects, want an error", len(objs))
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	if _, err := Load("", nil); err == nil {
		t.Error("empty operand loaded")
	}
	// An object listed twice identically, as upstream lists its CA
	// ConfigMaps, is one object.
	twice := append(append([]client.Object{}, s.Objects...), s.Objects[0])
	if objs, err := Load(writeFile(t, "twice.yaml", printObjs(t, twice, "yaml")), nil); err != nil || len(objs) != len(s.Objects) {
		t.Errorf("identical duplicate: %d objects, %v; want %d", len(objs), err, len(s.Objects))
	}
	// A ConfigMap without the label is an ordinary object of a dump.
	plain := configMap("not-a-strategy")
	objs, err := Load(writeFile(t, "cm.yaml", printObjs(t, []client.Object{plain}, "yaml")), nil)
	if err != nil || len(objs) != 1 || objs[0].GetName() != "not-a-strategy" {
		t.Errorf("plain ConfigMap: %v, %v", objs, err)
	}
}
