package realnode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// TestUpgradeOnRealNode upgrades the release before the default one to
// the default one with upstream's own components serving every webhook,
// failing closed, while a client creates VMs (dry run) every 250 ms: every
// create is recorded, none may be refused, and Available never leaves True
// nor Degraded becomes True. Upstream supports one minor release forward at
// a time, so that is the upgrade every user of the default release makes.
func TestUpgradeOnRealNode(t *testing.T) {
	env := framework.Require(t)
	// Two and a half minutes: make test-all's, beyond CI's budget (the
	// upgrade suite walks every release on fake nodes in CI).
	if !testreleases.All(t) {
		t.Skipf("%s=default: the upgrade on the real node runs in make test-all", testreleases.Env)
	}
	from, to := framework.ReleaseBeforeDefault(t)
	ctx := context.Background()
	c := env.Client(t)
	env.UpAt(t, devcluster.ClusterOptions{RealNode: true}, from)
	// The next release's images are on the node before the upgrade, as a
	// registry would serve them.
	if err := env.Cluster.LoadReleaseImages(ctx, to); err != nil {
		t.Fatal(err)
	}
	op := env.Operator(t, append(framework.HostOperatorArgs(t), "--leader-elect")...).Start()
	framework.WaitKubeVirt(t, c, "Available at "+from, waitLong, framework.RolledOutAt(from))
	checkRealPods(t, env, c)

	rec := env.RecordConditions(t)
	defer rec.Stop()
	load := env.StartVMLoad(framework.VMLoadOptions{Prefix: "upgrade", DryRun: true})
	start := time.Now()
	framework.SetImageTag(t, c, to)
	framework.WaitKubeVirt(t, c, "Available at "+to, waitLong, framework.RolledOutAt(to))
	took := time.Since(start)
	// A little more load after the rollout: the last replaced pods serve.
	time.Sleep(10 * time.Second)
	attempts := load.Stop()
	sent := len(attempts)
	var refusals []string
	for _, a := range framework.Failures(attempts) {
		refusals = append(refusals, a.String())
	}
	t.Logf("MEASURE upgrade %s -> %s on the real node: Available at %s after %s; %d VM creates (dry run) during it, %d refused",
		from, to, to, took.Round(100*time.Millisecond), sent, len(refusals))
	if len(refusals) > 0 {
		if len(refusals) > 10 {
			refusals = append(refusals[:10], fmt.Sprintf("… and %d more", len(refusals)-10))
		}
		t.Errorf("%d of %d VM creates refused during the upgrade:\n%s", len(refusals), sent, strings.Join(refusals, "\n"))
	}
	rec.CheckServedThroughout(t, "the upgrade "+from+" -> "+to)
	checkRealPods(t, env, c)
	checkUninstall(t, env, c)
	if t.Failed() {
		t.Logf("operator log:\n%s", op.Log())
	}
}
