package framework

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/scheme"
)

// Transition is one change of a KubeVirt condition the recorder saw.
type Transition struct {
	At       time.Time
	Type     kvv1.KubeVirtConditionType
	From, To corev1.ConditionStatus
	Reason   string
	Message  string
	// Observed and Target are the resource's observed and target
	// KubeVirt versions when it changed.
	Observed, Target string
}

func (tr Transition) String() string {
	from := string(tr.From)
	if from == "" {
		from = "(none)"
	}
	return fmt.Sprintf("%s %s: %s -> %s (%s) [observed %q, target %q]", tr.At.Format("15:04:05.000"), tr.Type, from, tr.To, tr.Reason, tr.Observed, tr.Target)
}

// ConditionRecorder watches the suite's KubeVirt resource and records
// every change of a condition's status it sees, from the first state on.
// A watch sees every write of the resource (it reconnects from the last
// resourceVersion it saw when the server closes it), so no transition that
// lasted a write is missed.
type ConditionRecorder struct {
	t           testing.TB
	mu          sync.Mutex
	last        map[kvv1.KubeVirtConditionType]corev1.ConditionStatus
	transitions []Transition
	events      int
	cancel      context.CancelFunc
	done        chan struct{}
}

// RecordConditions starts a recorder; it stops when the test ends.
func (e *Env) RecordConditions(t testing.TB) *ConditionRecorder {
	t.Helper()
	wc, err := client.NewWithWatch(e.Clients.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &ConditionRecorder{t: t, last: map[kvv1.KubeVirtConditionType]corev1.ConditionStatus{}, cancel: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go r.run(ctx, wc, started)
	select {
	case <-started:
	case <-time.After(DefaultTimeout):
		t.Fatal("the condition recorder's watch did not start")
	}
	t.Cleanup(r.Stop)
	return r
}

func (r *ConditionRecorder) run(ctx context.Context, wc client.WithWatch, started chan struct{}) {
	defer close(r.done)
	rv := ""
	once := sync.Once{}
	for ctx.Err() == nil {
		list := &kvv1.KubeVirtList{}
		opts := []client.ListOption{client.InNamespace(KubeVirtKey.Namespace)}
		if rv == "" {
			// Start from the current state.
			if err := wc.List(ctx, list, opts...); err != nil {
				time.Sleep(time.Second)
				continue
			}
			for i := range list.Items {
				r.observe(&list.Items[i])
			}
			rv = list.ResourceVersion
		}
		w, err := wc.Watch(ctx, &kvv1.KubeVirtList{}, append(opts, &client.ListOptions{Raw: metaListOptions(rv)})...)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		once.Do(func() { close(started) })
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified:
				kv, ok := ev.Object.(*kvv1.KubeVirt)
				if !ok {
					continue
				}
				rv = kv.ResourceVersion
				r.observe(kv)
			case watch.Error:
				// An expired resourceVersion: list again.
				rv = ""
			}
		}
		w.Stop()
	}
	once.Do(func() { close(started) })
}

func (r *ConditionRecorder) observe(kv *kvv1.KubeVirt) {
	if kv.Name != KubeVirtKey.Name {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
	for _, c := range kv.Status.Conditions {
		if prev, seen := r.last[c.Type]; seen && prev == c.Status {
			continue
		}
		r.transitions = append(r.transitions, Transition{
			At: time.Now(), Type: c.Type, From: r.last[c.Type], To: c.Status, Reason: c.Reason, Message: c.Message,
			Observed: kv.Status.ObservedKubeVirtVersion, Target: kv.Spec.ImageTag,
		})
		r.last[c.Type] = c.Status
	}
}

// Stop ends the watch, waiting up to DefaultTimeout for it to end; past
// that it fails the test saying so, rather than wait for ever.
func (r *ConditionRecorder) Stop() {
	r.t.Helper()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(DefaultTimeout):
		r.t.Errorf("the condition recorder's watch of KubeVirt %s did not end within %s of its stop", KubeVirtKey, DefaultTimeout)
	}
}

// Transitions returns what was recorded so far, and how many states of the
// resource the watch delivered.
func (r *ConditionRecorder) Transitions() ([]Transition, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Transition(nil), r.transitions...), r.events
}

// Since returns the transitions recorded after index i of Transitions.
func (r *ConditionRecorder) Since(i int) []Transition {
	all, _ := r.Transitions()
	if i >= len(all) {
		return nil
	}
	return all[i:]
}

func metaListOptions(rv string) *metav1.ListOptions {
	return &metav1.ListOptions{ResourceVersion: rv}
}

// CheckServedThroughout logs every transition recorded and fails t for
// each that left Available other than True or made Degraded True: a
// rollout that kept serving and never failed. during names the rollout.
func (r *ConditionRecorder) CheckServedThroughout(t testing.TB, during string) {
	t.Helper()
	all, states := r.Transitions()
	t.Logf("%d condition transitions over %d states of the resource", len(all), states)
	for _, tr := range all {
		t.Logf("  %s", tr)
		switch {
		case tr.Type == kvv1.KubeVirtConditionAvailable && tr.To != corev1.ConditionTrue:
			t.Errorf("Available went %s during %s: %s", tr.To, during, tr)
		case tr.Type == kvv1.KubeVirtConditionDegraded && tr.To == corev1.ConditionTrue:
			t.Errorf("Degraded went True during %s: %s: %s", during, tr, tr.Message)
		}
	}
}
