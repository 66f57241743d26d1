package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/virtop-dev/virtop/internal/stage"
)

// Withheld says which objects of the strategy the plan left out and why,
// grouped by gate, for the Synchronized condition: "2 APIService wait for
// virt-api to answer through the API server; 1 Route waits for the API
// route.openshift.io/v1 routes". Monitoring objects are left to the
// MonitoringReady condition. Stable for a given set of closed gates, so
// it does not make steady passes write.
func (p *Plan) Withheld() string {
	type group struct {
		gate  stage.Gate
		kinds map[string]int
	}
	groups := map[stage.Gate]*group{}
	for _, c := range p.Closed {
		if c.Gate == stage.MonitoringTarget || c.Gate == stage.ServiceMonitorsAPI || c.Gate == stage.PrometheusRulesAPI {
			continue
		}
		g := groups[c.Gate]
		if g == nil {
			g = &group{gate: c.Gate, kinds: map[string]int{}}
			groups[c.Gate] = g
		}
		g.kinds[c.Object.Kind]++
	}
	var parts []string
	for _, g := range groups {
		kinds := make([]string, 0, len(g.kinds))
		total := 0
		for k, n := range g.kinds {
			kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
			total += n
		}
		sort.Strings(kinds)
		verb := "waits"
		if total > 1 {
			verb = "wait"
		}
		parts = append(parts, fmt.Sprintf("%s %s for %s", strings.Join(kinds, ", "), verb, DescribeGate(g.gate)))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// DescribeGate says in words what a gate waits for.
func DescribeGate(g stage.Gate) string {
	if gv, res, ok := g.IsAPI(); ok {
		return "the API " + gv + " " + res
	}
	if g == stage.VirtAPIServing {
		return "virt-api to answer through the API server"
	}
	return "gate " + string(g)
}
