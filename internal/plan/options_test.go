package plan

import (
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/monitoring/tuning"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func kubeVirtMonitoring(spec v1alpha1.KubeVirtMonitoringSpec) *v1alpha1.KubeVirtMonitoring {
	return &v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Name: "tuning", Namespace: "kubevirt", UID: "u1", Generation: 1}, Spec: spec}
}

// serviceMonitor returns the planned ServiceMonitor.
func serviceMonitor(t *testing.T, objs []client.Object) *monitoringv1.ServiceMonitor {
	t.Helper()
	for _, o := range objs {
		if sm, ok := o.(*monitoringv1.ServiceMonitor); ok && sm.Name == vocab.ServiceMonitorName {
			return sm
		}
	}
	t.Fatal("no ServiceMonitor planned")
	return nil
}

// TestBuildFinishesEveryObject: with every option set, the plan's objects
// are what is applied — tuned, certificates filled, namespaced ones
// labelled with the install namespace, adjusted last — and the strategy
// keeps none of it.
func TestBuildFinishesEveryObject(t *testing.T) {
	s, cfg := generate(t)
	rel, _ := release.Lookup(cfg.Version)
	var cache TuningCache
	adjusted := 0
	opts := Options{
		Tuning: &Tuning{Resource: kubeVirtMonitoring(v1alpha1.KubeVirtMonitoringSpec{
			ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Interval: "61s"}}), Release: rel, Cache: &cache},
		Certificates: &Certificates{Manager: &certs.Manager{Clock: clocktesting.NewFakePassiveClock(time.Unix(1_800_000_000, 0))}},
		Adjust: func(o client.Object) client.Object {
			adjusted++
			c := o.DeepCopyObject().(client.Object)
			ann := c.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann["test/adjusted"] = "yes"
			c.SetAnnotations(ann)
			return c
		},
	}
	in := &placement.Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		Namespaces: map[string]map[string]string{"kubevirt": {}}}
	caps := Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in}
	p, err := Build(s, cfg, caps, opts)
	if err != nil {
		t.Fatal(err)
	}
	if adjusted != len(p.Objects) {
		t.Errorf("Adjust ran %d times for %d objects", adjusted, len(p.Objects))
	}
	for _, o := range p.Objects {
		key := strategy.KeyOf(o)
		if o.GetAnnotations()["test/adjusted"] != "yes" {
			t.Errorf("%s not adjusted", key)
		}
		label, has := o.GetLabels()[vocab.InstallNamespaceLabel]
		switch {
		case o.GetNamespace() != "" && label != "kubevirt":
			t.Errorf("%s: %s=%q, want kubevirt", key, vocab.InstallNamespaceLabel, label)
		case o.GetNamespace() == "" && has:
			t.Errorf("cluster-scoped %s carries %s", key, vocab.InstallNamespaceLabel)
		}
	}
	if sm := serviceMonitor(t, p.Objects); len(sm.Spec.Endpoints) == 0 || sm.Spec.Endpoints[0].Interval != "61s" {
		t.Errorf("ServiceMonitor endpoints %+v, want the tuned interval 61s", sm.Spec.Endpoints)
	}
	if p.Tuning == nil || p.Tuning.Err != nil || p.Tuning.Result == nil || len(p.Tuning.Tuned) != 2 {
		t.Fatalf("tuning outcome %+v, want the PrometheusRule and the ServiceMonitor tuned", p.Tuning)
	}
	if p.Certificates == nil || len(p.Certificates.Issued()) == 0 {
		t.Fatalf("certificate report %+v, want certificates issued", p.Certificates)
	}
	for _, o := range p.Objects {
		if sec, ok := o.(*corev1.Secret); ok && sec.Name == "kubevirt-virt-api-certs" && len(sec.Data[corev1.TLSCertKey]) == 0 {
			t.Errorf("Secret %s planned without a certificate", sec.Name)
		}
	}
	for _, o := range s.Objects {
		if _, ok := o.GetLabels()[vocab.InstallNamespaceLabel]; ok || o.GetAnnotations()["test/adjusted"] != "" {
			t.Fatalf("the strategy's %s was changed by planning", strategy.KeyOf(o))
		}
	}
	if sm := serviceMonitor(t, s.Objects); len(sm.Spec.Endpoints) > 0 && sm.Spec.Endpoints[0].Interval != "" {
		t.Errorf("the strategy's ServiceMonitor was tuned")
	}

	// A second plan is tuned from the cache, its objects its own.
	p2, err := Build(s, cfg, caps, opts)
	if err != nil {
		t.Fatal(err)
	}
	sm1, sm2 := serviceMonitor(t, p.Objects), serviceMonitor(t, p2.Objects)
	if sm1 == sm2 || sm2.Spec.Endpoints[0].Interval != "61s" {
		t.Errorf("second plan: ServiceMonitor shared with the first (%v) or untuned (%s)", sm1 == sm2, sm2.Spec.Endpoints[0].Interval)
	}
	if p2.Tuning.Result != p.Tuning.Result {
		t.Error("the second plan rendered the tuning again instead of using the cache")
	}
}

// TestTuningThatDoesNotApply: an invalid tuning, or a version without
// rules to check it against, leaves the monitoring objects untuned and
// says why; the plan goes on.
func TestTuningThatDoesNotApply(t *testing.T) {
	s, cfg := generate(t)
	rel, _ := release.Lookup(cfg.Version)
	in := &placement.Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		Namespaces: map[string]map[string]string{"kubevirt": {}}}
	caps := Capabilities{APIs: allAPIs(), Nodes: 1, Monitoring: in}
	for name, tc := range map[string]struct {
		tuning  *Tuning
		invalid bool
		msg     string
	}{
		"invalid": {&Tuning{Resource: kubeVirtMonitoring(v1alpha1.KubeVirtMonitoringSpec{
			Alerts: []v1alpha1.AlertTuning{{Name: "NoSuchAlert", Disabled: true}}}), Release: rel}, true, "NoSuchAlert"},
		"no rules": {&Tuning{Resource: kubeVirtMonitoring(v1alpha1.KubeVirtMonitoringSpec{
			ServiceMonitor: &v1alpha1.ServiceMonitorTuning{Interval: "61s"}})}, false, "no rules of KubeVirt"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Build(s, cfg, caps, Options{Tuning: tc.tuning})
			if err != nil {
				t.Fatal(err)
			}
			if p.Tuning == nil || p.Tuning.Err == nil || tuning.IsInvalid(p.Tuning.Err) != tc.invalid || !strings.Contains(p.Tuning.Err.Error(), tc.msg) {
				t.Fatalf("outcome %+v, want an error naming %q (invalid %v)", p.Tuning, tc.msg, tc.invalid)
			}
			if len(p.Tuning.Tuned) != 0 {
				t.Errorf("tuned %v", p.Tuning.Tuned)
			}
			if sm := serviceMonitor(t, p.Objects); len(sm.Spec.Endpoints) > 0 && sm.Spec.Endpoints[0].Interval != "" {
				t.Errorf("ServiceMonitor tuned by a tuning that did not apply")
			}
		})
	}
}

// TestReplicasPinnedByAPatch: virt-api is sized for the cluster unless a
// customizeComponents patch set its replicas (the strategy marks it) or
// the resource names them; a patch that merely mentions "replicas" pins
// nothing.
func TestReplicasPinnedByAPatch(t *testing.T) {
	for name, tc := range map[string]struct {
		patch kvv1.CustomizeComponentsPatch
		infra *uint8
		want  int32
	}{
		"no patch": {want: 3},
		"json patch": {patch: kvv1.CustomizeComponentsPatch{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/spec/replicas","value":5}]`}, want: 5},
		"strategic merge patch": {patch: kvv1.CustomizeComponentsPatch{ResourceName: "*", ResourceType: "Deployment", Type: kvv1.StrategicMergePatchType,
			Patch: `{"spec":{"replicas":4}}`}, want: 4},
		"json patch of the whole spec": {patch: kvv1.CustomizeComponentsPatch{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"add","path":"/spec/replicas","value":7},{"op":"test","path":"/metadata/name","value":"virt-api"}]`}, want: 7},
		"a patch that only mentions replicas": {patch: kvv1.CustomizeComponentsPatch{ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"metadata":{"annotations":{"note":"two replicas are enough"}}}`}, want: 3},
		"another Deployment's replicas": {patch: kvv1.CustomizeComponentsPatch{ResourceName: "virt-controller", ResourceType: "Deployment", Type: kvv1.MergePatchType,
			Patch: `{"spec":{"replicas":1}}`}, want: 3},
		"spec.infra.replicas": {infra: ptr.To[uint8](2), want: 2},
	} {
		t.Run(name, func(t *testing.T) {
			// The catalog's default version (no spec.imageTag).
			cfg := kvtest.Config(t, "", func(kv *kvv1.KubeVirt) {
				if tc.patch.Patch != "" {
					kv.Spec.CustomizeComponents.Patches = []kvv1.CustomizeComponentsPatch{tc.patch}
				}
				if tc.infra != nil {
					kv.Spec.Infra = &kvv1.ComponentConfig{Replicas: tc.infra}
				}
			})
			s, err := strategy.Generate(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 30})
			for _, o := range p.Objects {
				if d, ok := o.(*appsv1.Deployment); ok && d.Name == vocab.VirtAPI {
					if got := ptr.Deref(d.Spec.Replicas, 1); got != tc.want {
						t.Errorf("virt-api replicas %d on 30 nodes, want %d", got, tc.want)
					}
					return
				}
			}
			t.Fatal("no virt-api planned")
		})
	}
}
