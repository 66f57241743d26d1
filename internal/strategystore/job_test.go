package strategystore

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func testConfig(t *testing.T, mutate func(*kvv1.KubeVirt)) *config.DeploymentConfig {
	t.Helper()
	return kvtest.Config(t, "v1.5.3", mutate)
}

func TestJobSpec(t *testing.T) {
	cfg := testConfig(t, func(kv *kvv1.KubeVirt) {
		kv.Spec.ImagePullPolicy = corev1.PullAlways
		kv.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull-b"}, {Name: "pull-a"}}
	})
	job := Job(cfg, "ghcr.io/virtop-dev/virtop:v0.2.0")
	pod := job.Spec.Template.Spec
	ctr := pod.Containers[0]
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"apiVersion", job.APIVersion, "batch/v1"},
		{"kind", job.Kind, "Job"},
		{"name", job.Name, "virtop-strategy-" + cfg.ID[:10]},
		{"namespace", job.Namespace, "kubevirt"},
		{"labels", job.Labels, map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.ManagedByValue}},
		{"identifier annotation", job.Annotations[vocab.InstallStrategyIdentifierAnnotation], cfg.ID},
		{"version annotation", job.Annotations[vocab.InstallStrategyVersionAnnotation], "v1.5.3"},
		{"pod kubevirt.io label", job.Spec.Template.Labels["kubevirt.io"], "virt-operator-strategy-dumper"},
		{"pod network policy label", job.Spec.Template.Labels["np.kubevirt.io/allow-access-cluster-services"], "true"},
		{"service account", pod.ServiceAccountName, "virtop-strategy-job"},
		{"restart policy", pod.RestartPolicy, corev1.RestartPolicyNever},
		{"containers", len(pod.Containers), 1},
		{"container name", ctr.Name, "install-strategy-upload"},
		{"image", ctr.Image, "ghcr.io/virtop-dev/virtop:v0.2.0"},
		{"command", ctr.Command, []string{"virtop", "dump-install-strategy"}},
		{"args", len(ctr.Args), 0},
		{"env config", env["VIRTOP_DEPLOYMENT_CONFIG"], cfg.JSON()},
		{"pull policy", ctr.ImagePullPolicy, corev1.PullAlways},
		{"pull secrets", pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull-a"}, {Name: "pull-b"}}},
		{"termination message", ctr.TerminationMessagePolicy, corev1.TerminationMessageFallbackToLogsOnError},
		// Restricted Pod Security.
		{"pod runAsNonRoot", *pod.SecurityContext.RunAsNonRoot, true},
		{"pod seccomp", pod.SecurityContext.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault},
		{"allowPrivilegeEscalation", *ctr.SecurityContext.AllowPrivilegeEscalation, false},
		{"capabilities", ctr.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}},
		{"capabilities added", len(ctr.SecurityContext.Capabilities.Add), 0},
		{"readOnlyRootFilesystem", *ctr.SecurityContext.ReadOnlyRootFilesystem, true},
		{"container runAsNonRoot", *ctr.SecurityContext.RunAsNonRoot, true},
		{"privileged", ctr.SecurityContext.Privileged, (*bool)(nil)},
		{"hostNetwork", pod.HostNetwork, false},
		{"volumes", len(pod.Volumes), 0},
		// Resources.
		{"cpu request", ctr.Resources.Requests.Cpu().String(), "100m"},
		{"memory request", ctr.Resources.Requests.Memory().String(), "192Mi"},
		{"cpu limit", ctr.Resources.Limits.Cpu().String(), "1"},
		{"memory limit", ctr.Resources.Limits.Memory().String(), "512Mi"},
		// Limits of the Job.
		{"backoffLimit", *job.Spec.BackoffLimit, int32(3)},
		{"activeDeadlineSeconds", *job.Spec.ActiveDeadlineSeconds, int64(600)},
		{"ttlSecondsAfterFinished", *job.Spec.TTLSecondsAfterFinished, int32(3600)},
		{"failure policy: exit 2 fails the Job", job.Spec.PodFailurePolicy.Rules[0].OnExitCodes.Values, []int32{2}},
		{"failure policy action", string(job.Spec.PodFailurePolicy.Rules[0].Action), "FailJob"},
		{"failure policy: disruption ignored", string(job.Spec.PodFailurePolicy.Rules[1].Action), "Ignore"},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	parsed, err := config.Parse([]byte(env["VIRTOP_DEPLOYMENT_CONFIG"]))
	if err != nil {
		t.Fatalf("the Job's config does not parse: %v", err)
	}
	if parsed.ID != cfg.ID {
		t.Errorf("the Job's config parses to ID %s, want %s", parsed.ID, cfg.ID)
	}
}

func TestJobPlacement(t *testing.T) {
	exists := func(key string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpExists}}}
	}
	// Upstream's default for infra components (and its strategy Job):
	// required control-plane or master, preferred not a worker.
	defaultAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			exists("node-role.kubernetes.io/control-plane"), exists("node-role.kubernetes.io/master"),
		}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.kubernetes.io/worker", Operator: corev1.NodeSelectorOpDoesNotExist}},
		}}},
	}}
	defaultTolerations := []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	infraAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{exists("example.com/infra")}},
	}}
	infraTolerations := []corev1.Toleration{{Key: "example.com/infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}

	tests := []struct {
		name         string
		infra        *kvv1.ComponentConfig
		nodeSelector map[string]string
		affinity     *corev1.Affinity
		tolerations  []corev1.Toleration
	}{
		{
			name:         "no infra placement: control plane",
			nodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			affinity:     defaultAffinity,
			tolerations:  defaultTolerations,
		},
		{
			name: "infra node selector only",
			infra: &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{
				NodeSelector: map[string]string{"example.com/infra": "true"},
			}},
			nodeSelector: map[string]string{"kubernetes.io/os": "linux", "example.com/infra": "true"},
		},
		{
			name: "infra affinity and tolerations",
			infra: &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{
				Affinity:    infraAffinity,
				Tolerations: infraTolerations,
			}},
			nodeSelector: map[string]string{"kubernetes.io/os": "linux"},
			affinity:     infraAffinity,
			tolerations:  infraTolerations,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, func(kv *kvv1.KubeVirt) { kv.Spec.Infra = tt.infra })
			pod := Job(cfg, "img").Spec.Template.Spec
			if !reflect.DeepEqual(pod.NodeSelector, tt.nodeSelector) {
				t.Errorf("nodeSelector %v, want %v", pod.NodeSelector, tt.nodeSelector)
			}
			if !reflect.DeepEqual(pod.Affinity, tt.affinity) {
				t.Errorf("affinity %+v, want %+v", pod.Affinity, tt.affinity)
			}
			if !reflect.DeepEqual(pod.Tolerations, tt.tolerations) {
				t.Errorf("tolerations %v, want %v", pod.Tolerations, tt.tolerations)
			}
		})
	}
}

func TestJobDeterministicAndNamedByID(t *testing.T) {
	a, b := testConfig(t, nil), testConfig(t, nil)
	if !reflect.DeepEqual(Job(a, "img"), Job(b, "img")) {
		t.Error("the same config gives different Jobs")
	}
	other := testConfig(t, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.6.0" })
	if Name(a.ID) == Name(other.ID) {
		t.Errorf("two deployments share the Job name %s", Name(a.ID))
	}
	if n := Name(a.ID); len(n) > 63 || !strings.HasPrefix(n, "virtop-strategy-") {
		t.Errorf("Job name %q", n)
	}
}

func TestPodTrouble(t *testing.T) {
	tests := []struct {
		name string
		pod  corev1.Pod
		want string
	}{
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, ""},
		{"unschedulable", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
		}}}}, "pod p cannot be scheduled (Unschedulable): 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."},
		{"image pull", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "install-strategy-upload", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}},
		}}}}, "pod p: container install-strategy-upload is waiting (ImagePullBackOff): Back-off pulling image"},
		{"exited", corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "install-strategy-upload", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "log line\nError: v9.9.9 is not in the catalog\n"}},
		}}}}, "pod p: container install-strategy-upload exited with code 2 (Error): Error: v9.9.9 is not in the catalog"},
		{"creating", corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		}}}}, ""},
	}
	for _, tt := range tests {
		if got := PodTrouble(&tt.pod); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	r := &Runner{}
	for n, want := range map[int]string{1: "10s", 2: "20s", 3: "40s", 5: "2m40s", 6: "5m0s", 20: "5m0s"} {
		if got := r.backoff(n).String(); got != want {
			t.Errorf("backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
