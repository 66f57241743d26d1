package podplacement

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
)

// Node role labels upstream's default placement uses.
const (
	controlPlaneRoleKey = "node-role.kubernetes.io/control-plane"
	masterRoleKey       = "node-role.kubernetes.io/master"
	workerRoleKey       = "node-role.kubernetes.io/worker"
)

// PlaceInfra places a control-plane pod (virt-api, virt-controller,
// virt-exportproxy, the dump-install-strategy Job): by the user's infra
// placement when there is one, else by upstream's default
// (ControlPlaneDefault). The node selector always gains
// kubernetes.io/os: linux.
func PlaceInfra(pod *corev1.PodSpec, infra config.Placement) {
	Place(pod, infra, ControlPlaneDefault())
}

// ControlPlaneDefault is upstream's default for infra components when the
// user gives no placement (since v1.3.0): required on a control-plane (or
// legacy master) node, preferring one that is not also a worker, tolerating
// their NoSchedule taints.
func ControlPlaneDefault() config.Placement {
	exists := func(key string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpExists}}}
	}
	return config.Placement{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{exists(controlPlaneRoleKey), exists(masterRoleKey)},
			},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: workerRoleKey, Operator: corev1.NodeSelectorOpDoesNotExist,
				}}},
			}},
		}},
		Tolerations: []corev1.Toleration{
			{Key: controlPlaneRoleKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: masterRoleKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
	}
}
