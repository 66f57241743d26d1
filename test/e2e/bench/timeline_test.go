//go:build bench

package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// timeline watches an install from outside (every 100 ms) and notes when
// each workload of the control plane was first seen and first seen fully
// rolled out (every desired pod updated and ready): the time from the
// KubeVirt's creation to Available splits into virtop's share (until its
// last workload exists; after the last is ready) and the cluster's (the
// DaemonSet and Deployment controllers, the scheduler and kwok making
// pods Ready).
type timeline struct {
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup

	mu    sync.Mutex
	seen  map[string]time.Duration
	ready map[string]time.Duration
}

func watchInstall(c client.Client, start time.Time) *timeline {
	tl := &timeline{start: start, stop: make(chan struct{}), seen: map[string]time.Duration{}, ready: map[string]time.Duration{}}
	tl.done.Add(1)
	go func() {
		defer tl.done.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			tl.sample(c)
			select {
			case <-tl.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return tl
}

func (tl *timeline) sample(c client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	at := time.Since(tl.start)
	note := func(name string, ready bool) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if _, ok := tl.seen[name]; !ok {
			tl.seen[name] = at
		}
		if _, ok := tl.ready[name]; !ok && ready {
			tl.ready[name] = at
		}
	}
	var ds appsv1.DaemonSetList
	if err := c.List(ctx, &ds, client.InNamespace(devcluster.InstallNamespace)); err == nil {
		for _, d := range ds.Items {
			s := d.Status
			note("DaemonSet "+d.Name, d.Generation == s.ObservedGeneration && s.DesiredNumberScheduled > 0 &&
				s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled)
		}
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(devcluster.InstallNamespace)); err == nil {
		for _, d := range deps.Items {
			s := d.Status
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			note("Deployment "+d.Name, d.Generation == s.ObservedGeneration && s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want)
		}
	}
}

// end stops the watch and describes it: each workload's first sight and
// readiness, and the split of took (created -> Available) into virtop's
// time before its last workload existed, the cluster's rollout of the
// slowest, and virtop's time from the last ready workload to Available.
func (tl *timeline) end(took time.Duration) (string, float64, float64, float64) {
	close(tl.stop)
	tl.done.Wait()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var lastSeen, lastReady time.Duration
	var parts []string
	for _, name := range []string{"Deployment " + vocab.VirtAPI, "Deployment " + vocab.VirtController, "DaemonSet " + vocab.VirtHandler, "Deployment " + vocab.VirtExportProxy} {
		s, ok := tl.seen[name]
		if !ok {
			continue
		}
		r, ready := tl.ready[name]
		lastSeen = max(lastSeen, s)
		if ready {
			lastReady = max(lastReady, r)
			parts = append(parts, fmt.Sprintf("%s seen %.2fs ready %.2fs", name, s.Seconds(), r.Seconds()))
		} else {
			parts = append(parts, fmt.Sprintf("%s seen %.2fs never ready", name, s.Seconds()))
		}
	}
	before := lastSeen.Seconds()
	rollout := (lastReady - lastSeen).Seconds()
	after := (took - lastReady).Seconds()
	return strings.Join(parts, "; "), before, rollout, after
}
