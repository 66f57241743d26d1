//go:build long

package long

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// What client-go's leader election logs when a process leads, and when it
// starts trying to (compared ignoring case: klog and logr spell them
// differently).
const (
	acquiredLease   = "successfully acquired lease"
	attemptingLease = "attempting to acquire leader lease"
)

// Two operator replicas share the Lease virt-operator. The leader is
// killed with SIGKILL in the middle of an upgrade: cordoned nodes hold the
// rollout at its virt-controller barrier (the new virt-controller pods
// stay Pending) after virt-handler was upgraded. The other replica takes
// the Lease once it expires and finishes the rollout.
func TestLeaderKilledMidRollout(t *testing.T) {
	s := newSuite(t)
	s.ensureInstalled(fromVersion)
	leader := s.operator("--leader-elect").Start()
	waitLog(t, leader, acquiredLease, 2*time.Minute)
	standby := s.operator("--leader-elect").Start()
	waitLog(t, standby, attemptingLease, time.Minute)

	prev := s.mustKubeVirt().Status.ObservedDeploymentID
	s.cordon(true)
	t.Cleanup(func() { s.cordon(false) })
	s.setVersion(toVersion)
	poll.Eventually(t, "the leader to upgrade virt-handler and virt-controller", rolloutTimeout, func(ctx context.Context) (bool, error) {
		h, c := &appsv1.DaemonSet{}, &appsv1.Deployment{}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: devcluster.InstallNamespace, Name: vocab.VirtHandler}, h); err != nil {
			return false, err
		}
		if err := s.c.Get(ctx, types.NamespacedName{Namespace: devcluster.InstallNamespace, Name: vocab.VirtController}, c); err != nil {
			return false, err
		}
		hi, ci := h.Spec.Template.Spec.Containers[0].Image, c.Spec.Template.Spec.Containers[0].Image
		return strings.HasSuffix(hi, ":"+toVersion) && strings.HasSuffix(ci, ":"+toVersion), fmt.Errorf("virt-handler %s, virt-controller %s", hi, ci)
	})
	if logHas(standby.Log(), acquiredLease) {
		t.Fatal("the second replica leads too")
	}
	api := &appsv1.Deployment{}
	if err := s.c.Get(context.Background(), types.NamespacedName{Namespace: devcluster.InstallNamespace, Name: vocab.VirtAPI}, api); err != nil {
		t.Fatal(err)
	}
	if img := api.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+fromVersion) {
		t.Fatalf("virt-api already runs %s: the rollout is not held mid-way", img)
	}
	leader.Kill()
	killed := time.Now()
	if !leader.KilledBySIGKILL() {
		t.Fatalf("the leader ended with %q, not by SIGKILL", leader.LastExit())
	}
	if kv := s.mustKubeVirt(); kv.Status.ObservedKubeVirtVersion != fromVersion {
		t.Fatalf("the upgrade was not in progress when the leader died: observed %q", kv.Status.ObservedKubeVirtVersion)
	}

	standbyLogBefore := standby.LogSize()
	waitLog(t, standby, acquiredLease, 3*time.Minute)
	t.Logf("MEASURE leader killed -> the other replica leads: %s (Lease duration 60 s)", time.Since(killed).Round(100*time.Millisecond))
	s.cordon(false)
	s.converged(toVersion, prev)
	t.Logf("MEASURE leader killed -> upgrade finished by the other replica: %s", time.Since(killed).Round(100*time.Millisecond))
	if !strings.Contains(standby.LogSince(standbyLogBefore), "Applied object") {
		t.Error("the new leader applied nothing: it did not finish the rollout")
	}
	alive(t, standby, 0)
}

// waitLog waits until the process's log contains s.
func waitLog(t *testing.T, p *framework.Process, s string, timeout time.Duration) {
	t.Helper()
	poll.Eventually(t, fmt.Sprintf("%s to log %q", p.Name, s), timeout, func(context.Context) (bool, error) {
		if !p.Running() {
			t.Fatalf("%s exited (%s) before logging %q", p.Name, p.LastExit(), s)
		}
		return logHas(p.Log(), s), nil
	})
}

// logHas reports whether log contains s, ignoring case.
func logHas(log, s string) bool {
	return strings.Contains(strings.ToLower(log), strings.ToLower(s))
}
