package plan

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// rendered is virt-handler as a release's strategy renders it, for a
// deployment ID.
func rendered(id string, supports bool) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{}
	ds.Name = vocab.VirtHandler
	if supports {
		ds.Labels = map[string]string{vocab.SupportsMigrationCNsLabel: "true"}
	}
	ds.Spec.Template.Annotations = map[string]string{vocab.InstallStrategyIdentifierAnnotation: id}
	ds.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: OldHandlerClientCertVolume}, {Name: "kubevirt-virt-handler-server-certs"}, {Name: "kubevirt-virt-handler-migration-client-certs"}}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{
		Name: "virt-handler", Args: []string{"--port", "8443"},
		VolumeMounts: []corev1.VolumeMount{{Name: OldHandlerClientCertVolume}, {Name: "kubevirt-virt-handler-server-certs"}},
	}}
	return ds
}

// liveAs is a live DaemonSet of form f, at generation gen, whose rollout
// is complete or not.
func liveAs(f *appsv1.DaemonSet, complete bool) *appsv1.DaemonSet {
	l := f.DeepCopy()
	l.Generation = 4
	l.Status = appsv1.DaemonSetStatus{ObservedGeneration: 4, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 3}
	if !complete {
		l.Status.UpdatedNumberScheduled = 1
	}
	return l
}

func form(ds *appsv1.DaemonSet) string {
	s := "no flag"
	if hasFlag(ds) {
		s = "flag"
	}
	if hasOldCert(ds) {
		s += ", old cert"
	}
	return s
}

func TestStageHandlerTLS(t *testing.T) {
	const oldID, newID = "old", "new"
	stepRollout := rendered(newID, true)
	stepEnforce := withFlag(rendered(newID, true))
	final := withoutOldCert(withFlag(rendered(newID, true)))
	for _, c := range []struct {
		name     string
		live     *appsv1.DaemonSet
		step     HandlerTLSStep
		form     string
		settled  bool
		notStage bool
	}{
		{name: "fresh install: final at once", live: nil, step: HandlerTLSFinal, form: "flag"},
		{name: "from a release without the flag, rolling out", live: liveAs(rendered(oldID, false), true), step: HandlerTLSRollout, form: "no flag, old cert"},
		{name: "step 1 applied, pods still rolling", live: liveAs(stepRollout, false), step: HandlerTLSRollout, form: "no flag, old cert"},
		{name: "step 1 rolled out: the flag", live: liveAs(stepRollout, true), step: HandlerTLSEnforce, form: "flag, old cert"},
		{name: "step 2 applied, pods rolling", live: liveAs(stepEnforce, false), step: HandlerTLSEnforce, form: "flag, old cert"},
		{name: "step 2 rolled out: the old cert goes", live: liveAs(stepEnforce, true), step: HandlerTLSFinal, form: "flag"},
		{name: "final applied, pods rolling", live: liveAs(final, false), step: HandlerTLSFinal, form: "flag"},
		{name: "final rolled out", live: liveAs(final, true), step: HandlerTLSFinal, form: "flag", settled: true},
		// An upgrade from a release already in the final form keeps it.
		{name: "upgrade from a final older release", live: liveAs(withoutOldCert(withFlag(rendered(oldID, true))), true), step: HandlerTLSFinal, form: "flag"},
		// An interrupted older rollout (flag and old cert at the old
		// deployment) goes on with this release's step 2 first.
		{name: "older release in step 2", live: liveAs(withFlag(rendered(oldID, true)), true), step: HandlerTLSEnforce, form: "flag, old cert"},
		// Someone removed the flag from a final DaemonSet: back through
		// step 1's check (the old cert is gone already, so straight to
		// the flag with the cert restored for the peers not yet
		// restarted).
		{name: "flag removed by hand", live: liveAs(withoutOldCert(rendered(newID, true)), true), step: HandlerTLSRollout, form: "no flag, old cert"},
	} {
		ds := rendered(newID, true)
		got := StageHandlerTLS(ds, c.live)
		if got.Step != c.step || form(ds) != c.form || got.Settled != c.settled {
			t.Errorf("%s: step %q (%s), settled %v; want %q (%s), settled %v", c.name, got.Step, form(ds), got.Settled, c.step, c.form, c.settled)
		}
		if got.Done() != (c.step == HandlerTLSFinal && c.settled) {
			t.Errorf("%s: Done() = %v", c.name, got.Done())
		}
	}
}

// TestStageHandlerTLSWalk drives the steps as the controller and the
// DaemonSet controller would, from a release without validation to the
// final form, and checks the order: never the flag before every pod
// mounts the new certificates, never the old certificate removed before
// every pod has the flag.
func TestStageHandlerTLSWalk(t *testing.T) {
	live := liveAs(rendered("old", false), true)
	var steps []HandlerTLSStep
	for pass := 0; pass < 20; pass++ {
		ds := rendered("new", true)
		got := StageHandlerTLS(ds, live)
		if len(steps) == 0 || steps[len(steps)-1] != got.Step {
			steps = append(steps, got.Step)
		}
		if got.Done() {
			break
		}
		if hasFlag(ds) && !(hasFlag(live) || rolledOut(live, rendered("new", true))) {
			t.Fatalf("pass %d: the flag before step 1 rolled out (live %s)", pass, form(live))
		}
		if !hasOldCert(ds) && !(hasFlag(live) && rolledOut(live, withFlag(rendered("new", true)))) && hasOldCert(live) {
			t.Fatalf("pass %d: the old certificate removed before the flag rolled out", pass)
		}
		// Apply: a changed template bumps the generation; the DaemonSet
		// controller needs a pass to roll it out.
		if form(live) != form(ds) || live.Spec.Template.Annotations[vocab.InstallStrategyIdentifierAnnotation] != "new" {
			live = liveAs(ds, false)
			live.Generation++
		} else {
			live = liveAs(ds, true)
			live.Generation++
			live.Status.ObservedGeneration = live.Generation
		}
	}
	want := []HandlerTLSStep{HandlerTLSRollout, HandlerTLSEnforce, HandlerTLSFinal}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
}

func TestStageHandlerTLSNotStaged(t *testing.T) {
	ds := rendered("new", false)
	got := StageHandlerTLS(ds, nil)
	if got.Step != HandlerTLSNotStaged || hasFlag(ds) || !hasOldCert(ds) {
		t.Fatalf("a release without the label: %+v, %s", got, form(ds))
	}
	if got := StageHandlerTLS(rendered("new", false), liveAs(rendered("new", false), true)); !got.Done() {
		t.Errorf("rolled out, not staged: %+v", got)
	}
}

// Build stages virt-handler only when asked: offline (no option) it stays
// as the strategy renders it, on a fresh install it starts in the final
// form, and a release without the label is never staged.
func TestBuildStagesHandlerTLS(t *testing.T) {
	for _, c := range []struct {
		version string
		opts    Options
		want    string
		step    HandlerTLSStep
	}{
		{"v1.9.0", Options{}, "old-cert", ""},
		{"v1.9.0", Options{HandlerTLS: &HandlerTLSInput{}}, "flag", HandlerTLSFinal},
		{"v1.6.6", Options{HandlerTLS: &HandlerTLSInput{}}, "old-cert", HandlerTLSNotStaged},
	} {
		cfg := kvtest.Config(t, c.version)
		s, err := strategy.Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Build(s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1}, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		var ds *appsv1.DaemonSet
		for _, o := range p.Objects {
			if d, ok := o.(*appsv1.DaemonSet); ok && d.Name == "virt-handler" {
				ds = d
			}
		}
		if ds == nil {
			t.Fatalf("%s: no virt-handler planned", c.version)
		}
		got := "old-cert"
		if hasFlag(ds) && !hasOldCert(ds) {
			got = "flag"
		}
		if got != c.want {
			t.Errorf("%s %+v: virt-handler in form %s, want %s", c.version, c.opts, got, c.want)
		}
		if (p.HandlerTLS == nil) != (c.opts.HandlerTLS == nil) || p.HandlerTLS != nil && p.HandlerTLS.Step != c.step {
			t.Errorf("%s: outcome %+v, want step %q", c.version, p.HandlerTLS, c.step)
		}
	}
}
