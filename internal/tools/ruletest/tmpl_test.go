package ruletest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/template"
)

// TestTemplatesAsPrometheus expands templates with the evaluator and with
// Prometheus's template package (text/template; fine in a test binary) and
// expects the same text, or an error from both.
func TestTemplatesAsPrometheus(t *testing.T) {
	query := func(_ context.Context, q string, _ time.Time) (promql.Vector, error) {
		if q != "up" {
			return nil, nil
		}
		return promql.Vector{
			{Metric: labels.FromStrings("__name__", "up", "instance", "b:9090", "job", "j"), F: 0},
			{Metric: labels.FromStrings("__name__", "up", "instance", "a.example.com:9090", "job", "j"), F: 1},
		}, nil
	}
	templates := []string{
		`plain text`,
		`{{ $labels.node }} on {{ $labels.missing }}.`,
		`{{ $value }}`,
		`{{ .Value }} {{ .Labels.node }} {{ .ExternalURL }}`,
		`{{ $externalLabels.cluster }} {{ $externalURL }} {{ $externalLabels.none }}`,
		`{{ humanize $value }} {{ $value | humanize1024 }} {{ humanizePercentage $value }}`,
		`{{ humanizeDuration $value }} {{ humanizeTimestamp $value }}`,
		`{{ printf "%.2f" $value }} {{ printf "%s/%s" $labels.node "x" }}`,
		`{{ if gt $value 1.0 }}big{{ else if lt $value 0.5 }}small{{ else }}mid{{ end }}`,
		`{{ if eq $labels.node "n1" }}yes{{ else }}no{{ end }}`,
		`{{ if ne $labels.node "n1" "n2" }}x{{ end }}`,
		`{{ if eq $labels.node "n0" "n1" }}one of{{ end }}`,
		`{{ range $k, $v := $labels }}{{ $k }}={{ $v }};{{ end }}`,
		`{{ range $labels }}{{ . }},{{ end }}`,
		`{{ with $labels.node }}node {{ . }}{{ else }}none{{ end }}`,
		`{{ with $labels.missing }}node {{ . }}{{ else }}none{{ end }}`,
		`{{ .Labels.node | toUpper }} {{ title "hello big world" }} {{ toLower "AbC" }}`,
		`{{ reReplaceAll "(.*):.*" "$1" $labels.instance }} {{ match "^a" "abc" }}`,
		`{{ stripPort $labels.instance }} {{ stripDomain "a.example.com:80" }} {{ stripDomain "10.0.0.1:80" }}`,
		`{{ urlQueryEscape "a b&c" }} {{ graphLink "up == 0" }} {{ tableLink "up" }} {{ urlquery "a b" }}`,
		`{{ parseDuration "1h30m" }} {{ toDuration 90 }} {{ toTime 1 }}`,
		`{{ with query "up" }}{{ . | first | value }}{{ end }}`,
		`{{ range query "up" }}{{ .Labels.instance }} {{ .Value }};{{ end }}`,
		`{{ range $i, $s := query "up" | sortByLabel "instance" }}{{ $i }}:{{ label "instance" $s }};{{ end }}`,
		`{{ (query "up" | first).Labels.job }} {{ (query "up" | first | strvalue) }}`,
		`{{ with query "nothing" }}some{{ else }}empty{{ end }}`,
		`{{ len $labels }} {{ index $labels "node" }} {{ len "abc" }}`,
		`{{ and $labels.node $labels.missing }}|{{ or $labels.missing "default" }}|{{ not true }}`,
		`{{ $x := 1 }}{{ $x = 2 }}{{ $x }}{{ if true }}{{ $x := 3 }}{{ $x }}{{ end }}{{ $x }}`,
		`{{ define "t" }}T{{ . }}{{ end }}{{ template "t" $labels.node }}`,
		`{{ print 1 2 "a" "b" 1.5 }} {{ println "x" }}`,
		`{{ 1e3 }} {{ 0x10 }} {{ -1 }} {{ 2.50 }} {{ true }} {{ "s" }}`,
		`{{ range $i, $e := query "up" }}{{ if eq $i 1 }}{{ break }}{{ end }}{{ $i }}{{ end }}`,
		`{{ range $i, $e := query "up" }}{{ if eq $i 0 }}{{ continue }}{{ end }}{{ $i }}{{ end }}`,
		`{{ (args 1 "a").arg1 }}`,
		`{{/* a comment */}}c`,
		`{{- " trimmed " -}}   x`,
		`{{ $value | printf "%.1f" }} {{ (query "up" | first).Value | humanize }}`,
		`{{ range $labels.missing }}x{{ else }}empty{{ end }}`,
		`{{ if and (gt $value 0.5) (lt $value 2.0) }}in{{ else }}out{{ end }}`,
		`{{ index (query "up") 1 }} {{ first (query "up") }} {{ $labels }}`,
		`{{ with $x := $labels.node }}{{ $x }}{{ end }}`,
		`{{ if or (eq $labels.node "x") (eq $labels.node "n1") }}or{{ end }}`,
		`{{ toTime $value }}`,               // an error for NaN and Inf
		`{{ range $labels.node }}{{ end }}`, // can't range over a string
		// Errors in both.
		`{{ eq $value 1 }}`,
		`{{ nosuchfunc }}`,
		`{{ .Nope }}`,
		`{{ first (query "nothing") }}`,
		`{{ humanize "abc" }}`,
		`{{ $labels.node.deeper }}`,
		`{{ if }}`,
	}
	values := []float64{0, 0.25, 1, 1.5, 1234567.891, 1e-7, -3, math.NaN(), math.Inf(1)}
	ts := time.Unix(1000, 0).UTC()
	for _, text := range templates {
		for _, v := range values {
			lset := map[string]string{"node": "n1", "instance": "h:9100"}
			ext := map[string]string{"cluster": "c1"}
			smpl := promql.Sample{Metric: labels.FromMap(lset), F: v}
			defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

			want, werr := template.NewTemplateExpander(context.Background(), defs+text, "t",
				template.AlertTemplateData(lset, ext, "https://p.example", smpl),
				model.Time(ts.UnixMilli()), template.QueryFunc(query), nil, nil).Expand()
			got, gerr := expandTemplate(context.Background(), "t", defs+text,
				tmplData{Labels: lset, ExternalLabels: ext, ExternalURL: "https://p.example", Value: v}, ts, query)
			if (werr != nil) != (gerr != nil) {
				t.Errorf("%s with value %v: error %v, Prometheus: %v (%q)", text, v, gerr, werr, want)
				continue
			}
			if werr == nil && got != want {
				t.Errorf("%s with value %v:\n got %q\nwant %q", text, v, got, want)
			}
		}
	}
}
