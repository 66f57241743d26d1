package stage

// The one definition of the order in which virtop applies and removes a
// strategy's objects: the stages of a fresh install and of an update, the
// barriers between them, the rank of the kinds inside a stage, and what an
// uninstall waits for. The strategy sorts its objects by it
// (strategy.Sort: install order, then kind rank) and the applier follows
// it (internal/apply); internal/ownership derives the removal order of the
// managed kinds from it.

// Order is a sequence of stages and the stages that must be ready before
// the next one is applied.
type Order struct {
	// Name says which order this is, for logs.
	Name string
	// Stages in apply order; every stage appears once.
	Stages   []Stage
	barriers map[Stage]bool
}

// Barrier reports whether the stage must be ready before the next stage
// is applied.
func (o Order) Barrier(s Stage) bool { return o.barriers[s] }

// The apply orders. A fresh install starts every component at once —
// none needs another to start — and holds back only what needs virt-api
// serving: its webhooks (admission) and the instancetypes they validate.
// Starting virt-controller and virt-handler behind virt-api's readiness
// cost a whole rollout round (about a third of created -> Available on the
// local cluster). An update of a running system follows upstream:
// virt-handler first, virt-api last. Monitoring comes right after the
// Services it scrapes, so a slow component never delays the alerts that
// would report it.
var (
	Install = Order{
		Name: "install",
		Stages: []Stage{CRDs, RBAC, Certificates, Services, Monitoring,
			VirtController, VirtHandler, VirtExportProxy, VirtAPI, Admission, Instancetypes},
		barriers: map[Stage]bool{CRDs: true, VirtAPI: true},
	}
	Update = Order{
		Name: "update",
		Stages: []Stage{CRDs, RBAC, Certificates, Services, Monitoring,
			VirtHandler, VirtController, VirtExportProxy, VirtAPI, Admission, Instancetypes},
		barriers: map[Stage]bool{CRDs: true, VirtHandler: true, VirtController: true, VirtAPI: true},
	}
)

// Components lists the order's stages that roll out one of KubeVirt's
// components (a Deployment or DaemonSet named as the stage), in order.
func (o Order) Components() []string {
	var out []string
	for _, s := range o.Stages {
		if s.Component() {
			out = append(out, string(s))
		}
	}
	return out
}

// Component reports whether the stage rolls out one component, whose name
// is the stage's.
func (s Stage) Component() bool {
	switch s {
	case VirtAPI, VirtController, VirtHandler, VirtExportProxy:
		return true
	}
	return false
}

// All lists every stage in install order, the order a strategy's objects
// are sorted in.
var All = Install.Stages

// BestEffort reports whether a failure to apply an object of the stage
// leaves the rollout going: monitoring objects depend only on the
// monitoring APIs, which may vanish between the snapshot and the apply.
func (s Stage) BestEffort() bool { return s == Monitoring }

// kindRank orders kinds inside a stage: what others refer to comes first.
// Every kind virtop manages has a rank (internal/ownership's tests check
// it); uninstall removes them in the reverse order.
var kindRank = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 3,
	"ClusterRoleBinding": 4, "Role": 5, "RoleBinding": 6, "SecurityContextConstraints": 7,
	"Secret": 8, "ConfigMap": 9, "Service": 10, "ValidatingAdmissionPolicy": 11,
	"ValidatingAdmissionPolicyBinding": 12, "ValidatingWebhookConfiguration": 13,
	"MutatingWebhookConfiguration": 14, "APIService": 15, "Deployment": 16, "DaemonSet": 17,
	"Route": 18, "ServiceMonitor": 19, "PrometheusRule": 20, "PodDisruptionBudget": 21,
	"VirtualMachineClusterInstancetype": 22, "VirtualMachineClusterPreference": 23,
}

// KindRank is a kind's position in the apply order inside a stage; ok is
// false for a kind without a rank (sorted after every ranked one).
func KindRank(kind string) (rank int, ok bool) {
	r, ok := kindRank[kind]
	if !ok {
		return len(kindRank), false
	}
	return r, true
}

// RemovalBarrier reports whether an uninstall waits for every object of a
// kind to be gone before it deletes the next kinds: a webhook or an
// APIService without a backend must never block the deletion of the rest.
func RemovalBarrier(kind string) bool {
	return kind == "APIService" || kind == "MutatingWebhookConfiguration"
}
