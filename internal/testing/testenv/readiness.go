package testenv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FakeReadiness plays kube-controller-manager for the Deployments and
// DaemonSets of a namespace until the test ends: every 200 ms it marks
// ready (MarkDeploymentReady, MarkDaemonSetReady with one node) those whose
// status does not already say so, so a settled namespace sees no writes.
func FakeReadiness(t testing.TB, c client.Client, ns string) {
	HoldableReadiness(t, c, ns)
}

// HoldableReadiness is FakeReadiness whose marking can be held: while
// hold(true) is in effect, no workload is marked ready (a rollout stays
// unfinished); hold(false) lets it go on.
func HoldableReadiness(t testing.TB, c client.Client, ns string) (hold func(bool)) {
	var held atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if held.Load() {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			var ds appsv1.DeploymentList
			if err := c.List(ctx, &ds, client.InNamespace(ns)); err == nil {
				for i := range ds.Items {
					if d := &ds.Items[i]; !deploymentRolledOut(d) {
						_ = MarkDeploymentReady(ctx, c, client.ObjectKeyFromObject(d))
					}
				}
			}
			var dss appsv1.DaemonSetList
			if err := c.List(ctx, &dss, client.InNamespace(ns)); err == nil {
				for i := range dss.Items {
					d := &dss.Items[i]
					if st := d.Status; st.ObservedGeneration != d.Generation || st.NumberReady == 0 || st.UpdatedNumberScheduled != st.DesiredNumberScheduled {
						_ = MarkDaemonSetReady(ctx, c, client.ObjectKeyFromObject(d), 1)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return held.Store
}

func deploymentRolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration == d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
}
