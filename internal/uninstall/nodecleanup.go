package uninstall

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// What virt-handler leaves on a node. It removes none of it when it stops,
// and upstream's operator does not either; virtop's uninstall does, with a
// Job per node once virt-handler is gone from it (the controller's nodes
// step). Facts of upstream KubeVirt (v1.5.3 to v1.9.0): virt-handler's
// heartbeat annotation (staging/src/kubevirt.io/api/core/v1/types.go,
// VirtHandlerHeartbeat), the host paths of its DaemonSet
// (pkg/virt-operator/resource/generate/components/daemonsets.go), and what
// it writes there: its device plugins' sockets in the kubelet's directory
// (pkg/virt-handler/device-manager, kubevirt-<device>.sock), the node
// labeller's XML (pkg/virt-handler/node-labeller), sockets under
// /var/run/kubevirt (domain-notify.sock, the launchers'), and
// daemons/pr/multipathd.socket there: an empty regular file, the target on
// which its multipath monitor bind-mounts the host's multipathd socket
// (pkg/virt-handler/multipath-monitor), unmounted when it stops.
const (
	// HeartbeatAnnotation is the annotation virt-handler writes on its
	// node; a node that carries it has had a virt-handler. The cleanup
	// removes it last: a node without it needs no cleanup.
	HeartbeatAnnotation = "kubevirt.io/heartbeat"

	// NodeCleanupComponent is the app.kubernetes.io/component label value
	// of the cleanup Jobs and their pods.
	NodeCleanupComponent = "node-cleanup"
	// NodeCleanupNodeAnnotation names the Job's node (a node's name may be
	// longer than a label value).
	NodeCleanupNodeAnnotation = "virtop.dev/node"
	// NodeCleanupContainer is the name of the Job's container.
	NodeCleanupContainer = "node-cleanup"
	// NodeCleanupDeadlineSeconds bounds a Job: the script takes well under
	// a second; the rest is the image (already on the node: virt-handler
	// ran from it) and the pod's start.
	NodeCleanupDeadlineSeconds = 120
	// ExitLeftOver is the script's exit code when something it may not
	// remove is left; the termination message lists it.
	ExitLeftOver = 3
)

// The host directories the Job mounts, each at /host<path>. Two parents
// rather than each of virt-handler's directories: a hostPath of a missing
// directory is created by the container runtime, and the script must be
// able to remove KubeVirt's directories themselves.
var nodeCleanupMounts = []struct{ name, path string }{
	{"var-run", "/var/run"},
	{"var-lib", "/var/lib"},
}

// nodeCleanupScript removes, under /host, only what virt-handler writes,
// and never crosses a mount (-xdev): sockets of KubeVirt's device plugins
// in the kubelet's directory, the node labeller's XML files, and in
// KubeVirt's run directories sockets, the multipath monitor's empty mount
// target (unlinking a file still mounted on fails: it stays, and is
// listed) and then empty directories. A regular
// file under the run directories (a disk a VM still uses, a leaked mount)
// is not KubeVirt's to judge here: it is listed and left, and the Job
// exits ExitLeftOver. The last line of its output is its termination
// message, which the operator reports in an event. HOST_ROOT and
// TERMINATION_LOG, unset in the Job, let a test run it on a directory.
const nodeCleanupScript = `set -u
h=${HOST_ROOT:-/host}
tl=${TERMINATION_LOG:-/dev/termination-log}
n=0
plugins=$h/var/lib/kubelet/device-plugins
if [ -d "$plugins" ]; then
  n=$((n + $(find "$plugins" -maxdepth 1 -xdev -type s -name 'kubevirt-*.sock' -print -delete | wc -l)))
fi
labeller=$h/var/lib/kubevirt-node-labeller
if [ -d "$labeller" ]; then
  n=$((n + $(find "$labeller" -xdev -type f -name '*.xml' -print -delete | wc -l)))
  find "$labeller" -xdev -depth -type d -empty -delete
fi
for d in $h/var/run/kubevirt $h/var/run/kubevirt-private $h/var/run/kubevirt-libvirt-runtimes; do
  [ -d "$d" ] || continue
  n=$((n + $(find "$d" -xdev -type s -print -delete | wc -l)))
  n=$((n + $(find "$d" -xdev -type f -empty -path '*/daemons/pr/multipathd.socket' -print -delete 2>/dev/null | wc -l)))
  find "$d" -xdev -depth -type d -empty -delete
done
left=$(for d in $labeller $h/var/run/kubevirt $h/var/run/kubevirt-private $h/var/run/kubevirt-libvirt-runtimes; do [ -e "$d" ] && find "$d" -xdev ! -type d; done | sed "s|^$h||" | head -20 | tr '\n' ' ')
if [ -n "$left" ]; then
  echo "removed $n files of KubeVirt's; left what is not KubeVirt's to remove: $left" | tee "$tl"
  exit 3
fi
echo "removed $n files of KubeVirt's; nothing of KubeVirt's left" | tee "$tl"
`

// NodeCleanupJobName is the cleanup Job's name for a node: deterministic,
// so a pass after a crash finds the Job it created.
func NodeCleanupJobName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "virtop-node-cleanup-" + hex.EncodeToString(sum[:])[:10]
}

// NeedsCleanup reports whether a node has had a virt-handler whose files
// have not been removed.
func NeedsCleanup(n *corev1.Node) bool {
	_, ok := n.Annotations[HeartbeatAnnotation]
	return ok
}

// NodeCleanupImage is virt-handler's image of the installation: on every
// node that ran virt-handler it is already there, and it holds what the
// script needs (a POSIX shell, find; upstream's handler base image has
// bash, coreutils and findutils).
func NodeCleanupImage(cfg *config.DeploymentConfig) string {
	return cfg.Image(vocab.VirtHandler)
}

// NodeCleanupJob returns the Job that removes virt-handler's files from one
// node. It is pure. It runs on that node whatever its taints, as root and
// privileged (the files are root's, and a labelled host may confine an
// unprivileged container away from them), without an API token.
func NodeCleanupJob(cfg *config.DeploymentConfig, node string) *batchv1.Job {
	labels := map[string]string{
		vocab.ManagedByLabel:    vocab.ManagedByValue,
		vocab.AppComponentLabel: NodeCleanupComponent,
	}
	pod := corev1.PodSpec{
		NodeName:                     node,
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{{
			Name:            NodeCleanupContainer,
			Image:           NodeCleanupImage(cfg),
			ImagePullPolicy: cfg.ImagePullPolicy,
			Command:         []string{"/bin/sh", "-c", nodeCleanupScript},
			SecurityContext: &corev1.SecurityContext{
				Privileged: ptr.To(true),
				RunAsUser:  ptr.To(int64(0)),
			},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
	}
	for _, m := range nodeCleanupMounts {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: m.name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: m.path, Type: ptr.To(corev1.HostPathDirectory)},
		}})
		pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, corev1.VolumeMount{Name: m.name, MountPath: "/host" + m.path})
	}
	for _, s := range cfg.ImagePullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeCleanupJobName(node),
			Namespace:   cfg.Namespace,
			Labels:      labels,
			Annotations: map[string]string{NodeCleanupNodeAnnotation: node},
		},
		Spec: batchv1.JobSpec{
			// Once: the script is idempotent, but a second run would
			// find nothing and hide what the first said.
			BackoffLimit:          ptr.To(int32(0)),
			ActiveDeadlineSeconds: ptr.To(int64(NodeCleanupDeadlineSeconds)),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
}

// NodeCleanupOutcome reads a finished cleanup Job: done is false while it
// runs; ok says it removed everything of KubeVirt's; message is what its
// pod said, or why it failed.
func NodeCleanupOutcome(job *batchv1.Job, pods []corev1.Pod) (done, ok bool, message string) {
	said, waiting := "", ""
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != NodeCleanupContainer {
				continue
			}
			if t := cs.State.Terminated; t != nil {
				said = strings.TrimSpace(t.Message)
				if said == "" {
					said = fmt.Sprintf("exit code %d (%s)", t.ExitCode, t.Reason)
				}
			}
			// Why it never ran: an image that cannot be pulled.
			if w := cs.State.Waiting; w != nil && w.Reason != "" {
				waiting = strings.TrimSpace(w.Reason + ": " + w.Message)
			}
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true, said
		case batchv1.JobFailed:
			if said == "" {
				said = c.Reason + ": " + c.Message
				if waiting != "" {
					said += "; its container was waiting: " + waiting
				}
			}
			return true, false, said
		}
	}
	return false, false, ""
}
