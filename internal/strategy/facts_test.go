package strategy

import (
	"slices"
	"sort"
	"testing"

	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
)

// v153Objects lists, per kind, the object names of upstream KubeVirt v1.5.3's
// install strategy (upstream-facts.md section 3.2), as rendered with the
// VMExport feature gate on. They are written out here from the facts, not
// taken from virtop's output. Deviations from upstream are deliberate:
//   - the CA ConfigMaps appear once each (upstream appends them twice);
//   - the monitoring Role/RoleBinding/ServiceMonitor/PrometheusRule are
//     always rendered and gated at plan time (upstream omits them from the
//     strategy when its one-shot ServiceAccount lookup fails).
var v153Objects = map[string][]string{
	"ServiceAccount": {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler"},
	"ClusterRole": {
		"instancetype.kubevirt.io:view", "kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy",
		"kubevirt-handler", "kubevirt.io:admin", "kubevirt.io:default", "kubevirt.io:edit", "kubevirt.io:migrate",
		"kubevirt.io:view",
		// virtop's: Prometheus's access to the operator's metrics
		// (docs/upstream-differences.md).
		"virtop-metrics-reader",
	},
	"ClusterRoleBinding": {
		"instancetype.kubevirt.io:view", "kubevirt-apiserver", "kubevirt-apiserver-auth-delegator",
		"kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler", "kubevirt.io:default",
		"virtop-metrics-reader",
	},
	"Role":        {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler", "kubevirt-monitoring"},
	"RoleBinding": {"kubevirt-apiserver", "kubevirt-controller", "kubevirt-exportproxy", "kubevirt-handler", "kubevirt-monitoring"},
	"CustomResourceDefinition": {
		"migrationpolicies.migrations.kubevirt.io",
		"virtualmachineclones.clone.kubevirt.io",
		"virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
		"virtualmachineclusterpreferences.instancetype.kubevirt.io",
		"virtualmachineexports.export.kubevirt.io",
		"virtualmachineinstancemigrations.kubevirt.io",
		"virtualmachineinstancepresets.kubevirt.io",
		"virtualmachineinstancereplicasets.kubevirt.io",
		"virtualmachineinstances.kubevirt.io",
		"virtualmachineinstancetypes.instancetype.kubevirt.io",
		"virtualmachinepools.pool.kubevirt.io",
		"virtualmachinepreferences.instancetype.kubevirt.io",
		"virtualmachinerestores.snapshot.kubevirt.io",
		"virtualmachines.kubevirt.io",
		"virtualmachinesnapshotcontents.snapshot.kubevirt.io",
		"virtualmachinesnapshots.snapshot.kubevirt.io",
	},
	"Service": {"kubevirt-operator-webhook", "kubevirt-prometheus-metrics", "virt-api", "virt-exportproxy"},
	"Secret": {
		"kubevirt-ca", "kubevirt-controller-certs", "kubevirt-export-ca", "kubevirt-exportproxy-certs",
		"kubevirt-operator-certs", "kubevirt-virt-api-certs", "kubevirt-virt-handler-certs",
		"kubevirt-virt-handler-server-certs",
	},
	// virtop adds its Grafana dashboard (docs/upstream-differences.md).
	"ConfigMap":                        {"kubevirt-ca", "kubevirt-export-ca", "virtop-kubevirt-control-plane-dashboard"},
	"Deployment":                       {"virt-api", "virt-controller", "virt-exportproxy"},
	"DaemonSet":                        {"virt-handler"},
	"ServiceMonitor":                   {"prometheus-kubevirt-rules"},
	"PrometheusRule":                   {"prometheus-kubevirt-rules"},
	"ValidatingWebhookConfiguration":   {"virt-api-validator", "virt-operator-validator"},
	"MutatingWebhookConfiguration":     {"virt-api-mutator"},
	"ValidatingAdmissionPolicy":        {"kubevirt-node-restriction-policy"},
	"ValidatingAdmissionPolicyBinding": {"kubevirt-node-restriction-binding"},
	"APIService":                       {"v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"},
	"SecurityContextConstraints":       {"kubevirt-controller", "kubevirt-handler"},
	"Route":                            {"virt-exportproxy"},
}

// generateFor renders v1.5.3, whose facts this file holds, unless mutate
// names another version.
// atRelease is generateFor's mutation for release v with VMExport on.
func atRelease(v string) func(*kvv1.KubeVirt) {
	return func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageTag = v
		withFeatureGates("VMExport")(kv)
	}
}

func generateFor(t testing.TB, mutate func(*kvv1.KubeVirt)) *Strategy {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.ImageTag = "v1.5.3"
	if mutate != nil {
		mutate(kv)
	}
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := Generate(cfg)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return s
}

func withFeatureGates(gates ...string) func(*kvv1.KubeVirt) {
	return func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: gates}
	}
}

func namesByKind(s *Strategy) map[string][]string {
	out := map[string][]string{}
	for _, o := range s.Objects {
		out[Kind(o)] = append(out[Kind(o)], o.GetName())
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

func TestFactsV153(t *testing.T) {
	got := namesByKind(generateFor(t, withFeatureGates("VMExport")))
	for kind, want := range v153Objects {
		if !slices.Equal(got[kind], want) {
			t.Errorf("%s: got %d %v\nwant %d %v", kind, len(got[kind]), got[kind], len(want), want)
		}
	}
	for kind, names := range got {
		_, listed := v153Objects[kind]
		_, counted := v153Counts[kind]
		if !listed && !counted && !partTwoKinds[kind] {
			t.Errorf("unexpected kind %s: %v", kind, names)
		}
	}
}

// partTwoKinds are kinds rendered but not yet listed in the facts above;
// none are left.
var partTwoKinds = map[string]bool{}

// v153Counts are kinds checked by count rather than by name: the common
// instancetypes and preferences bundle of v1.5.3 (common-instancetypes
// v1.3.1, upstream-facts.md section 3.2).
var v153Counts = map[string]int{
	"VirtualMachineClusterInstancetype": 44,
	"VirtualMachineClusterPreference":   43,
}

func TestFactsV153Counts(t *testing.T) {
	got := namesByKind(generateFor(t, withFeatureGates("VMExport")))
	for kind, want := range v153Counts {
		if len(got[kind]) != want {
			t.Errorf("%s: got %d, want %d", kind, len(got[kind]), want)
		}
	}
}

// With spec.configuration.commonInstancetypesDeployment.enabled false no
// instancetype or preference is rendered (the plan prunes those an earlier
// strategy applied).
func TestCommonInstancetypesDisabled(t *testing.T) {
	got := namesByKind(generateFor(t, func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.CommonInstancetypesDeployment = &kvv1.CommonInstancetypesDeployment{Enabled: ptr.To(false)}
	}))
	for kind := range v153Counts {
		if len(got[kind]) != 0 {
			t.Errorf("%s rendered while disabled: %v", kind, got[kind])
		}
	}
}

// Without the VMExport feature gate virt-exportproxy's Deployment and Route
// are not rendered (upstream v1.5.3 deletes them).
func TestVMExportGate(t *testing.T) {
	got := namesByKind(generateFor(t, nil))
	if want := []string{"virt-api", "virt-controller"}; !slices.Equal(got["Deployment"], want) {
		t.Errorf("Deployments without VMExport: %v, want %v", got["Deployment"], want)
	}
	// Its Route goes with it; its Service, RBAC and certificates stay, as
	// upstream keeps them.
	if len(got["Route"]) != 0 {
		t.Errorf("Routes without VMExport: %v, want none", got["Route"])
	}
}

// Every object carries a known stage, the managed-by label and the
// strategy annotations; objects come in stage order.
func TestEveryObjectStamped(t *testing.T) {
	s := generateFor(t, withFeatureGates("VMExport"))
	last := -1
	for _, o := range s.Objects {
		st, err := stage.Of(o)
		if err != nil {
			t.Fatal(err)
		}
		if st.Index() < last {
			t.Errorf("%s is out of stage order", KeyOf(o))
		}
		last = st.Index()
		if o.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
			t.Errorf("%s lacks app.kubernetes.io/managed-by: virtop", KeyOf(o))
		}
		if o.GetAnnotations()[vocab.InstallStrategyIdentifierAnnotation] != s.ID {
			t.Errorf("%s lacks the identifier annotation", KeyOf(o))
		}
	}
}

func generateErr(kv *kvv1.KubeVirt) (*Strategy, error) {
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		return nil, err
	}
	return Generate(cfg)
}
