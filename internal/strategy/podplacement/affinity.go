package podplacement

import (
	corev1 "k8s.io/api/core/v1"
)

// mergeAffinity adds the terms of extra to those of pod: node affinity,
// pod affinity and pod anti-affinity each keep the pod's terms first. extra
// is owned by the caller's result.
func mergeAffinity(pod, extra *corev1.Affinity) *corev1.Affinity {
	if pod == nil {
		return extra
	}
	if na := extra.NodeAffinity; na != nil {
		if pod.NodeAffinity == nil {
			pod.NodeAffinity = na
		} else {
			mergeNodeAffinity(pod.NodeAffinity, na)
		}
	}
	if pa := extra.PodAffinity; pa != nil {
		if pod.PodAffinity == nil {
			pod.PodAffinity = pa
		} else {
			mergePodTerms(&pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, &pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	if paa := extra.PodAntiAffinity; paa != nil {
		if pod.PodAntiAffinity == nil {
			pod.PodAntiAffinity = paa
		} else {
			mergePodTerms(&pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, &pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
				paa.RequiredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	return pod
}

// mergeNodeAffinity appends extra's required node selector terms (ORed
// with the pod's) and its preferred terms to own's.
func mergeNodeAffinity(own, extra *corev1.NodeAffinity) {
	if req := extra.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		if own.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			own.RequiredDuringSchedulingIgnoredDuringExecution = req
		} else {
			terms := &own.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			*terms = append(*terms, req.NodeSelectorTerms...)
		}
	}
	own.PreferredDuringSchedulingIgnoredDuringExecution = append(
		own.PreferredDuringSchedulingIgnoredDuringExecution, extra.PreferredDuringSchedulingIgnoredDuringExecution...)
}

// mergePodTerms appends the required and preferred terms of a pod
// (anti-)affinity to the pod's own.
func mergePodTerms(required *[]corev1.PodAffinityTerm, preferred *[]corev1.WeightedPodAffinityTerm,
	extraRequired []corev1.PodAffinityTerm, extraPreferred []corev1.WeightedPodAffinityTerm) {
	*required = append(*required, extraRequired...)
	*preferred = append(*preferred, extraPreferred...)
}
