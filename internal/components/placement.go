package components

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
)

// PlaceInfraPod places a pod the way infra components are placed: by the
// user's infra placement when there is one, else by upstream's default
// (required on a control-plane or master node, preferring one that is not a
// worker, tolerating their NoSchedule taints). The node selector always
// gains kubernetes.io/os: linux. The dump-install-strategy Job uses it.
func PlaceInfraPod(pod *corev1.PodSpec, infra config.Placement) {
	PlacePod(pod, infra, ControlPlanePlacement())
}

// Node role labels upstream's default placement uses.
const (
	controlPlaneRoleKey = "node-role.kubernetes.io/control-plane"
	masterRoleKey       = "node-role.kubernetes.io/master"
	workerRoleKey       = "node-role.kubernetes.io/worker"
)

// ControlPlanePlacement is upstream's default for infra components when the
// user gives no placement (since v1.3.0): required on a control-plane (or
// legacy master) node, preferring one that is not also a worker, tolerating
// their NoSchedule taints.
func ControlPlanePlacement() config.Placement {
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

// PlacePod merges a placement into a pod spec the way upstream's
// InjectPlacementMetadata does: with no placement the default applies; the
// node selector gains kubernetes.io/os: linux unless the placement names an
// OS, and keys the pod already has win; affinity terms are added to the
// pod's own; tolerations are appended after the pod's.
func PlacePod(pod *corev1.PodSpec, p, def config.Placement) {
	if p.IsZero() {
		p = def
	}
	selector := map[string]string{corev1.LabelOSStable: "linux"}
	for k, v := range p.NodeSelector {
		selector[k] = v
	}
	if pod.NodeSelector == nil {
		pod.NodeSelector = map[string]string{}
	}
	for k, v := range selector {
		if _, ok := pod.NodeSelector[k]; !ok {
			pod.NodeSelector[k] = v
		}
	}
	if p.Affinity != nil {
		pod.Affinity = mergeAffinity(pod.Affinity, p.Affinity.DeepCopy())
	}
	for _, t := range p.Tolerations {
		pod.Tolerations = append(pod.Tolerations, *t.DeepCopy())
	}
}

// mergeAffinity adds the terms of extra to those of pod; extra is owned by
// the caller's result.
func mergeAffinity(pod, extra *corev1.Affinity) *corev1.Affinity {
	if pod == nil {
		return extra
	}
	if na := extra.NodeAffinity; na != nil {
		if pod.NodeAffinity == nil {
			pod.NodeAffinity = na
		} else {
			if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
				if pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
					pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
				} else {
					own := pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
					own.NodeSelectorTerms = append(own.NodeSelectorTerms, req.NodeSelectorTerms...)
				}
			}
			pod.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(
				pod.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, na.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	if pa := extra.PodAffinity; pa != nil {
		if pod.PodAffinity == nil {
			pod.PodAffinity = pa
		} else {
			pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pa.RequiredDuringSchedulingIgnoredDuringExecution...)
			pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	if paa := extra.PodAntiAffinity; paa != nil {
		if pod.PodAntiAffinity == nil {
			pod.PodAntiAffinity = paa
		} else {
			pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, paa.RequiredDuringSchedulingIgnoredDuringExecution...)
			pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	return pod
}
