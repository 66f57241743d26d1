package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

const ns = "kubevirt"

func setup(t *testing.T) client.Client {
	t.Helper()
	env := testenv.Get(t)
	ctx := context.Background()
	err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return env.Client
}

// TestCRDAcceptsSample: the CRD installs (testenv installed it from
// config/crd/bases), the sample is accepted unchanged, the status
// subresource works.
func TestCRDAcceptsSample(t *testing.T) {
	c := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	data, err := os.ReadFile("../../config/samples/kubevirtmonitoring.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m v1alpha1.KubeVirtMonitoring
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &m); err != nil {
		t.Fatalf("sample refused: %v", err)
	}
	defer func() { _ = c.Delete(ctx, &m) }()

	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonValid, Message: "valid for v1.5.3"})
	m.Status.ObservedGeneration = m.Generation
	m.Status.Version = "v1.5.3"
	m.Status.DisabledAlerts = []string{"LowKVMNodesCount"}
	if err := c.Status().Update(ctx, &m); err != nil {
		t.Fatalf("status update: %v", err)
	}
	var got v1alpha1.KubeVirtMonitoring
	if err := c.Get(ctx, client.ObjectKeyFromObject(&m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Version != "v1.5.3" || len(got.Spec.Alerts) != 2 || got.Spec.Alerts[1].Parameters["ratio"] != "0.5" {
		t.Errorf("round trip: %+v", got)
	}
}

// TestCRDRefusesAtAdmission: what the schema and CEL can tell is refused by
// the API server with a message naming the field.
func TestCRDRefusesAtAdmission(t *testing.T) {
	c := setup(t)
	for i, tc := range []struct {
		name string
		spec string // YAML of spec
		want []string
	}{
		{"bad for", "alerts: [{name: VirtAPIDown, for: 10minutes}]", []string{"spec.alerts[0].for", "should match"}},
		{"bad severity", "alerts: [{name: VirtAPIDown, severity: page}]", []string{"spec.alerts[0].severity", `Unsupported value: "page"`}},
		{"bad interval", "serviceMonitor: {interval: 1.5m}", []string{"spec.serviceMonitor.interval", "should match"}},
		{"bad parameter value", "alerts: [{name: VirtAPIDown, parameters: {ratio: lots}}]", []string{"spec.alerts[0].parameters.ratio", "should match"}},
		{"bad parameter name", "alerts: [{name: VirtAPIDown, parameters: {my-ratio: '1'}}]", []string{"spec.alerts[0]", "parameter names must match"}},
		{"bad alert name", "alerts: [{name: 'Virt API'}]", []string{"spec.alerts[0].name", "should match"}},
		{"duplicate alert", "alerts: [{name: VirtAPIDown}, {name: VirtAPIDown}]", []string{"spec.alerts[1]", "Duplicate value"}},
		{"reserved alert label", "alerts: [{name: VirtAPIDown, labels: {severity: info}}]", []string{"spec.alerts[0]", "labels cannot set alertname, severity"}},
		{"bad alert label name", "alerts: [{name: VirtAPIDown, labels: {team-a: x}}]", []string{"spec.alerts[0]", "alert label names must match"}},
		{"record and alert", "additionalGroups: [{name: g, rules: [{record: 'a:b', alert: A, expr: vector(1)}]}]", []string{"spec.additionalGroups[0].rules[0]", "exactly one of record and alert"}},
		{"neither record nor alert", "additionalGroups: [{name: g, rules: [{expr: vector(1)}]}]", []string{"spec.additionalGroups[0].rules[0]", "exactly one of record and alert"}},
		{"for on a record", "additionalGroups: [{name: g, rules: [{record: 'a:b', expr: vector(1), for: 5m}]}]", []string{"spec.additionalGroups[0].rules[0]", "for and annotations apply to alerts only"}},
		{"empty expr", "additionalGroups: [{name: g, rules: [{record: 'a:b', expr: ''}]}]", []string{"spec.additionalGroups[0].rules[0].expr"}},
		{"no rules", "additionalGroups: [{name: g, rules: []}]", []string{"spec.additionalGroups[0].rules"}},
		{"virtop's group name", "additionalGroups: [{name: alerts.rules, rules: [{record: 'a:b', expr: vector(1)}]}]", []string{"spec.additionalGroups[0]", "virtop's group names"}},
		{"bad group interval", "additionalGroups: [{name: g, interval: soon, rules: [{record: 'a:b', expr: vector(1)}]}]", []string{"spec.additionalGroups[0].interval", "should match"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var spec map[string]any
			if err := yaml.Unmarshal([]byte(tc.spec), &spec); err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.GroupVersion.String(),
				"kind":       "KubeVirtMonitoring",
				"metadata":   map[string]any{"name": "bad-" + strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), "'", "") + "-" + string(rune('a'+i)), "namespace": ns},
				"spec":       spec,
			}}
			err := c.Create(ctx, u)
			if err == nil {
				_ = c.Delete(ctx, u)
				t.Fatal("accepted")
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("not Invalid: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
