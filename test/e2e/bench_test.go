package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/devcluster"
	"github.com/virtop-dev/virtop/internal/localcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// benchNodes is the size of the large cluster of the benchmark.
const benchNodes = 100

// requestCounts are virtop_api_requests_total's samples by verb and
// resource.
type requestCounts map[[2]string]float64

var requestSample = regexp.MustCompile(`^virtop_api_requests_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// scrapeRequests reads virtop_api_requests_total from the operator's HTTPS
// metrics endpoint (a self-signed certificate).
func scrapeRequests(ctx context.Context, addr string) (requestCounts, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed metrics certificate
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	out := requestCounts{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestSample.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var verb, res string
		for _, l := range labelPair.FindAllStringSubmatch(m[1], -1) {
			switch l[1] {
			case "verb":
				verb = l[2]
			case "resource":
				res = l[2]
			}
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[[2]string{verb, res}] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no virtop_api_requests_total samples yet")
	}
	return out, nil
}

func mustScrape(t *testing.T, addr string) requestCounts {
	t.Helper()
	var out requestCounts
	framework.Eventually(t, "the operator's metrics", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		out, err = scrapeRequests(ctx, addr)
		return err == nil, err
	})
	return out
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// delta is after - before by verb, by verb and resource, and the writes.
func (after requestCounts) delta(before requestCounts) (byVerb map[string]float64, byKey requestCounts, writes float64) {
	byVerb, byKey = map[string]float64{}, requestCounts{}
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		byVerb[k[0]] += d
		byKey[k] = d
		if isWrite(k[0]) {
			writes += d
		}
	}
	return byVerb, byKey, writes
}

func formatVerbs(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	total := 0.0
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%g", k, m[k])
		total += m[k]
	}
	return fmt.Sprintf("total=%g%s", total, b.String())
}

func formatKeys(m requestCounts) string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s=%g", k[0], k[1], m[k]))
	}
	return strings.Join(parts, ", ")
}

// installTimed creates the KubeVirt resource and returns the time from its
// creation to Available (and not Progressing), with the requests the
// operator sent meanwhile.
func installTimed(t *testing.T, env *framework.Env, c client.Client, metricsAddr string, nodes int, timeout time.Duration) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: devcluster.InstallNamespace}}
	if err := localcluster.Prepare(kv); err != nil {
		t.Fatal(err)
	}
	before := mustScrape(t, metricsAddr)
	created := time.Now()
	if err := c.Create(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
	framework.WaitKubeVirt(t, c, fmt.Sprintf("Available with %d nodes", nodes), timeout, framework.Available)
	took := time.Since(created)
	verbs, byKey, writes := mustScrape(t, metricsAddr).delta(before)
	t.Logf("MEASURE KubeVirt created -> Available with %d fake nodes: %s", nodes, took.Round(100*time.Millisecond))
	t.Logf("MEASURE API requests from created to Available with %d fake nodes: %s (writes %g)", nodes, formatVerbs(verbs), writes)
	t.Logf("install requests by verb and resource: %s", formatKeys(byKey))
}

func deleteKubeVirt(t *testing.T, c client.Client) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: devcluster.InstallNamespace}}
	start := time.Now()
	if err := c.Delete(context.Background(), kv); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, "the KubeVirt resource gone", 5*time.Minute, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
	t.Logf("MEASURE KubeVirt deleted -> gone: %s", time.Since(start).Round(100*time.Millisecond))
}

// TestBenchInstall measures issue 5's figures: created -> Available with
// the suite's fake nodes and with 100, and the API requests of an idle
// minute (the target: no writes). It runs only with VIRTOP_BENCH=1
// (`make bench-e2e`).
func TestBenchInstall(t *testing.T) {
	if os.Getenv("VIRTOP_BENCH") != "1" {
		t.Skip("benchmark: set VIRTOP_BENCH=1 (make bench-e2e) to run it")
	}
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	c := env.Client(t)
	ctx := context.Background()
	metricsAddr, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	// The last --metrics-bind-address wins over HostOperatorFlags' "0".
	op := env.Operator(t, append(framework.HostOperatorArgs(t), "--metrics-bind-address", metricsAddr)...).Start()
	defer op.Stop(10 * time.Second)
	startup := mustScrape(t, metricsAddr)
	verbs, _, _ := startup.delta(nil)
	t.Logf("MEASURE API requests of the operator's start (no KubeVirt): %s", formatVerbs(verbs))

	// (a) The suite's nodes.
	installTimed(t, env, c, metricsAddr, env.Nodes, 5*time.Minute)

	// (b) An idle minute.
	before := mustScrape(t, metricsAddr)
	idleStart := time.Now()
	time.Sleep(60 * time.Second)
	after := mustScrape(t, metricsAddr)
	minutes := time.Since(idleStart).Minutes()
	verbs, byKey, writes := after.delta(before)
	for k, v := range verbs {
		verbs[k] = v / minutes
	}
	t.Logf("MEASURE API requests per idle minute with %d fake nodes: %s", env.Nodes, formatVerbs(verbs))
	t.Logf("MEASURE writes per idle minute: %g (target 0)", writes/minutes)
	if len(byKey) > 0 {
		t.Logf("idle requests by verb and resource: %s", formatKeys(byKey))
	}
	if writes > 0 {
		t.Errorf("the operator wrote %g times in an idle minute", writes)
	}

	// (c) 100 nodes.
	deleteKubeVirt(t, c)
	t.Cleanup(func() {
		for i := env.Nodes; i < benchNodes; i++ {
			n := devcluster.FakeNode(env.Cluster.Name, i, false)
			if err := c.Delete(context.Background(), n); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting node %s: %v", n.Name, err)
			}
		}
	})
	nodesStart := time.Now()
	if err := env.Cluster.EnsureNodes(ctx, benchNodes, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE %d more fake nodes created and Ready in %s", benchNodes-env.Nodes, time.Since(nodesStart).Round(100*time.Millisecond))
	installTimed(t, env, c, metricsAddr, benchNodes, 10*time.Minute)

	before = mustScrape(t, metricsAddr)
	time.Sleep(60 * time.Second)
	verbs, _, writes = mustScrape(t, metricsAddr).delta(before)
	t.Logf("MEASURE API requests per idle minute with %d fake nodes: %s (writes %g)", benchNodes, formatVerbs(verbs), writes)
	deleteKubeVirt(t, c)
}
