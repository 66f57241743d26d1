package podplacement

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
)

// Place merges a placement into a pod spec the way upstream's
// InjectPlacementMetadata does: with no placement the default applies; the
// node selector gains kubernetes.io/os: linux unless the placement names an
// OS, and keys the pod already has win; affinity terms are added to the
// pod's own (mergeAffinity); tolerations are appended after the pod's.
func Place(pod *corev1.PodSpec, p, def config.Placement) {
	if p.IsZero() {
		p = def
	}
	mergeNodeSelector(pod, p.NodeSelector)
	if p.Affinity != nil {
		pod.Affinity = mergeAffinity(pod.Affinity, p.Affinity.DeepCopy())
	}
	for _, t := range p.Tolerations {
		pod.Tolerations = append(pod.Tolerations, *t.DeepCopy())
	}
}

// mergeNodeSelector adds kubernetes.io/os: linux and the placement's node
// selector (which may override the OS) to the pod's, whose own keys win.
func mergeNodeSelector(pod *corev1.PodSpec, placed map[string]string) {
	selector := map[string]string{corev1.LabelOSStable: "linux"}
	for k, v := range placed {
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
}
