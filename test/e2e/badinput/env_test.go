package badinput

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// installVersion is the version the shared install runs.
const installVersion = "v1.5.0"

// operator is the operator under test with its metrics address.
type operator struct {
	*framework.Process
	metrics framework.Metrics
}

// startOperator starts the built operator as a host process with its
// webhook on loopback and its metrics served on a known address (the last
// --metrics-bind-address wins over HostOperatorArgs' "0").
func startOperator(t *testing.T, env *framework.Env, extra ...string) *operator {
	t.Helper()
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	metrics := env.MetricsEndpoint(t)
	args := append(framework.HostOperatorArgs(t), metrics.Args()...)
	args = append(args, extra...)
	return &operator{Process: env.Operator(t, args...).Start(), metrics: metrics}
}

// alive fails the test if the operator ever exited on its own.
func (o *operator) alive(t *testing.T) {
	t.Helper()
	if exited, codes := o.EverExited(); exited || !o.Running() {
		t.Fatalf("the operator exited (exit codes %v, running %v)", codes, o.Running())
	}
}

// ensureInstalled creates the suite's KubeVirt resource at installVersion
// if there is none and waits until it is Available there.
func ensureInstalled(t *testing.T, c client.Client) *kvv1.KubeVirt {
	t.Helper()
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	err := c.Get(ctx, framework.KubeVirtKey, kv)
	if apierrors.IsNotFound(err) {
		kv = framework.NewKubeVirt(t, installVersion)
		start := time.Now()
		if err := c.Create(ctx, kv); err != nil {
			t.Fatal(err)
		}
		framework.WaitKubeVirt(t, c, "Available at "+installVersion, 3*time.Minute, framework.RolledOutAt(installVersion))
		t.Logf("MEASURE KubeVirt created -> Available: %s", time.Since(start).Round(100*time.Millisecond))
	} else if err != nil {
		t.Fatal(err)
	}
	settled(t, c, "Available and settled", framework.RolledOutAt(installVersion))
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// settled waits until ok holds and the status describes the current
// generation.
func settled(t *testing.T, c client.Client, what string, ok func(*kvv1.KubeVirt) (bool, string)) {
	t.Helper()
	framework.WaitKubeVirt(t, c, what, 3*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		done, why := ok(kv)
		if kv.Status.ObservedGeneration == nil || *kv.Status.ObservedGeneration != kv.Generation {
			return false, fmt.Sprintf("generation %d not observed yet; %s", kv.Generation, why)
		}
		return done, why
	})
}

// ---- the operator's API requests (virtop_api_requests_total) ----

func (o *operator) requests(t *testing.T) framework.RequestCounts {
	t.Helper()
	return framework.MustScrape(t, o.metrics)
}

// requestDelta returns the requests and writes of after - before, and a
// summary by verb and resource.
func requestDelta(after, before framework.RequestCounts) (total, writes float64, summary string) {
	byVerb, byKey, writes := after.Delta(before)
	for _, v := range byVerb {
		total += v
	}
	return total, writes, framework.FormatKeys(byKey)
}

// Bounds of the hot-loop check over quietWindow: an idle operator sends a
// handful of requests at most (a requeue's reads); a loop that rewrites
// status or retries without backoff sends hundreds.
const (
	quietWindow      = 10 * time.Second
	maxQuietRequests = 20
	maxQuietWrites   = 2
)

// quiet measures the operator's API requests and the KubeVirt resource's
// writes over quietWindow and fails the test above the bounds.
func quiet(t *testing.T, c client.Client, op *operator, what string) {
	t.Helper()
	before := op.requests(t)
	kvBefore := &kvv1.KubeVirt{}
	if err := c.Get(context.Background(), framework.KubeVirtKey, kvBefore); err != nil {
		t.Fatal(err)
	}
	time.Sleep(quietWindow)
	kvAfter := &kvv1.KubeVirt{}
	if err := c.Get(context.Background(), framework.KubeVirtKey, kvAfter); err != nil {
		t.Fatal(err)
	}
	total, writes, summary := requestDelta(op.requests(t), before)
	t.Logf("MEASURE %s: operator API requests in %s: %g (writes %g) [%s]", what, quietWindow, total, writes, summary)
	if total > maxQuietRequests || writes > maxQuietWrites {
		t.Errorf("hot loop after %s: %g requests, %g writes in %s (bounds %d, %d): %s",
			what, total, writes, quietWindow, maxQuietRequests, maxQuietWrites, summary)
	}
	if kvBefore.ResourceVersion != kvAfter.ResourceVersion {
		t.Errorf("the KubeVirt resource was written during the %s after %s (resourceVersion %s -> %s)",
			quietWindow, what, kvBefore.ResourceVersion, kvAfter.ResourceVersion)
	}
}

// untouched fails the test if a managed object changed, appeared or
// disappeared since before.
func untouched(t *testing.T, c client.Client, before map[string]string, what string, afterOpt ...map[string]string) {
	t.Helper()
	var after map[string]string
	if len(afterOpt) > 0 {
		after = afterOpt[0]
	} else {
		after = framework.ManagedResourceVersions(t, c)
	}
	var diffs []string
	for k, v := range before {
		switch a, ok := after[k]; {
		case !ok:
			diffs = append(diffs, k+" deleted")
		case a != v:
			diffs = append(diffs, fmt.Sprintf("%s written (%s -> %s)", k, v, a))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, k+" created")
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("the running control plane was touched by %s: %s", what, strings.Join(diffs, "; "))
	}
}
