package dashboard

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

func render(t *testing.T, o Options) (*Rendered, []byte) {
	t.Helper()
	r, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return r, b
}

// TestEveryReleaseChecks: for every release with a rule set, the dashboard
// round-trips through the SDK's own types unchanged, and every panel's
// query parses with Prometheus's parser and names only series of that
// release's catalogue, with labels they carry.
func TestEveryReleaseChecks(t *testing.T) {
	for _, rel := range rules.Names() {
		r, b := render(t, Options{Release: rel, Namespace: "kubevirt"})
		d, err := Decode(b)
		if err != nil {
			t.Fatalf("%s: the SDK cannot read the dashboard: %v", rel, err)
		}
		again, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(append(again, '\n'), b) {
			t.Errorf("%s: the dashboard changes through the SDK's types", rel)
		}
		cat, err := metrics.For(rel)
		if err != nil {
			t.Fatal(err)
		}
		problems, err := Check(b, cat)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", rel, p)
		}
		n := 0
		for _, p := range d.Panels {
			if p.Panel != nil {
				n++
				for _, tg := range p.Panel.Targets {
					q := tg.(*prometheus.Dataquery)
					if _, err := rules.ParseExpr(Parseable(q.Expr)); err != nil {
						t.Errorf("%s: %q does not parse: %v", rel, q.Expr, err)
					}
				}
			}
		}
		t.Logf("%s: %d panels; left out: %s", rel, n, strings.Join(r.LeftOut, "; "))
	}
}

// TestCheckCatchesMetricTheReleaseLacks: a panel on a metric only v1.9.0
// exposes, forced into v1.5.3's dashboard, fails the check; rendered
// normally it is left out.
func TestCheckCatchesMetricTheReleaseLacks(t *testing.T) {
	panic := Panel{Row: "VMs", Title: "Guest panics", Kind: timeseries,
		Queries: []Query{{Expr: `sum by (namespace, name) (increase(kubevirt_vmi_guest_os_panic_total[$__rate_interval]))`, Legend: "{{name}}"}}}
	cat153, _ := metrics.For("v1.5.3")
	_, forced := render(t, Options{Release: "v1.5.3", Namespace: "kubevirt", Panels: []Panel{panic}, KeepAll: true})
	problems, err := Check(forced, cat153)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Panel != "Guest panics" || !strings.Contains(problems[0].Msg, "kubevirt_vmi_guest_os_panic_total") || !strings.Contains(problems[0].Msg, "not exposed by KubeVirt v1.5.3") {
		t.Errorf("problems %v, want one naming the panel and the metric", problems)
	}
	r, b := render(t, Options{Release: "v1.5.3", Namespace: "kubevirt", Panels: []Panel{panic, ControlPlanePanels[0]}})
	if strings.Contains(string(b), "kubevirt_vmi_guest_os_panic_total") || len(r.LeftOut) != 2 {
		t.Errorf("v1.5.3 renders the panic panel (left out: %v)", r.LeftOut)
	}
	cat190, _ := metrics.For("v1.9.0")
	_, ok := render(t, Options{Release: "v1.9.0", Namespace: "kubevirt", Panels: []Panel{panic}})
	if problems, _ := Check(ok, cat190); len(problems) != 0 {
		t.Errorf("v1.9.0: %v", problems)
	}
	// A label the series do not carry is caught too.
	bad := Panel{Row: "x", Title: "Bad label", Kind: stat, Queries: []Query{{Expr: `sum(kubevirt_vmi_info{deployment="x"})`}}}
	_, b = render(t, Options{Release: "v1.9.0", Namespace: "kubevirt", Panels: []Panel{bad}})
	if problems, _ := Check(b, cat190); len(problems) != 1 || !strings.Contains(problems[0].Msg, `no label "deployment"`) {
		t.Errorf("bad label: %v", problems)
	}
}

// TestReleaseDifferences: panels follow the catalogue; the ready gauges of
// virt-api and virt-handler appear from v1.8.4.
func TestReleaseDifferences(t *testing.T) {
	_, old := render(t, Options{Release: "v1.5.3", Namespace: "kubevirt"})
	_, cur := render(t, Options{Release: "v1.9.0", Namespace: "kv"})
	if strings.Contains(string(old), "kubevirt_virt_api_ready_status") || !strings.Contains(string(cur), "kubevirt_virt_api_ready_status") {
		t.Error("kubevirt_virt_api_ready_status: in v1.5.3's dashboard, or not in v1.9.0's")
	}
	if !strings.Contains(string(old), "kubevirt_vmi_migrations_in_unset_phase") {
		t.Error("v1.5.3's dashboard lacks kubevirt_vmi_migrations_in_unset_phase, which v1.5.3 exposes")
	}
	_, v150 := render(t, Options{Release: "v1.5.0", Namespace: "kubevirt"})
	if strings.Contains(string(v150), "kubevirt_vmi_migrations_in_unset_phase") {
		t.Error("v1.5.0's dashboard queries kubevirt_vmi_migrations_in_unset_phase")
	}
	if !strings.Contains(string(cur), `namespace=\"kv\"`) || strings.Contains(string(cur), "<ns>") {
		t.Error("v1.9.0's queries are not rendered for namespace kv")
	}
	if _, err := Render(Options{Release: "v0.0.1", Namespace: "kubevirt"}); err == nil {
		t.Error("unknown release accepted")
	}
}

func TestDeterministic(t *testing.T) {
	_, a := render(t, Options{Release: "v1.9.0", Namespace: "kubevirt"})
	for i := 0; i < 10; i++ {
		if _, b := render(t, Options{Release: "v1.9.0", Namespace: "kubevirt"}); !bytes.Equal(a, b) {
			t.Fatal("two renderings differ")
		}
	}
}
