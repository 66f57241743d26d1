package podplacement

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/config"
)

// podTerm and nodeTerm build distinguishable terms: the tests check where
// each one ends up.
func podTerm(key string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{TopologyKey: key}
}

func weighted(key string) corev1.WeightedPodAffinityTerm {
	return corev1.WeightedPodAffinityTerm{Weight: 1, PodAffinityTerm: podTerm(key)}
}

func nodeTerm(key string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpExists}}}
}

// upstreamPod is a pod spec as a release's template has it: its own node
// selector, affinity of every kind and a toleration.
func upstreamPod() *corev1.PodSpec {
	return &corev1.PodSpec{
		NodeSelector: map[string]string{"own": "pod"},
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{nodeTerm("pod-required")}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1, Preference: nodeTerm("pod-preferred")}},
			},
			PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("pod-affinity")},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{weighted("pod-affinity-preferred")},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("pod-anti")},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{weighted("pod-anti-preferred")},
			},
		},
		Tolerations: []corev1.Toleration{{Key: "pod-toleration", Operator: corev1.TolerationOpExists}},
	}
}

// userPlacement is a placement of every kind, one of whose node selector
// keys the pod already has.
func userPlacement() config.Placement {
	return config.Placement{
		NodeSelector: map[string]string{"own": "user", "zone": "a"},
		Affinity: &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{nodeTerm("user-required")}},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 2, Preference: nodeTerm("user-preferred")}},
			},
			PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("user-affinity")},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{weighted("user-affinity-preferred")},
			},
			PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{podTerm("user-anti")},
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{weighted("user-anti-preferred")},
			},
		},
		Tolerations: []corev1.Toleration{{Key: "user-toleration", Operator: corev1.TolerationOpExists}},
	}
}

// TestPlaceMergesEveryConcern: the user's placement is added to the pod's
// own, term by term, the pod's first; the pod's node selector keys win.
func TestPlaceMergesEveryConcern(t *testing.T) {
	pod := upstreamPod()
	PlaceInfra(pod, userPlacement())

	want := upstreamPod()
	want.NodeSelector = map[string]string{"own": "pod", "zone": "a", corev1.LabelOSStable: "linux"}
	na := want.Affinity.NodeAffinity
	na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, nodeTerm("user-required"))
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{Weight: 2, Preference: nodeTerm("user-preferred")})
	pa := want.Affinity.PodAffinity
	pa.RequiredDuringSchedulingIgnoredDuringExecution = append(pa.RequiredDuringSchedulingIgnoredDuringExecution, podTerm("user-affinity"))
	pa.PreferredDuringSchedulingIgnoredDuringExecution = append(pa.PreferredDuringSchedulingIgnoredDuringExecution, weighted("user-affinity-preferred"))
	paa := want.Affinity.PodAntiAffinity
	paa.RequiredDuringSchedulingIgnoredDuringExecution = append(paa.RequiredDuringSchedulingIgnoredDuringExecution, podTerm("user-anti"))
	paa.PreferredDuringSchedulingIgnoredDuringExecution = append(paa.PreferredDuringSchedulingIgnoredDuringExecution, weighted("user-anti-preferred"))
	want.Tolerations = append(want.Tolerations, corev1.Toleration{Key: "user-toleration", Operator: corev1.TolerationOpExists})

	if !reflect.DeepEqual(want, pod) {
		t.Errorf("PlaceInfra with a user placement:\n%s", show(want, pod))
	}
}

// TestPlaceIntoEmptyPod: a pod without affinity takes the placement's own
// (a copy: changing the pod leaves the placement alone).
func TestPlaceIntoEmptyPod(t *testing.T) {
	user := userPlacement()
	pod := &corev1.PodSpec{}
	PlaceWorkloads(pod, user)
	if !reflect.DeepEqual(userPlacement().Affinity, pod.Affinity) {
		t.Errorf("affinity:\n%s", show(userPlacement().Affinity, pod.Affinity))
	}
	pod.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = "changed"
	if got := user.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey; got != "user-affinity" {
		t.Errorf("the placement changed with the pod: %q", got)
	}
}

// TestDefaults: with no placement, the control plane takes upstream's
// control-plane default and virt-handler only the OS selector.
func TestDefaults(t *testing.T) {
	infra := &corev1.PodSpec{}
	PlaceInfra(infra, config.Placement{})
	want := &corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}
	def := ControlPlaneDefault()
	want.Affinity, want.Tolerations = def.Affinity, def.Tolerations
	if !reflect.DeepEqual(want, infra) {
		t.Errorf("PlaceInfra without placement:\n%s", show(want, infra))
	}
	terms := infra.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || terms[0].MatchExpressions[0].Key != controlPlaneRoleKey || terms[1].MatchExpressions[0].Key != masterRoleKey {
		t.Errorf("required terms %v, want a control-plane or master node", terms)
	}

	handler := &corev1.PodSpec{}
	PlaceWorkloads(handler, config.Placement{})
	if !reflect.DeepEqual(&corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}, handler) {
		t.Errorf("PlaceWorkloads without placement:\n%s", show(&corev1.PodSpec{NodeSelector: map[string]string{corev1.LabelOSStable: "linux"}}, handler))
	}
}

// show prints want and got as YAML for a failure message.
func show(want, got any) string {
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	return "want:\n" + string(w) + "got:\n" + string(g)
}
