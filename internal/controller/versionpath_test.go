package controller_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestVersionPathRefusals installs v1.6.6 and asks for versions the
// upgrade path refuses: two minor versions ahead, four ahead, and an older
// minor version. Each is refused with its own reason and a message naming
// the next version to go to (and the whole way), Available stays True, the
// target in the status stays v1.6.6, and nothing is applied or pruned.
func TestVersionPathRefusals(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.6.6" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kv = kvtest.WaitRolledOut(t, c, key)
	if kv.Status.ObservedKubeVirtVersion != "v1.6.6" {
		t.Fatalf("observed version %q", kv.Status.ObservedKubeVirtVersion)
	}
	before := managedVersions(t, c)

	for _, tc := range []struct {
		tag, reason string
		says        []string
	}{
		{"v1.8.4", kvv1.ReasonUpgradeSkipsMinorVersion, []string{"upgrade to v1.7.4 next", "the whole way: v1.7.4 -> v1.8.4", "v1.6.6 keeps running"}},
		{"v1.9.0", kvv1.ReasonUpgradeSkipsMinorVersion, []string{"upgrade to v1.7.4 next", "the whole way: v1.7.4 -> v1.8.4 -> v1.9.0"}},
		{"v1.5.3", kvv1.ReasonDowngradeNotSupported, []string{"downgrades to an older minor version are not supported", "set spec.imageTag back to v1.6.6"}},
	} {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		orig := cur.DeepCopy()
		cur.Spec.ImageTag = tc.tag
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, tc.tag+" refused with "+tc.reason, time.Minute, func() (bool, string) {
			if err := c.Get(ctx, key, cur); err != nil {
				return false, err.Error()
			}
			st := cur.Status.Condition(kvv1.KubeVirtConditionStalled)
			sy := cur.Status.Condition(kvv1.KubeVirtConditionSynchronized)
			ok := st.Status == corev1.ConditionTrue && st.Reason == tc.reason && sy.Status == corev1.ConditionFalse && sy.Reason == tc.reason
			for _, s := range tc.says {
				ok = ok && strings.Contains(st.Message, s)
			}
			return ok, fmt.Sprintf("Stalled %s %s: %s; Synchronized %s %s", st.Status, st.Reason, st.Message, sy.Status, sy.Reason)
		})
		t.Logf("%s: %s", tc.tag, cur.Status.Condition(kvv1.KubeVirtConditionStalled).Message)
		if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != corev1.ConditionTrue || a.Reason != tc.reason {
			t.Errorf("%s: Available %s %s: %s; want True under %s", tc.tag, a.Status, a.Reason, a.Message, tc.reason)
		}
		if d := cur.Status.Condition(kvv1.KubeVirtConditionDegraded); d.Status != corev1.ConditionFalse {
			t.Errorf("%s: Degraded %s: %s", tc.tag, d.Status, d.Message)
		}
		if cur.Status.TargetKubeVirtVersion != "v1.6.6" || cur.Status.ObservedKubeVirtVersion != "v1.6.6" {
			t.Errorf("%s: target %s, observed %s; want both v1.6.6", tc.tag, cur.Status.TargetKubeVirtVersion, cur.Status.ObservedKubeVirtVersion)
		}
	}
	// Let any pass that would write finish, then compare.
	time.Sleep(3 * time.Second)
	if after := managedVersions(t, c); !maps.Equal(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("%s written while the version was refused (resourceVersion %s -> %s)", k, before[k], v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("%s deleted while the version was refused", k)
			}
		}
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.6.6") {
		t.Errorf("virt-api image %s after the refusals, want v1.6.6", img)
	}

	// The next minor version is taken.
	cur := setImageTag(t, c, key, "v1.7.4")
	poll.Eventually(t, "the update to v1.7.4", 3*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		st := cur.Status.Condition(kvv1.KubeVirtConditionStalled)
		return cur.Status.ObservedKubeVirtVersion == "v1.7.4" && p.Status == corev1.ConditionFalse && st.Status == corev1.ConditionFalse,
			fmt.Sprintf("observed %s, Progressing %s %s, Stalled %s %s", cur.Status.ObservedKubeVirtVersion, p.Status, p.Message, st.Status, st.Message)
	})
}
