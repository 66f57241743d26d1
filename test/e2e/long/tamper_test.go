//go:build long

package long

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Owner labels stripped by hand from a Deployment and a ClusterRole: the
// operator's caches only hold labelled objects, so to them the object is
// gone; virtop must notice, put the labels back on the same object (not a
// second one) and say so in its log and an event.
func TestOwnerLabelsStripped(t *testing.T) {
	s := newSuite(t)
	s.ensureInstalled(fromVersion)
	op, _ := s.startSettledOperator()
	s.converged(fromVersion)
	for _, target := range []struct{ apiVersion, kind, ns, name string }{
		{"apps/v1", "Deployment", devcluster.InstallNamespace, vocab.VirtAPI},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "kubevirt-controller"},
	} {
		ctx := context.Background()
		o := &unstructured.Unstructured{}
		o.SetAPIVersion(target.apiVersion)
		o.SetKind(target.kind)
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: target.ns, Name: target.name}, o); err != nil {
			t.Fatal(err)
		}
		uid := o.GetUID()
		if o.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
			t.Fatalf("%s %s is not labelled %s=%s to begin with", target.kind, target.name, vocab.ManagedByLabel, vocab.ManagedByValue)
		}
		logBefore := op.LogSize()
		stripped := time.Now()
		patch := `[{"op":"remove","path":"/metadata/labels/` + strings.ReplaceAll(vocab.ManagedByLabel, "/", "~1") + `"}]`
		if err := s.c.Patch(ctx, o, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
			t.Fatalf("stripping the label of %s %s: %v", target.kind, target.name, err)
		}
		if _, still := o.GetLabels()[vocab.ManagedByLabel]; still {
			t.Fatalf("the patch left the label on %s %s", target.kind, target.name)
		}
		poll.Eventually(t, fmt.Sprintf("the labels of %s %s back", target.kind, target.name), 2*time.Minute, func(ctx context.Context) (bool, error) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(o.GroupVersionKind())
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return false, err
			}
			if cur.GetUID() != uid {
				t.Fatalf("%s %s was replaced (uid %s -> %s), not relabelled", target.kind, target.name, uid, cur.GetUID())
			}
			return cur.GetLabels()[vocab.ManagedByLabel] == vocab.ManagedByValue, fmt.Errorf("labels %v", cur.GetLabels())
		})
		t.Logf("MEASURE owner label stripped from %s %s -> restored: %s", target.kind, target.name, time.Since(stripped).Round(100*time.Millisecond))
		said := op.LogSince(logBefore)
		if !logMentions(said, "Applied object", target.kind, target.name) {
			t.Errorf("the operator's log does not say it applied %s %s again:\n%s", target.kind, target.name, said)
		}
		poll.Eventually(t, "an Applied event naming "+target.name, time.Minute, func(ctx context.Context) (bool, error) {
			evs, err := s.kubeVirtEvents(ctx, "Applied")
			if err != nil {
				return false, err
			}
			for _, e := range evs {
				if strings.Contains(e, "/"+target.name) {
					return true, nil
				}
			}
			return false, fmt.Errorf("Applied events: %v", evs)
		})
	}
	s.converged(fromVersion)
	alive(t, op, 0)
}

// The strategy ConfigMap deleted, then corrupted (garbage in manifests),
// by hand: virtop writes it again and says so in its log and an event.
func TestStrategyConfigMapTampered(t *testing.T) {
	s := newSuite(t)
	s.ensureInstalled(fromVersion)
	op, _ := s.startSettledOperator()
	s.converged(fromVersion)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: strategy.ConfigMapName(s.mustKubeVirt().Status.ObservedDeploymentID)}
	orig := &corev1.ConfigMap{}
	if err := s.c.Get(ctx, key, orig); err != nil {
		t.Fatal(err)
	}
	if _, err := strategy.FromConfigMap(orig); err != nil {
		t.Fatalf("the stored strategy does not read back before the test touched it: %v", err)
	}

	for _, tc := range []struct {
		what, found string // what the test does, what virtop finds
		tamper      func() error
	}{
		{"deleted", "deleted", func() error { return s.c.Delete(ctx, orig.DeepCopy()) }},
		{"corrupted", "changed", func() error {
			cur := &corev1.ConfigMap{}
			if err := s.c.Get(ctx, key, cur); err != nil {
				return err
			}
			base := cur.DeepCopy()
			cur.Data[vocab.ManifestsKey] = "this is not gzip+base64 !!"
			return s.c.Patch(ctx, cur, client.MergeFrom(base))
		}},
	} {
		logBefore := op.LogSize()
		done := time.Now()
		if err := tc.tamper(); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		poll.Eventually(t, "the strategy ConfigMap restored after it was "+tc.what, 2*time.Minute, func(ctx context.Context) (bool, error) {
			cur := &corev1.ConfigMap{}
			err := s.c.Get(ctx, key, cur)
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("not there")
			}
			if err != nil {
				return false, err
			}
			if cur.Data[vocab.ManifestsKey] != orig.Data[vocab.ManifestsKey] {
				return false, fmt.Errorf("manifests differ from what virtop stored")
			}
			if tc.what == "deleted" && cur.UID == orig.UID {
				return false, fmt.Errorf("still the original object")
			}
			_, err = strategy.FromConfigMap(cur)
			return err == nil, err
		})
		t.Logf("MEASURE strategy ConfigMap %s -> restored: %s", tc.what, time.Since(done).Round(100*time.Millisecond))
		said := op.LogSince(logBefore)
		if !logMentions(said, "Restored install strategy ConfigMap", key.Name, tc.found) {
			t.Errorf("the operator's log does not say it restored %s, which was %s:\n%s", key.Name, tc.found, said)
		}
		poll.Eventually(t, "a "+restoredReason+" event", time.Minute, func(ctx context.Context) (bool, error) {
			evs, err := s.kubeVirtEvents(ctx, restoredReason)
			if err != nil {
				return false, err
			}
			for _, e := range evs {
				if strings.Contains(e, key.Name) && strings.Contains(e, "was "+tc.found) {
					return true, nil
				}
			}
			return false, fmt.Errorf("%s events: %v", restoredReason, evs)
		})
	}
	s.converged(fromVersion)
	alive(t, op, 0)
}

// restoredReason is the reason of the event virtop emits when it writes
// a strategy ConfigMap someone deleted or changed.
const restoredReason = "StrategyRestored"

// logMentions reports whether one line of log holds every part.
func logMentions(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
