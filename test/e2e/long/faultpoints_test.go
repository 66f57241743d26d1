//go:build long

package long

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// A crash point of internal/faultpoint, armed as "name" or "name#n"; half
// names a stage instead: the point is then after half of that stage's
// objects were applied ("object:<stage>#<half>").
type crashPoint struct {
	name string
	half stage.Stage
	// afterRecord: the point is reached only after the rollout records
	// its deployment (the later steps of virt-handler's TLS rollout), so
	// a rollout that looks finished is not a sign it was missed.
	afterRecord bool
}

func (p crashPoint) spec(w *want) faultpoint.Spec {
	if p.half != "" {
		return faultpoint.Spec{Name: "object:" + string(p.half), N: max(1, w.stageSizes[p.half]/2)}
	}
	s, _ := faultpoint.Parse(p.name)
	return s
}

// Eleven points of a fresh install (in the order a pass reaches them)
// and eleven of an upgrade: after stages, around the strategy ConfigMap's
// write (which follows the pass's apply: strategy:applied is the objects
// of the first stage applied, the ConfigMap not yet encoded), inside
// stages, after prune.
var (
	installPoints = []crashPoint{
		{name: "stage:crds"},
		{name: "strategy:applied"},
		{name: "strategy:before-write"},
		{name: "strategy:after-write"},
		{half: stage.RBAC},
		{name: "stage:certificates"},
		{name: "stage:services"},
		{name: "stage:virt-api"},
		{name: "object:virt-controller"},
		{name: "stage:virt-handler"},
		{name: "pruned"},
	}
	upgradePoints = []crashPoint{
		{name: "stage:crds"},
		{name: "strategy:applied"},
		{name: "strategy:before-write"},
		{name: "strategy:after-write"},
		{half: stage.RBAC},
		{name: "stage:services"},
		{name: "stage:virt-handler"},
		{name: "object:virt-controller"},
		{name: "stage:virt-api"},
		{name: "stage:instancetypes"},
		{name: "pruned"},
	}
)

// EachPointEnv, set to 1, gives every crash point a convergence of its
// own from a fresh state (an uninstall before each install point, a
// rollback before each upgrade point): about 20 minutes on a loaded
// 2-core machine, too long for `make test-e2e-long`'s budget, whose
// default chains the points (see TestKilledAtCrashPoints).
const EachPointEnv = "VIRTOP_LONG_EACH_POINT"

// The operator is killed with SIGKILL at 22 crash points, eleven over a
// fresh install of v1.5.0 and eleven over an upgrade to v1.5.3, and
// restarted.
//
// By default the points of each rollout are chained: the operator starts
// with the first point armed, dies there, restarts with the next one
// armed, and so on; each restart resumes from the state the previous crash
// left (a crash during recovery from a crash). After every crash nothing
// stray may exist (no object twice, nothing neither version wants, no
// unknown strategy ConfigMap); after the last, an unarmed restart must
// converge with every object once. With VIRTOP_LONG_EACH_POINT=1 every
// point instead starts from a fresh install (or from v1.5.0 for the
// upgrade) and converges on its own.
func TestKilledAtCrashPoints(t *testing.T) {
	s := newSuite(t)
	s.env.FaultsBinary(t)
	each := os.Getenv(EachPointEnv) == "1"

	start := time.Now()
	s.ensureUninstalled()
	if each {
		for i, p := range installPoints {
			s.ensureUninstalled()
			s.setVersion(fromVersion)
			s.crashAndRecover(fmt.Sprintf("install %d/%d", i+1, len(installPoints)), p, fromVersion)
		}
	} else {
		s.setVersion(fromVersion)
		s.crashChain("install", installPoints, fromVersion, nil)
	}
	t.Logf("MEASURE %d install crash points: %s", len(installPoints), time.Since(start).Round(time.Second))

	start = time.Now()
	s.ensureInstalled(fromVersion)
	if each {
		for i, p := range upgradePoints {
			s.ensureInstalled(fromVersion)
			prev := s.mustKubeVirt().Status.ObservedDeploymentID
			s.setVersion(toVersion)
			s.crashAndRecover(fmt.Sprintf("upgrade %d/%d", i+1, len(upgradePoints)), p, toVersion, prev)
		}
	} else {
		from := s.mustKubeVirt()
		w, err := wanted(context.Background(), s.c, from)
		if err != nil {
			t.Fatal(err)
		}
		s.setVersion(toVersion)
		s.crashChain("upgrade", upgradePoints, toVersion, w, from.Status.ObservedDeploymentID)
	}
	t.Logf("MEASURE %d upgrade crash points: %s", len(upgradePoints), time.Since(start).Round(time.Second))
}

// crashChain runs one operator process after the other against the
// KubeVirt resource as it is (its spec already moved to version), each
// with the next point armed, checks each dies there by SIGKILL and leaves
// nothing stray (from holds what the previous version wanted, nil for an
// install), then restarts it unarmed and checks convergence.
func (s *suite) crashChain(label string, points []crashPoint, version string, from *want, prevIDs ...string) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	w, err := wanted(ctx, s.c, s.mustKubeVirt())
	if err != nil {
		t.Fatal(err)
	}
	wants := []*want{w}
	if from != nil {
		wants = append(wants, from)
	}
	op := s.faultyOperator()
	for i, p := range points {
		spec := p.spec(w)
		step := fmt.Sprintf("%s %d/%d", label, i+1, len(points))
		died, atDeath := s.runToCrash(op, step, spec, version, p.afterRecord)
		live, err := listManaged(ctx, s.c)
		if err != nil {
			t.Fatal(err)
		}
		if bad := checkStray(live, framework.KubeVirtKey.Namespace, wants, prevIDs...); len(bad) > 0 {
			t.Errorf("%s: after the crash at %s: %d problems: %s", step, spec, len(bad), strings.Join(bad, "; "))
		}
		t.Logf("MEASURE %s: crash point %s hit %s after start (%s, %d managed objects)", step, spec, died.Round(100*time.Millisecond), atDeath, len(live))
		if t.Failed() {
			t.FailNow()
		}
	}
	op.Arm("")
	op.Start()
	took := s.converged(version, prevIDs...)
	alive(t, op, len(points))
	t.Logf("MEASURE %s: converged %s after the unarmed restart that followed %d crashes", label, took.Round(100*time.Millisecond), len(points))
	op.Stop(10 * time.Second)
}

// crashAndRecover runs an operator with the point armed against the
// KubeVirt resource as it is (its spec already moved to version), waits
// until the point kills it with SIGKILL, restarts it unarmed and checks
// convergence.
func (s *suite) crashAndRecover(label string, p crashPoint, version string, prevIDs ...string) {
	t := s.t
	t.Helper()
	w, err := wanted(context.Background(), s.c, s.mustKubeVirt())
	if err != nil {
		t.Fatal(err)
	}
	spec := p.spec(w)
	op := s.faultyOperator()
	died, atDeath := s.runToCrash(op, label, spec, version, p.afterRecord)
	op.Arm("")
	op.Start()
	took := s.converged(version, prevIDs...)
	alive(t, op, 1)
	t.Logf("MEASURE %s: crash point %s hit %s after start (%s); converged %s after the restart",
		label, spec, died.Round(100*time.Millisecond), atDeath, took.Round(100*time.Millisecond))
	op.Stop(10 * time.Second)
}

// runToCrash starts op with spec armed and waits until it dies there by
// SIGKILL; it fails fast when the rollout to version finishes without
// reaching the point, unless the point comes after the record
// (afterRecord: then only the wait's bound ends it). It returns how long
// the run lasted and the KubeVirt resource's state at the crash.
func (s *suite) runToCrash(op *framework.Process, label string, spec faultpoint.Spec, version string, afterRecord bool) (time.Duration, string) {
	t := s.t
	t.Helper()
	op.Arm(spec.String())
	logStart := op.LogSize()
	begin := time.Now()
	op.Start()
	var doneSince time.Time
	poll.Eventually(t, fmt.Sprintf("%s: the operator to die at %s", label, spec), rolloutTimeout, func(ctx context.Context) (bool, error) {
		if !op.Running() {
			return true, nil
		}
		kv, err := s.kubeVirt(ctx)
		if err != nil || kv == nil {
			return false, err
		}
		if ok, _ := framework.RolledOutAt(version)(kv); ok && !afterRecord && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID {
			if doneSince.IsZero() {
				doneSince = time.Now()
			} else if time.Since(doneSince) > 15*time.Second {
				t.Fatalf("%s: the rollout finished and the operator is still alive: crash point %s was never reached", label, spec)
			}
		}
		return false, fmt.Errorf("still running")
	})
	died := time.Since(begin)
	if !op.KilledBySIGKILL() {
		_, code := op.Exited()
		t.Fatalf("%s: the armed operator ended with code %d (%s), not by SIGKILL", label, code, op.LastExit())
	}
	if want := fmt.Sprintf("faultpoint: hit %s (hit #%d): SIGKILL", spec.Name, spec.N); !strings.Contains(op.LogSince(logStart), want) {
		t.Fatalf("%s: the operator died by SIGKILL but not at %s: its log lacks %q", label, spec, want)
	}
	kv := s.mustKubeVirt()
	return died, fmt.Sprintf("observed %q, target %s, phase %s", kv.Status.ObservedKubeVirtVersion, kv.Spec.ImageTag, kv.Status.Phase)
}
