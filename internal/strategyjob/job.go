// Package strategyjob runs the dump-install-strategy Job: for a KubeVirt
// version outside the operator's catalog, a pod of a virtop image whose
// catalog has it renders the strategy and writes its ConfigMap.
//
// The Job is built by a pure function (Job) and driven by Runner.Ensure,
// which the reconciler calls while the strategy ConfigMap is missing. Unlike
// upstream's Job it honours infra placement, passes restricted Pod Security,
// declares resources, carries static labels NetworkPolicies can allow, has a
// deadline, is retried with back-off when it fails, and its failure is
// reported (with the pod's reason, for example an unschedulable pod).
package strategyjob

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/virtop-dev/virtop/internal/components"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Names and values of the Job. The pod label kubevirt.io:
// virt-operator-strategy-dumper is upstream's, static so a NetworkPolicy can
// allow the pod to reach the API server.
const (
	// NamePrefix starts every strategy Job's name; the first ten hex digits
	// of the deployment ID follow.
	NamePrefix = "virtop-strategy-"
	// ContainerName is upstream's name of the Job's container.
	ContainerName = "install-strategy-upload"
	// PodLabelValue is the value of the kubevirt.io label of the Job's pod.
	PodLabelValue = "virt-operator-strategy-dumper"
	// EnvDeploymentConfig holds the DeploymentConfig as JSON.
	EnvDeploymentConfig = "VIRTOP_DEPLOYMENT_CONFIG"
	// Command is what the container runs.
	Command = "virtop"
	// Subcommand of Command.
	Subcommand = "dump-install-strategy"
	// ExitConfigError is the exit code of dump-install-strategy for errors a
	// retry cannot fix (bad config, a version outside the image's catalog);
	// the Job fails at once on it instead of using up its backoffLimit.
	ExitConfigError = 2
)

// Limits of one Job. A strategy renders in a few seconds; the deadline
// covers image pulls and scheduling, and turns an unschedulable pod into a
// reported failure instead of an install that waits forever.
const (
	BackoffLimit            = 3
	ActiveDeadlineSeconds   = 600
	TTLSecondsAfterFinished = 3600
)

// Resources of the container. Rendering and compressing a strategy (about
// 3.4 MB of YAML) peaks at about 125 MB resident (measured for v1.5.3),
// well under the memory limit.
var (
	CPURequest    = resource.MustParse("100m")
	MemoryRequest = resource.MustParse("192Mi")
	CPULimit      = resource.MustParse("1")
	MemoryLimit   = resource.MustParse("512Mi")
)

// Name is the Job's name for a deployment ID: deterministic, so a pass
// after a crash finds the Job it created.
func Name(id string) string {
	if len(id) > 10 {
		id = id[:10]
	}
	return NamePrefix + id
}

// Job returns the dump-install-strategy Job of a config, run from image.
// It is pure: the same config and image give the same Job.
func Job(cfg *config.DeploymentConfig, image string) *batchv1.Job {
	labels := map[string]string{
		vocab.InstallStrategyLabel: "",
		vocab.ManagedByLabel:       vocab.ManagedByValue,
	}
	annotations := map[string]string{
		vocab.InstallStrategyVersionAnnotation:    cfg.Version,
		vocab.InstallStrategyRegistryAnnotation:   cfg.Registry,
		vocab.InstallStrategyIdentifierAnnotation: cfg.ID,
	}
	pod := corev1.PodSpec{
		ServiceAccountName: vocab.OperatorServiceAccount,
		RestartPolicy:      corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Name:            ContainerName,
			Image:           image,
			ImagePullPolicy: cfg.ImagePullPolicy,
			Command:         []string{Command, Subcommand},
			// The operator's KV_IO_EXTRA_ENV_* variables, prefix stripped,
			// as upstream hands them to its Job (proxy settings, for one).
			// The signing key comes from the operator's Secret, resolved by
			// the kubelet: the pod's ServiceAccount needs no Secret access.
			Env: append(cfg.PassthroughEnvVars(),
				corev1.EnvVar{Name: EnvDeploymentConfig, Value: cfg.JSON()},
				corev1.EnvVar{Name: vocab.EnvStrategySigningKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: vocab.StrategySigningKeySecret},
					Key:                  vocab.StrategySigningKeyKey,
				}}}),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: CPURequest, corev1.ResourceMemory: MemoryRequest},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: CPULimit, corev1.ResourceMemory: MemoryLimit},
			},
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				ReadOnlyRootFilesystem:   ptr.To(true),
				RunAsNonRoot:             ptr.To(true),
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			// The error of a failed run lands in the pod's status, where
			// Ensure reads it for the KubeVirt condition.
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
	for _, s := range cfg.ImagePullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	components.PlaceInfraPod(&pod, cfg.Infra)
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        Name(cfg.ID),
			Namespace:   cfg.Namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To(int32(BackoffLimit)),
			ActiveDeadlineSeconds:   ptr.To(int64(ActiveDeadlineSeconds)),
			TTLSecondsAfterFinished: ptr.To(int32(TTLSecondsAfterFinished)),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
				{
					Action: batchv1.PodFailurePolicyActionFailJob,
					OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
						ContainerName: ptr.To(ContainerName),
						Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
						Values:        []int32{ExitConfigError},
					},
				},
				{
					// A pod evicted or preempted did not fail on its own.
					Action:          batchv1.PodFailurePolicyActionIgnore,
					OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
				},
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{
						vocab.AppLabel:           PodLabelValue,
						vocab.NetworkPolicyLabel: "true",
						vocab.ManagedByLabel:     vocab.ManagedByValue,
					},
					Annotations: map[string]string{vocab.InstallStrategyIdentifierAnnotation: cfg.ID},
				},
				Spec: pod,
			},
		},
	}
}
