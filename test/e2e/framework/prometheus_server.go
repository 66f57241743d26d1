package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// PrometheusServer is a real Prometheus server (the prometheus binary,
// Debian's package `prometheus` on CI) run as a child process of the test,
// serving a TSDB backfilled with promtool. It scrapes nothing: what it
// knows is what the test wrote, plus the rules it evaluates.
type PrometheusServer struct {
	// URL is the base URL of its HTTP API (http://127.0.0.1:<port>).
	URL string
	// Dir holds its configuration, rule files and TSDB.
	Dir     string
	Process *Process
}

// PromSeries is one series to backfill: a metric name, its labels and a
// constant value.
type PromSeries struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// PrometheusBinaries returns the paths of prometheus and promtool; the test
// fails when they are missing (CI installs Debian's package `prometheus`).
func PrometheusBinaries(t testing.TB) (prometheus, promtool string) {
	t.Helper()
	var missing []string
	for _, name := range []string{"prometheus", "promtool"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		if name == "prometheus" {
			prometheus = p
		} else {
			promtool = p
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s not found in PATH: install Debian's package prometheus (apt-get install prometheus; .ci/run does)", strings.Join(missing, " and "))
	}
	return prometheus, promtool
}

// OpenMetrics renders series as OpenMetrics text (every series a gauge),
// each sampled every step from start to end inclusive, for
// `promtool tsdb create-blocks-from openmetrics`.
func OpenMetrics(series []PromSeries, start, end time.Time, step time.Duration) string {
	byName := map[string][]PromSeries{}
	for _, s := range series {
		byName[s.Name] = append(byName[s.Name], s)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", n)
		for _, s := range byName[n] {
			lbl := formatLabels(s.Labels)
			for ts := start; !ts.After(end); ts = ts.Add(step) {
				fmt.Fprintf(&b, "%s%s %s %s\n", n, lbl, strconv.FormatFloat(s.Value, 'g', -1, 64), strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64))
			}
		}
	}
	b.WriteString("# EOF\n")
	return b.String()
}

func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// StartPrometheus backfills a TSDB from openMetrics (if any) with promtool, writes
// ruleFiles (file name -> content) and a configuration that loads them and
// scrapes nothing, starts prometheus on a free loopback port and waits
// until it is ready. It is stopped when the test ends.
func (e *Env) StartPrometheus(t testing.TB, openMetrics string, ruleFiles map[string][]byte) *PrometheusServer {
	t.Helper()
	return e.StartPrometheusWith(t, openMetrics, ruleFiles, PrometheusOptions{})
}

// PrometheusOptions place a Prometheus elsewhere than on a free loopback
// port.
type PrometheusOptions struct {
	// Netns runs it in that network namespace (`ip netns exec`, which
	// execs it: the process is prometheus itself).
	Netns string
	// Addr is its listen address (host:port), reachable from the test.
	Addr string
	// ScrapeConfigs are entries of scrape_configs (YAML, a list at column
	// 0); scraped every ScrapeInterval (default 2s). None: it scrapes
	// nothing.
	ScrapeConfigs  string
	ScrapeInterval time.Duration
}

// StartPrometheusWith is StartPrometheus with the server placed by o.
func (e *Env) StartPrometheusWith(t testing.TB, openMetrics string, ruleFiles map[string][]byte, o PrometheusOptions) *PrometheusServer {
	t.Helper()
	promBin, promtool := PrometheusBinaries(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	const bound = 2 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	// An empty openMetrics: nothing to backfill (a Prometheus that only
	// scrapes).
	if openMetrics != "" {
		input := filepath.Join(dir, "series.om")
		if err := os.WriteFile(input, []byte(openMetrics), 0o644); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		cmd := Command(ctx, promtool, "tsdb", "create-blocks-from", "openmetrics", input, data)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", CommandError(ctx, cmd, bound, err), out)
		}
		t.Logf("MEASURE promtool backfill of %d bytes: %s", len(openMetrics), time.Since(start).Round(time.Millisecond))
	}

	var cfg strings.Builder
	cfg.WriteString("global:\n  evaluation_interval: 5s\n")
	if o.ScrapeConfigs != "" {
		interval := o.ScrapeInterval
		if interval == 0 {
			interval = 2 * time.Second
		}
		fmt.Fprintf(&cfg, "  scrape_interval: %s\nscrape_configs:\n", model.Duration(interval))
		for _, line := range strings.Split(strings.TrimRight(o.ScrapeConfigs, "\n"), "\n") {
			cfg.WriteString("  " + line + "\n")
		}
	}
	if len(ruleFiles) > 0 {
		cfg.WriteString("rule_files:\n")
		names := make([]string, 0, len(ruleFiles))
		for n := range ruleFiles {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			p := filepath.Join(dir, n)
			if err := os.WriteFile(p, ruleFiles[n], 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&cfg, "  - %s\n", strconv.Quote(p))
		}
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(ruleFiles) > 0 || o.ScrapeConfigs != "" {
		// Fail here, with promtool's message, rather than with a
		// Prometheus that exits at start.
		cmd := Command(ctx, promtool, "check", "config", cfgPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", CommandError(ctx, cmd, bound, err), out)
		}
	}
	if err := os.MkdirAll(e.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	safe := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(t.Name(), "_")

	// A port found free can be taken before Prometheus binds it: try again
	// with another.
	for attempt := 1; ; attempt++ {
		addr := o.Addr
		if addr == "" {
			var err error
			if addr, err = devcluster.FreeLoopbackAddr(); err != nil {
				t.Fatal(err)
			}
		}
		bin, args := promBin, []string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + data,
			"--web.listen-address=" + addr,
			"--log.level=warn",
		}
		if o.Netns != "" {
			bin, args = "ip", append([]string{"netns", "exec", o.Netns, promBin}, args...)
		}
		p := &Process{
			t: t, Name: "prometheus", Bin: bin,
			Args:    args,
			LogPath: filepath.Join(e.LogDir(), fmt.Sprintf("%s.prometheus.%d.log", safe, time.Now().UnixNano())),
		}
		t.Cleanup(func() {
			if p.Running() {
				p.Stop(10 * time.Second)
			}
			if t.Failed() {
				t.Logf("---- log of prometheus (%s) ----\n%s\n---- end of log ----", p.LogPath, p.Log())
			}
		})
		p.Start()
		s := &PrometheusServer{URL: "http://" + addr, Dir: dir, Process: p}
		startedAt := time.Now()
		if s.waitReady(t, p) {
			t.Logf("MEASURE prometheus ready at %s after %s", s.URL, time.Since(startedAt).Round(time.Millisecond))
			return s
		}
		if attempt == 3 {
			t.Fatalf("prometheus exited before it was ready, 3 times; last log:\n%s", p.Log())
		}
		t.Logf("prometheus exited before it was ready (attempt %d), trying another port; its log:\n%s", attempt, p.Log())
	}
}

// waitReady waits until /-/ready answers 200; false when the process
// exited first.
func (s *PrometheusServer) waitReady(t testing.TB, p *Process) bool {
	t.Helper()
	ready := false
	poll.Eventually(t, "prometheus "+s.URL+" ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
		if exited, code := p.Exited(); exited {
			return true, fmt.Errorf("exited with code %d", code)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("/-/ready: %s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		ready = true
		return true, nil
	})
	return ready
}

// Query runs an instant query and returns the samples' values by the
// label named by, "" when the sample lacks it.
func (s *PrometheusServer) Query(ctx context.Context, query, by string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(query), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", query, resp.Status, err)
	}
	if out.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, out.Error)
	}
	vals := map[string]float64{}
	for _, r := range out.Data.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", query, r.Value[1], err)
		}
		vals[r.Metric[by]] = v
	}
	return vals, nil
}
