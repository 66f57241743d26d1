package uninstall_test

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/uninstall"
)

func TestNodeCleanupJob(t *testing.T) {
	cfg := kvtest.Config(t, "v1.9.0", func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageRegistry = "registry.example.com/kv"
		kv.Spec.ImagePullPolicy = corev1.PullIfNotPresent
		kv.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
	})
	job := uninstall.NodeCleanupJob(cfg, "worker-1")
	pod := job.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("containers: %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	var mounts []string
	for _, v := range pod.Volumes {
		if v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectory {
			t.Errorf("volume %s is not a hostPath of an existing directory: %+v", v.Name, v.VolumeSource)
			continue
		}
		mounts = append(mounts, v.HostPath.Path)
	}
	var at []string
	for _, m := range c.VolumeMounts {
		at = append(at, m.MountPath)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"namespace", job.Namespace, "kubevirt"},
		{"name is the node's", job.Name, uninstall.NodeCleanupJobName("worker-1")},
		{"node annotation", job.Annotations[uninstall.NodeCleanupNodeAnnotation], "worker-1"},
		{"component label", job.Labels["app.kubernetes.io/component"], uninstall.NodeCleanupComponent},
		{"pod component label", job.Spec.Template.Labels["app.kubernetes.io/component"], uninstall.NodeCleanupComponent},
		{"runs on the node itself", pod.NodeName, "worker-1"},
		{"whatever its taints", pod.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		{"once", *job.Spec.BackoffLimit, int32(0)},
		{"bounded", *job.Spec.ActiveDeadlineSeconds, int64(uninstall.NodeCleanupDeadlineSeconds)},
		{"never restarted", pod.RestartPolicy, corev1.RestartPolicyNever},
		{"no API token", *pod.AutomountServiceAccountToken, false},
		{"virt-handler's image", c.Image, "registry.example.com/kv/virt-handler:v1.9.0"},
		{"pull policy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"pull secrets", pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "pull"}}},
		{"privileged", *c.SecurityContext.Privileged, true},
		{"as root", *c.SecurityContext.RunAsUser, int64(0)},
		{"host directories", mounts, []string{"/var/run", "/var/lib"}},
		{"mounted under /host", at, []string{"/host/var/run", "/host/var/lib"}},
		{"a shell script", c.Command[:2], []string{"/bin/sh", "-c"}},
	} {
		if !equalAny(tc.got, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}

	digest := kvtest.Config(t, "v1.9.0", func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageRegistry = "registry.example.com/kv"
	})
	digest.ImageDigests = map[string]string{"virt-handler": "sha256:" + strings.Repeat("a", 64)}
	if got := uninstall.NodeCleanupImage(digest); got != "registry.example.com/kv/virt-handler@sha256:"+strings.Repeat("a", 64) {
		t.Errorf("a pinned virt-handler: image %s", got)
	}
}

func equalAny(a, b any) bool {
	switch x := a.(type) {
	case []string:
		return slices.Equal(x, b.([]string))
	case []corev1.Toleration:
		y := b.([]corev1.Toleration)
		return len(x) == len(y) && (len(x) == 0 || x[0] == y[0])
	case []corev1.LocalObjectReference:
		return slices.Equal(x, b.([]corev1.LocalObjectReference))
	}
	return a == b
}

func TestNodeCleanupJobName(t *testing.T) {
	long := strings.Repeat("n", 253)
	a, b := uninstall.NodeCleanupJobName("worker-1"), uninstall.NodeCleanupJobName("worker-2")
	if a == b {
		t.Errorf("two nodes, one Job name %s", a)
	}
	if a != uninstall.NodeCleanupJobName("worker-1") {
		t.Error("the name of a node's Job changes")
	}
	for _, n := range []string{a, uninstall.NodeCleanupJobName(long)} {
		// A Job's name must leave room for its pods' (63 characters).
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 || len(n) > 52 {
			t.Errorf("Job name %q: %v (length %d)", n, errs, len(n))
		}
	}
}

func TestNeedsCleanup(t *testing.T) {
	n := &corev1.Node{}
	if uninstall.NeedsCleanup(n) {
		t.Error("a node virt-handler never ran on needs cleanup")
	}
	n.Annotations = map[string]string{uninstall.HeartbeatAnnotation: "2026-12-06T10:00:00Z"}
	if !uninstall.NeedsCleanup(n) {
		t.Error("a node with virt-handler's heartbeat does not need cleanup")
	}
}

func TestNodeCleanupOutcome(t *testing.T) {
	job := func(cond batchv1.JobConditionType, reason string) *batchv1.Job {
		j := &batchv1.Job{}
		if cond != "" {
			j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: reason, Message: "the message"}}
		}
		return j
	}
	said := func(msg string, code int32) []corev1.Pod {
		return []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name:  uninstall.NodeCleanupContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg}},
		}}}}}
	}
	for _, tc := range []struct {
		name     string
		job      *batchv1.Job
		pods     []corev1.Pod
		done, ok bool
		message  string
	}{
		{"running", job("", ""), nil, false, false, ""},
		{"complete", job(batchv1.JobComplete, ""), said("removed 6 files\n", 0), true, true, "removed 6 files"},
		{"left something", job(batchv1.JobFailed, "BackoffLimitExceeded"), said("removed 2 files; left: /var/run/kubevirt/disk.img", 3), true, false, "removed 2 files; left: /var/run/kubevirt/disk.img"},
		{"failed without a word", job(batchv1.JobFailed, "BackoffLimitExceeded"), said("", 127), true, false, "exit code 127 (Error)"},
		{"never ran", job(batchv1.JobFailed, "DeadlineExceeded"), nil, true, false, "DeadlineExceeded: the message"},
		{"its image not pulled", job(batchv1.JobFailed, "DeadlineExceeded"), []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name:  uninstall.NodeCleanupContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "r/virt-handler:v1.9.0"`}},
		}}}}}, true, false, `DeadlineExceeded: the message; its container was waiting: ImagePullBackOff: Back-off pulling image "r/virt-handler:v1.9.0"`},
	} {
		done, ok, msg := uninstall.NodeCleanupOutcome(tc.job, tc.pods)
		if done != tc.done || ok != tc.ok || msg != tc.message {
			t.Errorf("%s: got %v %v %q, want %v %v %q", tc.name, done, ok, msg, tc.done, tc.ok, tc.message)
		}
	}
}

// TestNodeCleanupScript runs the Job's own command on a directory laid
// out as virt-handler leaves a node, and on one that also holds a file
// that is not KubeVirt's to remove.
func TestNodeCleanupScript(t *testing.T) {
	if _, err := exec.LookPath("find"); err != nil {
		t.Skip("no find(1)")
	}
	script := uninstall.NodeCleanupJob(kvtest.Config(t, "v1.9.0", nil), "n").Spec.Template.Spec.Containers[0].Command[2]
	layout := func(t *testing.T) string {
		// Socket paths are limited to 108 bytes: a short directory.
		root, err := os.MkdirTemp("/tmp", "nc")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
		for _, d := range []string{"var/lib/kubelet/device-plugins", "var/lib/kubevirt-node-labeller", "var/run/kubevirt/daemons/pr", "var/run/kubevirt/container-disks", "var/run/kubevirt-private/a", "var/run/kubevirt-libvirt-runtimes"} {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range []string{"var/lib/kubelet/device-plugins/kubevirt-kvm.sock", "var/lib/kubelet/device-plugins/kubevirt-tun.sock", "var/lib/kubelet/device-plugins/kubelet.sock", "var/lib/kubelet/device-plugins/other-vendor.sock", "var/run/kubevirt/domain-notify.sock"} {
			l, err := net.Listen("unix", filepath.Join(root, s))
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}
		for _, f := range []string{"var/lib/kubevirt-node-labeller/virsh_domcapabilities.xml", "var/lib/kubevirt-node-labeller/capabilities.xml", "var/lib/kubelet/config.yaml"} {
			if err := os.WriteFile(filepath.Join(root, f), []byte("<x/>"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// The multipath monitor's mount target: an empty regular file.
		if err := os.WriteFile(filepath.Join(root, "var/run/kubevirt/daemons/pr/multipathd.socket"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	run := func(t *testing.T, root string) (string, int) {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "HOST_ROOT="+root, "TERMINATION_LOG="+filepath.Join(root, "termination-log"))
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		msg, rerr := os.ReadFile(filepath.Join(root, "termination-log"))
		if rerr != nil {
			t.Fatalf("no termination message (output %q): %v", out, rerr)
		}
		return strings.TrimSpace(string(msg)), code
	}
	exists := func(root, p string) bool {
		_, err := os.Lstat(filepath.Join(root, p))
		return err == nil
	}

	t.Run("what virt-handler leaves", func(t *testing.T) {
		root := layout(t)
		msg, code := run(t, root)
		if code != 0 || msg != "removed 6 files of KubeVirt's; nothing of KubeVirt's left" {
			t.Errorf("exit %d, said %q", code, msg)
		}
		for _, gone := range []string{"var/lib/kubelet/device-plugins/kubevirt-kvm.sock", "var/lib/kubevirt-node-labeller", "var/run/kubevirt", "var/run/kubevirt-private", "var/run/kubevirt-libvirt-runtimes"} {
			if exists(root, gone) {
				t.Errorf("%s is still there", gone)
			}
		}
		for _, kept := range []string{"var/lib/kubelet/device-plugins/kubelet.sock", "var/lib/kubelet/device-plugins/other-vendor.sock", "var/lib/kubelet/config.yaml", "var/lib/kubelet/device-plugins"} {
			if !exists(root, kept) {
				t.Errorf("%s, not KubeVirt's, was removed", kept)
			}
		}
		if msg, code := run(t, root); code != 0 || msg != "removed 0 files of KubeVirt's; nothing of KubeVirt's left" {
			t.Errorf("run again: exit %d, said %q", code, msg)
		}
	})
	t.Run("a file it may not remove", func(t *testing.T) {
		root := layout(t)
		if err := os.WriteFile(filepath.Join(root, "var/run/kubevirt/container-disks/disk.img"), []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		msg, code := run(t, root)
		if code != uninstall.ExitLeftOver || msg != "removed 6 files of KubeVirt's; left what is not KubeVirt's to remove: /var/run/kubevirt/container-disks/disk.img" {
			t.Errorf("exit %d, said %q", code, msg)
		}
		if !exists(root, "var/run/kubevirt/container-disks/disk.img") {
			t.Error("the regular file was removed")
		}
		if exists(root, "var/run/kubevirt/domain-notify.sock") {
			t.Error("the socket beside it was left")
		}
	})
}
