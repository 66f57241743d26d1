package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// kubevirtJob is the job of KubeVirt's targets: prometheus-operator names
// it after the Service the ServiceMonitor selects.
const kubevirtJob = "kubevirt-prometheus-metrics"

// backfillWindow and backfillStep shape the backfilled samples: they end
// now, so an instant query (5 minutes of lookback) sees them for the few
// minutes a case takes.
const (
	backfillWindow = 10 * time.Minute
	backfillStep   = 15 * time.Second
)

// rulesFile is virtop's rules for the running version, rendered by the
// built binary (`virtop rules -o json`), as a Prometheus rule file.
func (s *installed) rulesFile(t *testing.T) []byte {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	if err := s.c.Get(context.Background(), framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	const bound = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := framework.Command(ctx, s.env.VirtopBin, "rules", "--version", kv.Status.ObservedKubeVirtVersion, "-o", "json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(framework.CommandError(ctx, cmd, bound, err))
	}
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(out, &pr); err != nil || len(pr.Spec) == 0 {
		t.Fatalf("virtop rules printed no PrometheusRule (%v): %s", err, out)
	}
	// A rule file is the PrometheusRule's spec ({"groups": [...]}); JSON is
	// YAML.
	return pr.Spec
}

// scrapedSeries are the series Prometheus would hold after scraping the
// ready pods of the metrics Service through KubeVirt's ServiceMonitor:
// up == 1 with the target labels prometheus-operator gives them, and
// component metrics.
func (s *installed) scrapedSeries(t *testing.T) []framework.PromSeries {
	t.Helper()
	var pods corev1.PodList
	if err := s.c.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels{vocab.PrometheusLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	var out []framework.PromSeries
	leader := false
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !podReady(&p) {
			continue
		}
		comp := p.Labels["kubevirt.io"]
		target := map[string]string{
			"job": kubevirtJob, "namespace": p.Namespace, "pod": p.Name, "container": comp,
			"instance": p.Status.PodIP + ":8443", "service": kubevirtJob, "endpoint": "metrics",
		}
		with := func(extra map[string]string) map[string]string {
			m := map[string]string{}
			for k, v := range target {
				m[k] = v
			}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		out = append(out,
			framework.PromSeries{Name: "up", Labels: target, Value: 1},
			framework.PromSeries{Name: "kubevirt_workqueue_depth", Labels: with(map[string]string{"name": comp}), Value: 0},
		)
		if comp == vocab.VirtController {
			lead := 0.0
			if !leader {
				leader, lead = true, 1
			}
			out = append(out,
				framework.PromSeries{Name: "kubevirt_virt_controller_ready_status", Labels: target, Value: 1},
				framework.PromSeries{Name: "kubevirt_virt_controller_leading_status", Labels: target, Value: lead},
			)
		}
	}
	if len(out) == 0 {
		t.Fatal("no ready pod labelled prometheus.kubevirt.io=true to scrape")
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// otherTargets are series of a target that is not KubeVirt's, so that the
// Prometheus of the target-absent case is not empty.
func otherTargets() []framework.PromSeries {
	ksm := map[string]string{"job": "kube-state-metrics", "namespace": "monitoring", "pod": "kube-state-metrics-6d4b7c9f5-x2x4q", "instance": "10.0.0.99:8080"}
	return []framework.PromSeries{{Name: "up", Labels: ksm, Value: 1}}
}

func (s *installed) startPrometheus(t *testing.T, series []framework.PromSeries) *framework.PrometheusServer {
	t.Helper()
	end := time.Now()
	om := framework.OpenMetrics(series, end.Add(-backfillWindow), end, backfillStep)
	return s.env.StartPrometheus(t, om, map[string][]byte{"kubevirt-rules.yaml": s.rulesFile(t)})
}

func (s *installed) testPrometheusHealthy(t *testing.T) {
	s.baseline(t)
	series := s.scrapedSeries(t)
	prom := s.startPrometheus(t, series)
	targets := 0
	for _, x := range series {
		if x.Name == "up" {
			targets++
		}
	}
	r := s.doctorUntil(t, "Healthy with the Prometheus checks", verdictIs("Healthy", "prometheus/target", "ok"), "--prometheus-url", prom.URL)
	expect(t, r, 0, nil, "prometheus/target", "ok", fmt.Sprintf("%d KubeVirt targets, all up, covering every ready pod", targets))
	expect(t, r, 0, nil, "prometheus/metrics", "ok", "kubevirt_* metric names scraped", "virt-api", "virt-controller", "virt-handler")
	expect(t, r, 0, nil, "prometheus/rules", "ok", "KubeVirt alerts loaded in", "kubevirt-rules.yaml")
	if _, ok := r.check("prometheus/alerts"); !ok {
		t.Error("no prometheus/alerts check with --prometheus-url")
	}
}

func (s *installed) testPrometheusTargetAbsent(t *testing.T) {
	s.baseline(t)
	prom := s.startPrometheus(t, otherTargets())
	ready := len(s.scrapedSeries(t)) > 0
	if !ready {
		t.Fatal("no ready pod to be missing from Prometheus")
	}
	r := s.doctorUntil(t, "MonitoringArtefact naming the scrape target", verdictIs("MonitoringArtefact", "prometheus/target", "fail"), "--prometheus-url", prom.URL)
	expect(t, r, 1, []string{"virt-api and virt-controller are ready", linkTarget}, "prometheus/target", "fail",
		`has no up{job="kubevirt-prometheus-metrics"} series`, "target absent while pods ready")
	// The rules are loaded all the same: only the target is missing.
	expect(t, r, 1, nil, "prometheus/rules", "ok", "KubeVirt alerts loaded")
	if c, _ := r.check("prometheus/metrics"); c.Status != "skipped" {
		t.Errorf("prometheus/metrics is %s (%s) with no target up, want skipped", c.Status, c.Evidence)
	}
	if strings.Contains(r.report.Reason, "controlplane/") {
		t.Errorf("the reason blames the control plane: %s", r.report.Reason)
	}
}
