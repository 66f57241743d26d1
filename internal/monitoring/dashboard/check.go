package dashboard

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

var registerPlugins sync.Once

// Decode reads dashboard JSON into the SDK's own types (panels and
// Prometheus queries included).
func Decode(b []byte) (*sdk.Dashboard, error) {
	registerPlugins.Do(plugins.RegisterDefaultPlugins)
	d := &sdk.Dashboard{}
	if err := json.Unmarshal(b, d); err != nil {
		return nil, err
	}
	return d, nil
}

// Problem is one finding of Check.
type Problem struct {
	Panel, Query, Msg string
}

func (p Problem) String() string {
	return fmt.Sprintf("panel %q, query %s: %s", p.Panel, p.Query, p.Msg)
}

// Check reads a dashboard's JSON with the SDK's types and holds every
// panel's queries to a release's metric catalogue with the rule checks
// (package rules): each query parses with Prometheus's parser and selects
// only series the release exposes, with labels those series carry.
func Check(b []byte, cat *metrics.Catalogue) ([]Problem, error) {
	d, err := Decode(b)
	if err != nil {
		return nil, err
	}
	var out []Problem
	type origin struct{ panel, ref string }
	from := map[string]origin{}
	var recs []monitoringv1.Rule
	var panels []sdk.Panel
	for _, p := range d.Panels {
		switch {
		case p.Panel != nil:
			panels = append(panels, *p.Panel)
		case p.RowPanel != nil:
			panels = append(panels, p.RowPanel.Panels...)
		}
	}
	for i, p := range panels {
		title := ""
		if p.Title != nil {
			title = *p.Title
		}
		if len(p.Targets) == 0 {
			out = append(out, Problem{Panel: title, Msg: "no query"})
		}
		for j, t := range p.Targets {
			q, ok := t.(*prometheus.Dataquery)
			ref := fmt.Sprint(j)
			if ok && q.RefId != nil {
				ref = *q.RefId
			}
			if !ok || q.Expr == "" {
				out = append(out, Problem{Panel: title, Query: ref, Msg: fmt.Sprintf("not a Prometheus query (%T)", variants.Dataquery(t))})
				continue
			}
			name := fmt.Sprintf("dashboard:panel_%d_query_%d", i, j)
			from[name] = origin{title, ref}
			recs = append(recs, monitoringv1.Rule{Record: name, Expr: intstr.FromString(Parseable(q.Expr))})
		}
	}
	spec := &monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "dashboard", Rules: recs}}}
	for _, p := range rules.Check(spec, cat, rules.CheckOptions{}).Problems {
		o, ok := from[p.Rule]
		if !ok {
			out = append(out, Problem{Msg: p.String()})
			continue
		}
		out = append(out, Problem{Panel: o.panel, Query: o.ref, Msg: p.Msg})
	}
	return out, nil
}
