// Package dashboard renders virtop's Grafana dashboard of the KubeVirt
// control plane (component readiness, requests to the API server, work
// queues, VMI phases, migrations, certificates, virtop's own gate and
// conditions) as code, with the Grafana Foundation SDK, for one KubeVirt
// release and install namespace. Queries that name a metric the release's
// catalogue (package metrics) does not list are left out, and so is a panel
// left without queries, so a dashboard never shows a panel that cannot have
// data. Check holds a rendered dashboard to the catalogue the other way
// round, from its JSON.
//
// Rendering is pure and deterministic: the same release and namespace give
// the same JSON, byte for byte.
package dashboard

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	sdk "github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	sdkstat "github.com/grafana/grafana-foundation-sdk/go/stat"
	sdktimeseries "github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

// Names of the dashboard and of the ConfigMap that ships it.
const (
	// UID is the dashboard's uid, stable across releases so that links
	// and bookmarks survive upgrades.
	UID = "virtop-kubevirt-control-plane"
	// FileName is the ConfigMap data key: Grafana's dashboard sidecar
	// writes each key to a file of that name.
	FileName = "kubevirt-control-plane.json"
)

// rateWindow stands in for $__rate_interval where a query is parsed outside
// Grafana.
const rateWindow = "5m"

// Options say what to render.
type Options struct {
	// Release is the KubeVirt release (release.Release.Version); its metric
	// catalogue decides which queries are rendered.
	Release string
	// Namespace is the install namespace the queries select in.
	Namespace string
	// Panels are the panels to render; nil renders ControlPlanePanels.
	Panels []Panel
	// KeepAll renders every query whatever the catalogue says (for the
	// test that shows Check catching a query the release cannot answer).
	KeepAll bool
}

// Rendered is a rendered dashboard.
type Rendered struct {
	Dashboard sdk.Dashboard
	// Left out are the queries (panel title: expression) a release cannot
	// answer, and the panels left without any.
	LeftOut []string
}

// Render builds the dashboard of a release for an install namespace.
func Render(opts Options) (*Rendered, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("dashboard: no namespace")
	}
	cat, err := metrics.For(opts.Release)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	panels := opts.Panels
	if panels == nil {
		panels = ControlPlanePanels
	}
	out := &Rendered{}
	ds := common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
	b := sdk.NewDashboardBuilder("KubeVirt control plane ("+opts.Namespace+")").
		Uid(UID).
		Description(fmt.Sprintf("The KubeVirt %s control plane in namespace %s, as virtop installs and monitors it. Rendered by virtop for the metrics KubeVirt %s exposes.", opts.Release, opts.Namespace, opts.Release)).
		Tags([]string{"kubevirt", "virtop", opts.Release}).
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(sdk.DashboardCursorSyncCrosshair).
		Readonly().
		WithVariable(sdk.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus"))
	row := ""
	for _, p := range panels {
		var queries []Query
		for _, q := range p.Queries {
			expr := strings.ReplaceAll(q.Expr, "<ns>", opts.Namespace)
			names, err := MetricNames(expr)
			if err != nil {
				return nil, fmt.Errorf("dashboard: panel %q: %w", p.Title, err)
			}
			missing := ""
			for _, n := range names {
				if _, ok := cat.Lookup(n); !ok && missing == "" {
					missing = n
				}
			}
			if missing != "" && !opts.KeepAll {
				out.LeftOut = append(out.LeftOut, fmt.Sprintf("%s: %s (KubeVirt %s has no %s)", p.Title, q.Legend, opts.Release, missing))
				continue
			}
			queries = append(queries, Query{Expr: expr, Legend: q.Legend})
		}
		if len(queries) == 0 {
			out.LeftOut = append(out.LeftOut, p.Title+": the whole panel")
			continue
		}
		if p.Row != row {
			b = b.WithRow(sdk.NewRowBuilder(p.Row))
			row = p.Row
		}
		width := p.Width
		if width == 0 {
			width = 8
		}
		var targets []cog.Builder[variants.Dataquery]
		for i, q := range queries {
			targets = append(targets, prometheus.NewDataqueryBuilder().
				Expr(q.Expr).LegendFormat(q.Legend).RefId(string(rune('A'+i))).Datasource(ds))
		}
		switch p.Kind {
		case stat:
			b = b.WithPanel(sdkstat.NewPanelBuilder().
				Title(p.Title).Description(p.Description).Datasource(ds).Unit(p.Unit).
				Span(width).Height(5).Targets(targets).
				GraphMode(common.BigValueGraphModeNone).
				ColorMode(common.BigValueColorModeValue).
				TextMode(common.BigValueTextModeValueAndName).
				ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})))
		case timeseries:
			b = b.WithPanel(sdktimeseries.NewPanelBuilder().
				Title(p.Title).Description(p.Description).Datasource(ds).Unit(p.Unit).
				Span(width).Height(8).Targets(targets).
				FillOpacity(10).ShowPoints(common.VisibilityModeNever))
		default:
			return nil, fmt.Errorf("dashboard: panel %q has kind %q", p.Title, p.Kind)
		}
	}
	d, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	out.Dashboard = d
	return out, nil
}

// JSON is the dashboard as Grafana reads it.
func (r *Rendered) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r.Dashboard, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// MetricNames parses a query (with Grafana's $__rate_interval read as a
// window) with Prometheus's parser and returns the metric names it selects.
func MetricNames(query string) ([]string, error) {
	e, err := rules.ParseExpr(Parseable(query))
	if err != nil {
		return nil, fmt.Errorf("query %q does not parse: %w", query, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.Name)
		}
		return nil
	})
	return out, nil
}

// Parseable replaces the Grafana variables a query may hold by values
// Prometheus's parser takes.
func Parseable(query string) string {
	return strings.ReplaceAll(query, "$__rate_interval", rateWindow)
}

func ptr[T any](v T) *T { return &v }
