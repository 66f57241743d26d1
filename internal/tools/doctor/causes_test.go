package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func hasCause(r *Report, check string, parts ...string) bool {
	for _, c := range r.Causes {
		if c.Check != check {
			continue
		}
		ok := true
		for _, p := range parts {
			if !strings.Contains(c.Cause, p) {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func text(t *testing.T, r *Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestVMLine(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   []string
		not    []string
	}{
		{
			name:   "healthy: how many run, where",
			mutate: func(f *Facts) {},
			want:   []string{"2 VMs running (on node-1: 2)"},
			not:    []string{"lifecycle"},
		},
		{
			name: "control plane down: they keep running, lifecycle operations fail",
			mutate: func(f *Facts) {
				setPodReady(f, "virt-controller", false)
				f.Nodes["node-2"] = readyNode("node-2")
				f.Workloads = Workloads{VMIs: 4, VMIsRunning: 3, ByPhase: map[string]int{"Running": 3, "Pending": 1}, RunningByNode: map[string]int{"node-1": 1, "node-2": 2}}
			},
			want: []string{"3 VMs keep running (on node-2: 2, node-1: 1)", "lifecycle operations (create, start, stop, migrate, console) fail", "VMIs also 1 Pending wait for virt-controller"},
		},
		{
			name: "none running",
			mutate: func(f *Facts) {
				removePods(f, "virt-api")
				f.Workloads = Workloads{ByPhase: map[string]int{}, RunningByNode: map[string]int{}}
			},
			want: []string{"No VM is running", "lifecycle operations (create, start) fail"},
		},
		{
			name: "VMs on a NotReady node may be down",
			mutate: func(f *Facts) {
				n := readyNode("node-2")
				n.Status.Conditions[0].Status = corev1.ConditionUnknown
				f.Nodes["node-2"] = n
				f.Workloads.VMIsRunning = 3
				f.Workloads.RunningByNode = map[string]int{"node-1": 2, "node-2": 1}
			},
			want: []string{"3 VMs running", "1 of them on NotReady nodes (node-2) may not be running"},
		},
		{
			name:   "VMIs not listable",
			mutate: func(f *Facts) { f.Reads[ReadVMIs] = forbidden("virtualmachineinstances") },
			want:   []string{"VMs: not counted"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyFacts()
			tc.mutate(f)
			r := Run(f)
			for _, w := range tc.want {
				if !strings.Contains(r.VMs, w) || !strings.Contains(r.Reason, w) {
					t.Errorf("VM line %q (reason %q) lacks %q", r.VMs, r.Reason, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(r.VMs, w) {
					t.Errorf("VM line %q has %q", r.VMs, w)
				}
			}
			if !strings.Contains(text(t, r), "  VMs: "+r.VMs) {
				t.Errorf("the text verdict lacks the VM line")
			}
		})
	}
	// Without KubeVirt's VM APIs there is no line.
	f := healthyFacts()
	f.Reads[ReadVMIs], f.Reads[ReadVMs] = ErrAbsent, ErrAbsent
	if r := Run(f); r.VMs != "" {
		t.Errorf("VM line %q without the VMI API", r.VMs)
	}
}

func pressured(f *Facts, node string, t corev1.NodeConditionType) {
	f.Nodes[node].Status.Conditions = append(f.Nodes[node].Status.Conditions, corev1.NodeCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory", Message: "kubelet has insufficient memory available",
		LastTransitionTime: metav1.NewTime(testNow.Add(-7 * time.Minute)),
	})
}

func TestNodePressure(t *testing.T) {
	// Pressure alone: a warning, no cause.
	f := healthyFacts()
	pressured(f, "node-1", corev1.NodeMemoryPressure)
	r := Run(f)
	c := findCheck(t, r, CheckNodePressure)
	if c.Status != Warn || !strings.Contains(c.Evidence, "node node-1 is under MemoryPressure since 2026-10-01T11:53:00Z (7m0s ago)") || !strings.Contains(c.Hint, "describe nodes node-1") {
		t.Errorf("node pressure check: %s %q %q", c.Status, c.Evidence, c.Hint)
	}
	if r.Verdict != Degraded || len(r.Causes) != 0 {
		t.Errorf("pressure without flapping: verdict %s, causes %v", r.Verdict, r.Causes)
	}

	// Pressure under a component that flaps: the likely cause.
	f = healthyFacts()
	pressured(f, "node-1", corev1.NodeMemoryPressure)
	setPodReady(f, "virt-controller", false)
	r = Run(f)
	if r.Verdict != ControlPlaneDown || !hasCause(r, CheckNodePressure, "node node-1 is under MemoryPressure", "virt-controller flaps (1 of 1 pods not ready)") {
		t.Errorf("verdict %s, causes %+v", r.Verdict, r.Causes)
	}
	if !strings.Contains(r.Reason, "Likely cause: node node-1 is under MemoryPressure") {
		t.Errorf("reason %q does not name the cause", r.Reason)
	}
	if !strings.Contains(text(t, r), "Likely cause (controlplane/node-pressure): node node-1") {
		t.Errorf("text lacks the likely cause:\n%s", text(t, r))
	}

	// An evicted pod flaps too; disk pressure counts.
	f = healthyFacts()
	pressured(f, "node-1", corev1.NodeDiskPressure)
	ev := componentPod("virt-api", "evict", "node-1", false)
	ev.Status.Phase, ev.Status.Reason = corev1.PodFailed, "Evicted"
	f.Pods = append(f.Pods, ev)
	if r = Run(f); !hasCause(r, CheckNodePressure, "under DiskPressure", "virt-api flaps", "1 evicted") {
		t.Errorf("causes %+v", r.Causes)
	}

	// Requests near allocatable.
	f = healthyFacts()
	f.Nodes["node-1"].Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Gi"), corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourcePods: resource.MustParse("110")}
	big := componentPod("virt-api", "aaaaa", "node-1", true)
	big.Spec.Containers = []corev1.Container{{Name: "x", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("9700Mi"), corev1.ResourceCPU: resource.MustParse("1")}}}}
	f.NodePods = map[string][]corev1.Pod{"node-1": {big}}
	c = findCheck(t, Run(f), CheckNodePressure)
	if c.Status != Warn || !strings.Contains(c.Evidence, "its pods request 95% of its allocatable memory") || strings.Contains(c.Evidence, "CPU") {
		t.Errorf("allocatable: %s %q", c.Status, c.Evidence)
	}
	// Below the threshold: fine.
	big.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	f.NodePods = map[string][]corev1.Pod{"node-1": {big}}
	if c = findCheck(t, Run(f), CheckNodePressure); c.Status != OK {
		t.Errorf("1Gi of 10Gi: %s %q", c.Status, c.Evidence)
	}
}

// upgradingFacts is an upgrade v1.5.3 -> v1.5.0 where virt-handler is
// done and virt-controller's new pods cannot be scheduled.
func upgradingFacts() *Facts {
	f := healthyFacts()
	kv := &f.KubeVirts[0]
	kv.Status.TargetKubeVirtVersion, kv.Status.TargetDeploymentID = "v1.5.0", "id-2"
	kv.Status.ObservedDeploymentConfig = `{"id":"id-1","kubeVirtVersion":"v1.5.3","registry":"quay.io/kubevirt","infra":{}}`
	kv.Status.TargetDeploymentConfig = `{"id":"id-2","kubeVirtVersion":"v1.5.0","registry":"quay.io/kubevirt","infra":{"nodePlacement":{"nodeSelector":{"x":"y"}}}}`
	kv.Status.Conditions = append(kv.Status.Conditions, kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionProgressing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(testNow.Add(-20 * time.Minute))})
	for i := range kv.Status.Conditions {
		if kv.Status.Conditions[i].Type == kvv1.KubeVirtConditionProgressing && kv.Status.Conditions[i].Status == corev1.ConditionFalse {
			kv.Status.Conditions = append(kv.Status.Conditions[:i], kv.Status.Conditions[i+1:]...)
			break
		}
	}
	annotate := func(m *metav1.ObjectMeta, v, id string) {
		m.Annotations = map[string]string{vocab.InstallStrategyVersionAnnotation: v, vocab.InstallStrategyIdentifierAnnotation: id}
	}
	for i := range f.Deployments {
		d := &f.Deployments[i]
		annotate(&d.ObjectMeta, "v1.5.3", "id-1")
		d.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
	}
	ds := &f.DaemonSets[0]
	annotate(&ds.ObjectMeta, "v1.5.0", "id-2")
	ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable = 1, 1
	vc := f.deployment("virt-controller")
	annotate(&vc.ObjectMeta, "v1.5.0", "id-2")
	vc.Generation, vc.Spec.Replicas = 2, ptr.To(int32(2))
	vc.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", LastUpdateTime: metav1.NewTime(testNow.Add(-3 * time.Minute))}}}
	for i := range f.Pods {
		comp := f.Pods[i].Labels["kubevirt.io"]
		v := "v1.5.3"
		if comp == "virt-handler" {
			v = "v1.5.0"
		}
		f.Pods[i].Labels[vocab.AppVersionLabel] = v
	}
	old2 := componentPod("virt-controller", "bbbbb", "node-1", true)
	old2.Labels[vocab.AppVersionLabel] = "v1.5.3"
	f.Pods = append(f.Pods, old2)
	f.EndpointSlices = []discoveryv1.EndpointSlice{endpointSlice(f.Pods)}
	pending := componentPod("virt-controller", "new01", "", false)
	pending.Labels[vocab.AppVersionLabel] = "v1.5.0"
	pending.CreationTimestamp = metav1.NewTime(testNow.Add(-5 * time.Minute))
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}}
	f.Pods = append(f.Pods, pending)
	f.Strategies = append(f.Strategies, StrategyFacts{Name: "kubevirt-install-strategy-id2", ID: "id-2", Version: "v1.5.0", Kinds: f.Strategies[0].Kinds})
	f.Strategies[0].Name = "kubevirt-install-strategy-id1"
	f.Strategies[0].ID = "id-1"
	return f
}

func TestUpgradeStuck(t *testing.T) {
	f := upgradingFacts()
	r := Run(f)
	c := findCheck(t, r, CheckUpgrade)
	for _, want := range []string{
		"An upgrade v1.5.3 → v1.5.0 (deployment id-1 → id-2) is stuck at virt-controller since 2026-10-01T11:55:00Z (5m0s ago)",
		"1 pod cannot be scheduled (0/3 nodes are available",
		"changed: spec.infra, spec.imageTag v1.5.3 → v1.5.0",
		"versions now: virt-handler v1.5.0, virt-controller v1.5.0 (1 pod) and v1.5.3 (2 pods), virt-api v1.5.3",
		`patch kubevirts.kubevirt.io kubevirt --type merge -p '{"spec":{"imageTag":"v1.5.3"}}'`,
		"the previous install strategy (ConfigMap kubevirt-install-strategy-id1) is still there",
	} {
		if !strings.Contains(c.Evidence, want) {
			t.Errorf("upgrade evidence lacks %q:\n%s", want, c.Evidence)
		}
	}
	if c.Status != Fail || !strings.Contains(c.Hint, "describe deployments.apps virt-controller") {
		t.Errorf("upgrade check %s, hint %q", c.Status, c.Hint)
	}
	if r.Verdict != Degraded || !hasCause(r, CheckUpgrade, "stuck at virt-controller") || !strings.Contains(r.Reason, "Likely cause: An upgrade v1.5.3 → v1.5.0") {
		t.Errorf("verdict %s (%s), causes %+v", r.Verdict, r.Reason, r.Causes)
	}
	if strings.Count(r.Reason, "stuck at virt-controller") != 1 {
		t.Errorf("the stuck upgrade is said more than once: %s", r.Reason)
	}

	// A GitOps owner of the resource: roll back in its source.
	f = upgradingFacts()
	f.GitOps.Owners = []GitOpsOwner{{Kind: KindKustomization, Namespace: "flux-system", Name: "kubevirt", Objects: []string{"KubeVirt kubevirt/kubevirt"}, Ready: "True"}}
	if c = findCheck(t, Run(f), CheckUpgrade); !strings.Contains(c.Evidence, "owned by Flux Kustomization flux-system/kubevirt: revert the change in its source") {
		t.Errorf("rollback ignores the GitOps owner: %s", c.Evidence)
	}

	// Image pull failure on the new pod, operator gone.
	f = upgradingFacts()
	p := &f.Pods[len(f.Pods)-1]
	p.Spec.NodeName = "node-1"
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "virt-controller", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}}
	if c = findCheck(t, Run(f), CheckUpgrade); c.Status != Fail || !strings.Contains(c.Evidence, "1 pod in ImagePullBackOff (container virt-controller)") {
		t.Errorf("image pull: %s %q", c.Status, c.Evidence)
	}

	// Not yet updated, and no operator to do it.
	f = upgradingFacts()
	f.Pods = f.Pods[:len(f.Pods)-1]
	vc := f.deployment("virt-controller")
	vc.Annotations[vocab.InstallStrategyIdentifierAnnotation] = "id-1"
	vc.Annotations[vocab.InstallStrategyVersionAnnotation] = "v1.5.3"
	vc.Status = appsv1.DeploymentStatus{Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1}
	removePods(f, "virt-operator")
	if c = findCheck(t, Run(f), CheckUpgrade); c.Status != Fail || !strings.Contains(c.Evidence, "stuck at virt-controller") || !strings.Contains(c.Evidence, "no operator runs to update it") {
		t.Errorf("no operator: %s %q", c.Status, c.Evidence)
	}
}

func TestUpgradeInProgressAndSkew(t *testing.T) {
	// In progress, not stuck: said, not a problem.
	f := upgradingFacts()
	f.Pods = f.Pods[:len(f.Pods)-1]
	r := Run(f)
	c := findCheck(t, r, CheckUpgrade)
	if c.Status != OK || !strings.Contains(c.Evidence, "is in progress since 2026-10-01T11:40:00Z (20m0s ago): virt-handler done, virt-controller rolling (1 of 2 updated, 1 available), virt-api waiting") {
		t.Errorf("in progress: %s %q", c.Status, c.Evidence)
	}
	if r.Verdict != Healthy || r.Upgrade == "" || !strings.Contains(r.Reason, "is in progress") || !strings.Contains(text(t, r), "  Upgrade: An upgrade v1.5.3 → v1.5.0") {
		t.Errorf("verdict %s, upgrade line %q, reason %q", r.Verdict, r.Upgrade, r.Reason)
	}
	// No progress for longer than noProgressAfter: stuck.
	f.deployment("virt-controller").Status.Conditions[0].LastUpdateTime = metav1.NewTime(testNow.Add(-30 * time.Minute))
	if c = findCheck(t, Run(f), CheckUpgrade); c.Status != Fail || !strings.Contains(c.Evidence, "no progress for 30m0s") {
		t.Errorf("no progress: %s %q", c.Status, c.Evidence)
	}

	// No upgrade, one version: fine.
	f = healthyFacts()
	c = findCheck(t, Run(f), CheckUpgrade)
	if c.Status != OK || !strings.Contains(c.Evidence, "no update in progress: deployment id-1, version v1.5.3") {
		t.Errorf("steady: %s %q", c.Status, c.Evidence)
	}
	// Skew without an upgrade.
	for i := range f.Pods {
		f.Pods[i].Labels[vocab.AppVersionLabel] = "v1.5.3"
	}
	f.Pods[0].Labels[vocab.AppVersionLabel] = "v1.5.0"
	if c = findCheck(t, Run(f), CheckUpgrade); c.Status != Warn || !strings.Contains(c.Evidence, "yet the components run different versions: virt-handler v1.5.3, virt-controller v1.5.3, virt-api v1.5.0") {
		t.Errorf("skew: %s %q", c.Status, c.Evidence)
	}
}

func TestGitOpsOwners(t *testing.T) {
	refs := ownerRefs(map[string]string{fluxKSName: "kubevirt", fluxKSNamespace: "flux-system", fluxHRName: "virtop", fluxHRNamespace: "flux-system", argoInstanceLabel: "ignored"},
		map[string]string{argoTrackingID: "argocd_kubevirt:kubevirt.io/KubeVirt:kubevirt/kubevirt"})
	want := []string{"Kustomization flux-system/kubevirt", "HelmRelease flux-system/virtop", "Application argocd/kubevirt"}
	if len(refs) != len(want) {
		t.Fatalf("refs %+v", refs)
	}
	for i, r := range refs {
		if r.key() != want[i] {
			t.Errorf("ref %d = %s, want %s", i, r.key(), want[i])
		}
	}
	if r := ownerRefs(map[string]string{argoInstanceLabel: "kubevirt"}, nil); len(r) != 1 || !r[0].anyNamespace || r[0].name != "kubevirt" {
		t.Errorf("instance label: %+v", r)
	}
	if r := ownerRefs(map[string]string{vocab.AppInstanceLabel: "kubevirt"}, nil); len(r) != 0 {
		t.Errorf("Helm's instance label taken for Argo CD's: %+v", r)
	}

	owned := []string{"KubeVirt kubevirt/kubevirt"}
	failed := GitOpsOwner{Kind: KindKustomization, Namespace: "flux-system", Name: "kubevirt", Objects: owned, Via: "labels",
		Ready: "False", Reason: "BuildFailed", Message: "kustomize build failed: accumulating resources: Get \"https://example.com/base\": dial tcp: i/o timeout",
		Since: testNow.Add(-12 * time.Minute), Source: "GitRepository flux-system/fleet path ./kubevirt",
		SourceProblem: "its source GitRepository flux-system/fleet is not Ready either (GitOperationFailed: timeout)"}
	tests := []struct {
		name    string
		owner   GitOpsOwner
		status  Status
		group   Group
		verdict Verdict
		want    []string
		hint    string
	}{
		{"Flux build failed", failed, Fail, GroupCluster, Degraded,
			[]string{"Flux Kustomization flux-system/kubevirt, which applies KubeVirt kubevirt/kubevirt, is not Ready since 2026-10-01T11:48:00Z (12m0s ago): BuildFailed: kustomize build failed", "it builds from GitRepository flux-system/fleet path ./kubevirt", "GitOperationFailed"},
			"flux reconcile kustomization kubevirt -n flux-system --with-source"},
		{"Flux ready", GitOpsOwner{Kind: KindHelmRelease, Namespace: "flux-system", Name: "virtop", Objects: owned, Ready: "True", Revision: "0.1.0"}, OK, GroupCluster, Healthy,
			[]string{"Flux HelmRelease flux-system/virtop applies KubeVirt kubevirt/kubevirt: Ready, revision 0.1.0"}, ""},
		{"Flux suspended", GitOpsOwner{Kind: KindKustomization, Namespace: "flux-system", Name: "kubevirt", Objects: owned, Ready: "True", Suspended: true}, Warn, GroupCluster, Degraded,
			[]string{"is suspended"}, "get kustomizations.kustomize.toolkit.fluxcd.io kubevirt"},
		{"Argo degraded", GitOpsOwner{Kind: KindApplication, Namespace: "argocd", Name: "kubevirt", Objects: owned, Ready: "Degraded", Sync: "Synced",
			Operation: "Failed: one or more objects failed to apply", Source: "https://git.example.com/fleet.git path kubevirt at main"}, Fail, GroupCluster, Degraded,
			[]string{"Argo CD Application argocd/kubevirt, which applies KubeVirt kubevirt/kubevirt, is Degraded (health Degraded, sync Synced): last sync Failed: one or more objects failed to apply", "its source: https://git.example.com/fleet.git path kubevirt at main"},
			"argocd app get argocd/kubevirt"},
		{"Argo out of sync", GitOpsOwner{Kind: KindApplication, Namespace: "argocd", Name: "kubevirt", Objects: owned, Ready: "Healthy", Sync: "OutOfSync"}, Warn, GroupCluster, Degraded,
			[]string{"health Healthy, sync OutOfSync"}, "applications.argoproj.io kubevirt"},
		{"owner API gone", GitOpsOwner{Kind: KindKustomization, Namespace: "flux-system", Name: "kubevirt", Objects: owned, Via: "labels x", Err: ErrAbsent}, Warn, GroupInfo, Healthy,
			[]string{"the Kustomization API is not served"}, "get kustomizations.kustomize.toolkit.fluxcd.io -A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyFacts()
			f.GitOps = GitOpsFacts{Examined: owned, Owners: []GitOpsOwner{tc.owner}}
			r := Run(f)
			c := findCheck(t, r, CheckGitOps)
			if c.Status != tc.status || c.Group != tc.group || r.Verdict != tc.verdict {
				t.Errorf("%s group %d, verdict %s; want %s group %d, %s: %s", c.Status, c.Group, r.Verdict, tc.status, tc.group, tc.verdict, c.Evidence)
			}
			for _, w := range tc.want {
				if !strings.Contains(c.Evidence, w) {
					t.Errorf("evidence %q lacks %q", c.Evidence, w)
				}
			}
			if !strings.Contains(c.Hint, tc.hint) {
				t.Errorf("hint %q lacks %q", c.Hint, tc.hint)
			}
			if tc.status == Fail && (!hasCause(r, CheckGitOps, tc.owner.String()) || !strings.Contains(r.Reason, "Likely cause: "+tc.owner.String())) {
				t.Errorf("a failed owner is not the likely cause: %s / %+v", r.Reason, r.Causes)
			}
		})
	}

	// With the control plane down, the failed owner is named as its
	// likely cause.
	f := healthyFacts()
	removePods(f, "virt-api")
	f.GitOps = GitOpsFacts{Examined: owned, Owners: []GitOpsOwner{failed}}
	r := Run(f)
	if r.Verdict != ControlPlaneDown || !hasCause(r, CheckGitOps, "BuildFailed") {
		t.Errorf("verdict %s, causes %+v", r.Verdict, r.Causes)
	}

	// No owner: fine, and says what it looked at.
	f = healthyFacts()
	f.GitOps = GitOpsFacts{Examined: []string{"KubeVirt kubevirt/kubevirt", "Namespace kubevirt"}}
	if c := findCheck(t, Run(f), CheckGitOps); c.Status != OK || !strings.Contains(c.Evidence, "no GitOps owner: no Flux or Argo CD label or tracking annotation on KubeVirt kubevirt/kubevirt, Namespace kubevirt") {
		t.Errorf("no owner: %s %q", c.Status, c.Evidence)
	}
}

func TestReportJSONAndHeader(t *testing.T) {
	f := healthyFacts()
	f.Where = Where{Kubeconfig: "", KubeconfigFile: "/home/u/.kube/config", KubeconfigFiles: []string{"/home/u/.kube/config"}, KubeconfigSource: KubeconfigFromDefault,
		Context: "prod", ContextSource: ContextFromCurrent, Server: "https://prod:6443", User: "admin", Namespace: testNS}
	f.Prometheus = &PromFacts{URL: "https://api/x", Source: PromSource{URL: "https://api/x", Via: ViaServiceProxy, Auth: AuthKubeconfig, Resource: "monitoring/k8s", Service: "monitoring/prometheus-operated port web", Answered: true, Version: "2.42.0"}}
	r := Run(f)
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"kubeconfig": "/home/u/.kube/config", "kubeconfigSource": "default", "context": "prod", "contextSource": "current-context", "server": "https://prod:6443", "user": "admin", "namespace": testNS} {
		if got[k] != want {
			t.Errorf("JSON %s = %v, want %v", k, got[k], want)
		}
	}
	for _, k := range []string{"reason", "headline", "causes", "upgrade", "vms", "prometheus", "checks", "kubeconfigFiles"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	prom := got["prometheus"].(map[string]any)
	if prom["resource"] != "monitoring/k8s" || prom["via"] != "service-proxy" || prom["answered"] != true {
		t.Errorf("JSON prometheus = %v", prom)
	}
	vms := got["vms"].(map[string]any)
	if vms["running"] != float64(2) || vms["runningByNode"].(map[string]any)["node-1"] != float64(2) {
		t.Errorf("JSON vms = %v", vms)
	}

	out := text(t, r)
	lines := strings.Split(out, "\n")
	wantFirst := []string{
		"Kubeconfig: /home/u/.kube/config (the default file)",
		"Context:    prod (only the kubeconfig's current-context: no --context given; pass --context prod to be sure of the cluster)",
		"API server: https://prod:6443",
		"User:       admin",
		"Namespace:  kubevirt",
		"Prometheus: monitoring/k8s answered (Prometheus 2.42.0), through the API server's service proxy with the kubeconfig's credentials (Service monitoring/prometheus-operated port web): https://api/x",
	}
	for i, w := range wantFirst {
		if lines[i] != w {
			t.Errorf("header line %d = %q, want %q", i, lines[i], w)
		}
	}

	// Without Prometheus: null in JSON, said in the header.
	f = healthyFacts()
	r = Run(f)
	buf.Reset()
	_ = r.WriteJSON(&buf)
	if !strings.Contains(buf.String(), `"prometheus": null`) || !strings.Contains(text(t, r), "Prometheus: not asked") {
		t.Errorf("no Prometheus: %s", buf.String())
	}
}

func TestPromUnreachableSaysWhy(t *testing.T) {
	f := healthyFacts()
	f.Prometheus = &PromFacts{Err: errors.New("--prometheus auto: no Prometheus resource selects KubeVirt's ServiceMonitor"), Source: PromSource{Via: ViaServiceProxy, Error: "--prometheus auto: no Prometheus resource selects KubeVirt's ServiceMonitor"}}
	r := Run(f)
	c := findCheck(t, r, CheckPromTarget)
	if c.Status != Skipped || !strings.Contains(c.Evidence, "no Prometheus resource selects") || !strings.Contains(text(t, r), "Prometheus: none found, through the API server's service proxy") {
		t.Errorf("%s %q\n%s", c.Status, c.Evidence, text(t, r))
	}
}

// The check list and the doc agree: every check the code runs is
// documented (docs/doctor.md, doctor_doc_test.go) — here, every check of
// a full run is among CheckNames.
func TestCheckNamesComplete(t *testing.T) {
	f := healthyFacts()
	f.Prometheus = &PromFacts{URL: "http://p"}
	names := map[string]bool{}
	for _, n := range CheckNames() {
		names[n] = true
	}
	r := Run(f)
	if len(r.Checks) != len(names) {
		t.Errorf("%d checks ran, CheckNames lists %d", len(r.Checks), len(names))
	}
	for _, c := range r.Checks {
		if !names[c.Name] {
			t.Errorf("check %s is not in CheckNames", c.Name)
		}
	}
}
