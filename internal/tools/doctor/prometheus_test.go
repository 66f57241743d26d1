package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeProm is a canned Prometheus HTTP API: /api/v1/query answers by the
// query's shape, /api/v1/rules and /api/v1/alerts return fixed bodies.
// (The end-to-end test against a real Prometheus serving a backfilled
// TSDB is the e2e suite's, not this package's.)
type fakeProm struct {
	// up are the up series: pod -> value.
	up map[string]float64
	// names are kubevirt_* metric names -> series count; pods likewise.
	names, pods map[string]int
	// ruleNames are the rules of the single loaded group, named group
	// ("" is alerts.rules).
	ruleNames []string
	group     string
	// firing alert names.
	firing []string
	// queries records what was asked.
	queries []string
}

func vector(samples []map[string]string, values []float64) map[string]any {
	var res []map[string]any
	for i, m := range samples {
		res = append(res, map[string]any{"metric": m, "value": []any{float64(testNow.Unix()), fmt.Sprint(values[i])}})
	}
	if res == nil {
		res = []map[string]any{}
	}
	return map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}}
}

func (p *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	var body any
	switch r.URL.Path {
	case "/api/v1/query":
		q := r.Form.Get("query")
		p.queries = append(p.queries, q)
		var ms []map[string]string
		var vs []float64
		switch {
		case strings.HasPrefix(q, "up{"):
			for pod, v := range p.up {
				ms = append(ms, map[string]string{"__name__": "up", "job": "kubevirt-prometheus-metrics", "namespace": testNS, "pod": pod, "instance": "10.0.0.1:8443", "endpoint": "metrics"})
				vs = append(vs, v)
			}
		case strings.HasPrefix(q, "count by (__name__)"):
			for n, c := range p.names {
				ms = append(ms, map[string]string{"__name__": n})
				vs = append(vs, float64(c))
			}
		case strings.HasPrefix(q, "count by (pod)"):
			for n, c := range p.pods {
				ms = append(ms, map[string]string{"pod": n})
				vs = append(vs, float64(c))
			}
		default:
			http.Error(w, `{"status":"error","errorType":"bad_data","error":"unexpected query"}`, http.StatusBadRequest)
			return
		}
		body = vector(ms, vs)
	case "/api/v1/rules":
		var rules []map[string]any
		for _, n := range p.ruleNames {
			rules = append(rules, map[string]any{"type": "alerting", "name": n, "query": "vector(1)", "duration": 600, "labels": map[string]string{}, "annotations": map[string]string{}, "alerts": []any{}, "health": "ok", "state": "inactive", "evaluationTime": 0.001, "lastEvaluation": testNow.Format(time.RFC3339)})
		}
		groups := []map[string]any{{"name": "other.rules", "file": "/etc/prometheus/rules/other.yaml", "interval": 30, "rules": []any{}}}
		if len(rules) > 0 {
			name := p.group
			if name == "" {
				name = "alerts.rules"
			}
			groups = append(groups, map[string]any{"name": name, "file": "/etc/prometheus/rules/prometheus-kubevirt-rules.yaml", "interval": 30, "rules": rules})
		}
		body = map[string]any{"status": "success", "data": map[string]any{"groups": groups}}
	case "/api/v1/alerts":
		alerts := []map[string]any{}
		for _, n := range p.firing {
			alerts = append(alerts, map[string]any{"labels": map[string]string{"alertname": n, "severity": "critical"}, "annotations": map[string]string{}, "state": "firing", "activeAt": testNow.Format(time.RFC3339), "value": "0e+00"})
		}
		body = map[string]any{"status": "success", "data": map[string]any{"alerts": alerts}}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func healthyProm() *fakeProm {
	return &fakeProm{
		up: map[string]float64{"virt-api-aaaaa": 1, "virt-controller-aaaaa": 1, "virt-handler-aaaaa": 1, "virt-operator-aaaaa": 1},
		names: map[string]int{
			"kubevirt_virt_controller_ready_status": 1, "kubevirt_virt_controller_leading_status": 1,
			"kubevirt_virt_operator_ready_status": 1, "kubevirt_rest_client_requests_total": 40, "kubevirt_info": 1,
		},
		pods:      map[string]int{"virt-api-aaaaa": 10, "virt-controller-aaaaa": 20, "virt-handler-aaaaa": 30, "virt-operator-aaaaa": 5},
		ruleNames: []string{"VirtAPIDown", "VirtControllerDown", "KubeVirtControlPlaneDown"},
	}
}

// withoutHandler is a healthy Prometheus that has neither a target nor a
// series of virt-handler.
func withoutHandler() *fakeProm {
	p := healthyProm()
	delete(p.up, "virt-handler-aaaaa")
	delete(p.pods, "virt-handler-aaaaa")
	return p
}

// handlerOnSimulatedNode moves virt-handler's pod to a node kwok simulates.
func handlerOnSimulatedNode(f *Facts) {
	n := readyNode("kwok-1")
	n.Annotations = map[string]string{kwokNodeAnnotation: "fake"}
	f.Nodes[n.Name] = n
	for i := range f.Pods {
		if f.Pods[i].Name == "virt-handler-aaaaa" {
			f.Pods[i].Spec.NodeName = n.Name
		}
	}
}

func TestPrometheusAPI(t *testing.T) {
	tests := []struct {
		name       string
		prom       func() *fakeProm
		want       Verdict
		reason     string
		checkName  string
		checkState Status
		evidence   []string
		// facts changes the healthy facts, when set.
		facts func(*Facts)
	}{
		{name: "healthy", prom: healthyProm, want: Healthy, checkName: CheckPromTarget, checkState: OK, evidence: []string{"4 KubeVirt targets, all up"}},
		{
			name: "target absent while pods ready", want: MonitoringArtefact, reason: LinkTarget,
			prom: func() *fakeProm {
				p := healthyProm()
				p.up, p.names, p.pods = nil, nil, nil
				p.firing = []string{"KubeVirtControlPlaneDown", "VirtAPIDown", "SomeoneElsesAlert"}
				return p
			},
			checkName: CheckPromTarget, checkState: Fail, evidence: []string{"no up{job=\"kubevirt-prometheus-metrics\"} series", "while 4 pods labelled prometheus.kubevirt.io=true are ready"},
		},
		{
			name: "alerts firing while the control plane is ready", want: MonitoringArtefact,
			prom: func() *fakeProm {
				p := healthyProm()
				p.up = nil
				p.firing = []string{"KubeVirtControlPlaneDown", "VirtAPIDown", "SomeoneElsesAlert"}
				return p
			},
			checkName: CheckPromAlerts, checkState: Warn, evidence: []string{"firing: KubeVirtControlPlaneDown, VirtAPIDown.", "reflect the metrics path"},
		},
		{
			name: "every scrape fails", want: MonitoringArtefact, reason: "scrapes failing (up == 0)",
			prom: func() *fakeProm {
				p := healthyProm()
				for k := range p.up {
					p.up[k] = 0
				}
				p.names, p.pods = nil, nil
				return p
			},
			checkName: CheckPromTarget, checkState: Fail, evidence: []string{"every KubeVirt target is down"},
		},
		{
			// A pod deleted in an outage: Prometheus still holds its target
			// (down) until its discovery next drops it.
			name: "target of a deleted pod", want: Healthy,
			prom: func() *fakeProm {
				p := healthyProm()
				p.up["virt-controller-gone1"] = 0
				return p
			},
			checkName: CheckPromTarget, checkState: OK,
			evidence: []string{"4 KubeVirt targets, all up", "Not counted: 1 targets of pods that no longer exist, down until Prometheus's discovery drops them (virt-controller-gone1)."},
		},
		{
			// The real node's outage (test/e2e/realnode): the control plane
			// is down, by its pods, not by a monitoring fault.
			name: "target of a pod being deleted", want: ControlPlaneDown,
			prom: func() *fakeProm {
				p := healthyProm()
				p.up["virt-controller-aaaaa"] = 0
				return p
			},
			facts: func(f *Facts) {
				for i := range f.Pods {
					if f.Pods[i].Name == "virt-controller-aaaaa" {
						now := metav1.Now()
						f.Pods[i].DeletionTimestamp = &now
					}
				}
			},
			checkName: CheckPromTarget, checkState: OK,
			evidence: []string{"Not counted: 1 targets of pods that no longer exist"},
		},
		{
			name: "a running pod's target down", want: Degraded,
			prom: func() *fakeProm {
				p := healthyProm()
				p.up["virt-controller-aaaaa"] = 0
				return p
			},
			checkName: CheckPromTarget, checkState: Warn, evidence: []string{"targets down: virt-controller-aaaaa"},
		},
		{
			name: "one pod without target", want: Degraded,
			prom: func() *fakeProm {
				p := healthyProm()
				delete(p.up, "virt-handler-aaaaa")
				return p
			},
			checkName: CheckPromTarget, checkState: Warn, evidence: []string{"ready pods without a target: virt-handler-aaaaa"},
		},
		{
			// The local cluster's fake nodes: virt-handler is ready there,
			// but no container serves its metrics.
			name: "virt-handler only on a simulated node, no target", want: Healthy,
			prom: withoutHandler, facts: handlerOnSimulatedNode,
			checkName: CheckPromTarget, checkState: OK,
			evidence: []string{"3 KubeVirt targets, all up, covering every ready pod that serves.", "Not expected as targets: 1 ready pods on simulated (kwok) nodes, where no container serves metrics (virt-handler-aaaaa on kwok-1)."},
		},
		{
			name: "virt-handler only on a simulated node, no series", want: Healthy,
			prom: withoutHandler, facts: handlerOnSimulatedNode,
			checkName: CheckPromMetrics, checkState: OK,
			evidence: []string{"No series expected from virt-handler: its ready pods are all on simulated (kwok) nodes"},
		},
		{
			name: "virt-handler on a real node, no target", want: Degraded,
			prom:      withoutHandler,
			checkName: CheckPromTarget, checkState: Warn, evidence: []string{"ready pods without a target: virt-handler-aaaaa"},
		},
		{
			name: "virt-handler on a real node, no series", want: Degraded,
			prom:      withoutHandler,
			checkName: CheckPromMetrics, checkState: Warn, evidence: []string{"missing: virt-handler (ready pods, no series)"},
		},
		{
			name: "rules not loaded", want: MonitoringArtefact, reason: LinkRules,
			prom: func() *fakeProm {
				p := healthyProm()
				p.ruleNames = nil
				return p
			},
			checkName: CheckPromRules, checkState: Fail, evidence: []string{"none of KubeVirt's rules"},
		},
		{
			name: "targets up but no component metrics", want: MonitoringArtefact, reason: LinkMetrics,
			prom: func() *fakeProm {
				p := healthyProm()
				p.names, p.pods = nil, nil
				return p
			},
			checkName: CheckPromMetrics, checkState: Fail, evidence: []string{"no kubevirt_* series"},
		},
		{
			name: "controller ready gauge missing", want: Degraded,
			prom: func() *fakeProm {
				p := healthyProm()
				delete(p.names, "kubevirt_virt_controller_ready_status")
				return p
			},
			checkName: CheckPromMetrics, checkState: Warn, evidence: []string{"missing: kubevirt_virt_controller_ready_status"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fp := tc.prom()
			srv := httptest.NewServer(fp)
			defer srv.Close()
			f := healthyFacts()
			if tc.facts != nil {
				tc.facts(f)
			}
			f.Where.PrometheusURL = srv.URL
			f.Prometheus = GatherPrometheus(context.Background(), Endpoint{URL: srv.URL}, testNS, 10*time.Second)
			if f.Prometheus.Err != nil {
				t.Fatalf("gather: %v", f.Prometheus.Err)
			}
			r := Run(f)
			if r.Verdict != tc.want {
				t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, tc.want)
			}
			if tc.reason != "" && !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", r.Reason, tc.reason)
			}
			c := findCheck(t, r, tc.checkName)
			if c.Status != tc.checkState {
				t.Errorf("%s: %s (%s), want %s", c.Name, c.Status, c.Evidence, tc.checkState)
			}
			for _, s := range tc.evidence {
				if !strings.Contains(c.Evidence, s) {
					t.Errorf("%s evidence %q lacks %q", c.Name, c.Evidence, s)
				}
			}
			if len(fp.queries) == 0 || !strings.Contains(fp.queries[0], `up{job="kubevirt-prometheus-metrics"}`) {
				t.Errorf("queries %q", fp.queries)
			}
		})
	}
}

func TestPrometheusUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	f := healthyFacts()
	f.Where.PrometheusURL = url
	f.Prometheus = GatherPrometheus(context.Background(), Endpoint{URL: url}, testNS, 5*time.Second)
	if f.Prometheus.Err == nil {
		t.Fatal("no error from a closed server")
	}
	r := Run(f)
	if r.Verdict != Healthy {
		t.Errorf("verdict %s (%s): an unreachable Prometheus is not a cluster problem", r.Verdict, r.Reason)
	}
	c := findCheck(t, r, CheckPromTarget)
	if c.Status != Skipped || !strings.Contains(c.Evidence, "could not query Prometheus at "+url) {
		t.Errorf("%s: %s %s", c.Name, c.Status, c.Evidence)
	}
}
