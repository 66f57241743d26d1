package plan

import (
	"slices"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/stage"
)

func apiServices(p *Plan) []string {
	var out []string
	for _, o := range p.Objects {
		if o.GetObjectKind().GroupVersionKind().Kind == "APIService" {
			out = append(out, o.GetName())
		}
	}
	slices.Sort(out)
	return out
}

// TestAPIServicesWaitForVirtAPIOnlyOnce: an APIService waits for virt-api
// to answer only before its first creation, and the plan then asks to be
// built again when the probe runs next; one already registered stays in
// the plan while virt-api does not answer (an outage must not prune it),
// and one not yet registered keeps waiting.
func TestAPIServicesWaitForVirtAPIOnlyOnce(t *testing.T) {
	s, cfg := generate(t)
	all := apiServices(build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, VirtAPIServing: true}))
	if len(all) < 2 {
		t.Fatalf("APIServices with virt-api answering: %v, want at least 2", all)
	}

	p := build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, VirtAPIRecheck: 15 * time.Second})
	if got := apiServices(p); len(got) != 0 {
		t.Errorf("virt-api never answered: APIServices %v planned", got)
	}
	if p.RecheckAfter != 15*time.Second {
		t.Errorf("APIServices wait for the probe: RecheckAfter %s, want the probe's next time, 15s", p.RecheckAfter)
	}

	registered := map[string]bool{all[0]: true}
	p = build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, VirtAPIRecheck: 30 * time.Second, RegisteredAPIServices: registered})
	if got := apiServices(p); !slices.Equal(got, all[:1]) {
		t.Errorf("virt-api out, %s registered: APIServices %v planned, want only the registered one", all[0], got)
	}
	for _, c := range p.Closed {
		if c.Object.Name == all[0] {
			t.Errorf("the registered APIService is withheld (%s)", c.Gate)
		}
	}
	if p.RecheckAfter != 30*time.Second || !slices.ContainsFunc(p.Closed, func(c ClosedGate) bool { return c.Gate == stage.VirtAPIServing }) {
		t.Errorf("the unregistered APIServices still wait: RecheckAfter %s, closed %v", p.RecheckAfter, p.Closed)
	}

	for _, name := range all {
		registered[name] = true
	}
	p = build(t, s, cfg, Capabilities{APIs: allAPIs(), Nodes: 1, VirtAPIRecheck: 30 * time.Second, RegisteredAPIServices: registered})
	if got := apiServices(p); !slices.Equal(got, all) || p.RecheckAfter != 0 {
		t.Errorf("virt-api out, every APIService registered: planned %v (want %v), RecheckAfter %s (want 0: nothing waits)", got, all, p.RecheckAfter)
	}
}
