package main

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/benchcompare"
)

func TestParseTargetAndJudge(t *testing.T) {
	for _, c := range []struct {
		target string
		value  float64
		want   Verdict
		ratio  bool
	}{
		{"<= 5 s", 4.9, Met, false},
		{"<= 5 s", 5.1, NotMet, false},
		{"0", 0, Met, false},
		{"0", 3, NotMet, false},
		{"<= 0.25x", 0.39, NotMet, true},
		{"<= 0.25×", 0.2, Met, true},
		{"<= 64 MiB", 152, NotMet, false},
	} {
		tg, ok := ParseTarget(c.target)
		if !ok {
			t.Errorf("%q: not read as a target", c.target)
			continue
		}
		if got := tg.Judge(c.value); got != c.want || tg.Ratio != c.ratio {
			t.Errorf("%q against %g: %q ratio %v, want %q ratio %v", c.target, c.value, got, tg.Ratio, c.want, c.ratio)
		}
	}
	for _, bad := range []string{"", "soon", "kubeadm's"} {
		if _, ok := ParseTarget(bad); ok {
			t.Errorf("%q read as a target", bad)
		}
	}
}

func sample() Input {
	return Input{
		E2E: E2E{Machine: "2 CPUs", Figures: []Figure{
			{Name: "KubeVirt created -> Available, 3 fake nodes", Unit: "s", Runs: []float64{7, 8, 9}, Median: 8},
			{Name: "KubeVirt created -> Available, 1000 fake nodes", Unit: "s", Runs: []float64{20}, Median: 20},
			{Name: "virtop: created -> last workload created, 1000 fake nodes", Unit: "s", Runs: []float64{2}, Median: 2},
			{Name: "cluster: last workload created -> all workloads rolled out, 1000 fake nodes", Unit: "s", Runs: []float64{15}, Median: 15},
			{Name: "virtop: all workloads rolled out -> Available, 1000 fake nodes", Unit: "s", Runs: []float64{1}, Median: 1},
			{Name: "Prometheus arriving late -> monitoring objects present and selected", Unit: "s", Runs: []float64{0.2}, Median: 0.2, Target: "<= 0.5 s"},
			{Name: "operator resident memory", Unit: "MiB", Runs: []float64{150}, Median: 150, Target: "<= 64 MiB"},
		}, Memory: []Sample{{At: 1, RSS: 40, Phase: "start"}, {At: 2, RSS: 90, Phase: "installs"}, {At: 3, RSS: 80, Phase: "installs"}}},
		Compare: &Compare{Release: "v1.9.0", Pairs: []Pair{
			{Name: "created -> Available", Unit: "s", Upstream: []float64{28, 30}, Virtop: []float64{10, 12}, Target: "<= 0.25x"},
			{Name: "writes in an idle minute", Unit: "writes", Upstream: []float64{150}, Virtop: []float64{0}, Target: "0"},
		}},
	}
}

// TestRender: every target gets its verdict (the 1000-node one computed
// from the two Available figures, the comparison's as ratios) and each
// plot is well-formed SVG.
func TestRender(t *testing.T) {
	files, err := Render(sample())
	if err != nil {
		t.Fatal(err)
	}
	md := string(files["report.md"])
	for _, want := range []string{
		"| Prometheus arriving late -> monitoring objects present and selected | 0.2 s | <= 0.5 s | met |  |",
		"| operator resident memory | 150 MiB | <= 64 MiB | **not met** | ; the binary's loaded sections",
		"| 1000 nodes → Available against 3 nodes | 2.5× (20 s against 8 s) | <= 2× | **not met** | at 1000 nodes virtop's own time is 3 s (2 s until its last workload exists, 1 s after the last is rolled out); the cluster's rollout of the workloads (kube-controller-manager's DaemonSet controller, kube-scheduler, kwok) is 15 s",
		"| created -> Available, virtop / upstream | 0.3793× (11 against 29 s) | <= 0.25x | **not met** | see compare.md |",
		"| writes in an idle minute, virtop | 0 writes (upstream 150) | 0 | met |  |",
		"![memory over the run](memory.svg)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"available-vs-nodes.svg", "memory.svg", "compare.svg"} {
		svg, ok := files[name]
		if !ok {
			t.Errorf("no %s", name)
			continue
		}
		if err := wellFormed(svg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Render(Input{}); err == nil {
		t.Error("a report from no figures: no error")
	}
}

func wellFormed(b []byte) error {
	d := xml.NewDecoder(strings.NewReader(string(b)))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return err
		}
	}
}

// TestWellFormedFindsBrokenSVG: the check above fails on a broken plot.
func TestWellFormedFindsBrokenSVG(t *testing.T) {
	if err := wellFormed([]byte(`<svg><text>a & b</text></svg>`)); err == nil {
		t.Error("an unescaped & passed")
	}
}

// TestFromCompare: benchcompare's runs become pairs by operator, a run
// that did not measure a figure left out, and the targets attached.
func TestFromCompare(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rep := benchcompare.Report{To: "v1.9.0", IdleSeconds: 60, Runs: []benchcompare.Run{
		{Operator: benchcompare.Upstream, Available: f(28), Idle: &benchcompare.Counts{Requests: 200, Writes: 150}},
		{Operator: benchcompare.Virtop, Available: f(10), Idle: &benchcompare.Counts{Requests: 3, Writes: 0}},
		{Operator: benchcompare.Virtop, Error: "cluster failed"},
	}}
	c := FromCompare(rep)
	got := map[string]Pair{}
	for _, p := range c.Pairs {
		got[p.Name] = p
	}
	avail := got["KubeVirt created → Available"]
	if len(avail.Upstream) != 1 || len(avail.Virtop) != 1 || avail.Virtop[0] != 10 || avail.Target != "<= 0.25x" {
		t.Errorf("Available: %+v", avail)
	}
	w := got["API writes, idle 60s after Available"]
	if len(w.Upstream) != 1 || w.Upstream[0] != 150 || w.Virtop[0] != 0 || w.Target != "" {
		t.Errorf("idle writes: %+v", w)
	}
	if w := got["API writes, idle 60s after Available, leader-election leases left out"]; w.Target != "0" {
		t.Errorf("idle writes without the leases: target %q, want 0", w.Target)
	}
	if c := got["KubeVirt created → every component pod Ready"]; c.Target != "" {
		t.Errorf("components Ready: target %q, want none", c.Target)
	}
}
