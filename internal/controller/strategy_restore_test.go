package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The strategy ConfigMap deleted, then corrupted, by hand while the
// operator runs: it is written again, and the operator says so with a
// StrategyRestored event naming what it found.
func TestStrategyConfigMapRestored(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	kv = kvtest.WaitRolledOut(t, c, client.ObjectKeyFromObject(kv))
	key := client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(kv.Status.ObservedDeploymentID)}
	orig := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, orig); err != nil {
		t.Fatal(err)
	}
	restoredEvent := func(found string) (bool, string) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == "StrategyRestored" && e.Regarding.Name == kv.Name {
				seen = append(seen, e.Note)
				if strings.Contains(e.Note, key.Name) && strings.Contains(e.Note, "was "+found) {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("StrategyRestored events: %q", seen)
	}
	restored := func(uidChanged bool) func() (bool, string) {
		return func() (bool, string) {
			cur := &corev1.ConfigMap{}
			if err := c.Get(ctx, key, cur); err != nil {
				return false, err.Error()
			}
			if uidChanged && cur.UID == orig.UID {
				return false, "still the original object"
			}
			if _, err := strategy.FromConfigMap(cur); err != nil {
				return false, err.Error()
			}
			return cur.Data[vocab.ManifestsKey] == orig.Data[vocab.ManifestsKey], "manifests differ"
		}
	}

	if err := c.Delete(ctx, orig.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the deleted strategy ConfigMap written again", time.Minute, restored(true))
	poll.Eventually(t, "an event saying it was deleted", time.Minute, func() (bool, string) { return restoredEvent("deleted") })

	cur := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	base := cur.DeepCopy()
	cur.Data[vocab.ManifestsKey] = "garbage, not gzip+base64"
	if err := c.Patch(ctx, cur, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the corrupted strategy ConfigMap written again", time.Minute, restored(false))
	poll.Eventually(t, "an event saying it was changed", time.Minute, func() (bool, string) { return restoredEvent("changed") })
}
