package plan

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/tuning"
	"github.com/virtop-dev/virtop/internal/recent"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Tuning is the KubeVirtMonitoring a plan honours.
type Tuning struct {
	// Resource is the honoured KubeVirtMonitoring (tuning.Select).
	Resource *v1alpha1.KubeVirtMonitoring
	// Release is the release whose rules the tuning is checked against;
	// nil when this binary has none for the version.
	Release *release.Release
	// Cache remembers recent renderings; nil renders every time.
	Cache *TuningCache
}

// TuningOutcome is what the tuning step did.
type TuningOutcome struct {
	// Result is the rendered tuning when it was applied.
	Result *tuning.Result
	// Err says why it was not applied: a *tuning.InvalidError (the
	// tuning's fault) or a version whose rules cannot be checked.
	Err error
	// Tuned are the objects the tuning rewrote.
	Tuned []strategy.Key
	// Waiting names the gates that keep the tunable objects out of the
	// plan (Build fills it in).
	Waiting string
}

// tunable reports whether an object is one a tuning rewrites.
func tunable(o client.Object) bool {
	kind := strategy.Kind(o)
	return (kind == "PrometheusRule" && o.GetName() == vocab.PrometheusRuleName) ||
		(kind == "ServiceMonitor" && o.GetName() == vocab.ServiceMonitorName)
}

// Tune applies a tuning to the monitoring objects among objs (placed by
// the plan, or as the strategy renders them for an offline dump) and
// returns the objects with the tuned ones replaced by copies; objs is not
// modified. A tuning that does not apply leaves every object as it is and
// says why in the outcome: monitoring never breaks because of a tuning.
func Tune(objs []client.Object, cfg *config.DeploymentConfig, t *Tuning) ([]client.Object, *TuningOutcome) {
	out := &TuningOutcome{}
	if t.Resource == nil {
		return objs, out
	}
	if t.Release == nil {
		out.Err = fmt.Errorf("this operator has no rules of KubeVirt %s to check the tuning against; the monitoring objects are installed as the install strategy holds them", cfg.Version)
		return objs, out
	}
	in := tuning.InputFor(cfg, t.Release)
	key := tuningKey{uid: t.Resource.UID, generation: t.Resource.Generation, deploymentID: cfg.ID, in: in, placed: placedFingerprint(objs)}
	var e *tuned
	if t.Cache != nil {
		e = t.Cache.Get(key)
	}
	if e == nil {
		e = render(objs, t.Resource, in)
		if t.Cache != nil {
			t.Cache.Put(key, e, keptTunings)
		}
	}
	if e.err != nil {
		out.Err = e.err
		return objs, out
	}
	out.Result = e.res
	// What the tuning leaves out (the dashboard of spec.dashboard.disabled)
	// is dropped; the rest keeps its place, tuned objects swapped in.
	kept := e.res.Drop(objs)
	res := make([]client.Object, len(kept))
	for i, o := range kept {
		res[i] = o
		if !tunable(o) {
			continue
		}
		k := strategy.KeyOf(o)
		if c, ok := e.objects[k]; ok {
			res[i] = c.DeepCopyObject().(client.Object)
			out.Tuned = append(out.Tuned, k)
		}
	}
	return res, out
}

func render(objs []client.Object, t *v1alpha1.KubeVirtMonitoring, in tuning.Input) *tuned {
	e := &tuned{objects: map[strategy.Key]client.Object{}}
	out, res, err := tuning.Apply(objs, t, in)
	if err != nil {
		e.err = err
		return e
	}
	e.res = res
	for _, o := range out {
		if tunable(o) {
			e.objects[strategy.KeyOf(o)] = o.DeepCopyObject().(client.Object)
		}
	}
	return e
}

// tuningWaits names the closed gates that keep the tunable objects out.
func tuningWaits(closed []ClosedGate) string {
	var waits []string
	for _, c := range closed {
		if (c.Object.Kind == "PrometheusRule" || c.Object.Kind == "ServiceMonitor") && c.Object.Name == vocab.PrometheusRuleName {
			waits = append(waits, fmt.Sprintf("%s waits for %s", c.Object.Kind, c.Gate))
		}
	}
	return strings.Join(waits, ", ")
}

// placedFingerprint sums up what the placement changed on the tunable
// objects (namespace, labels, annotations); the rest of them comes from the
// strategy, which the deployment ID names.
func placedFingerprint(objs []client.Object) string {
	var b strings.Builder
	for _, o := range objs {
		if !tunable(o) {
			continue
		}
		fmt.Fprintf(&b, "%s|", strategy.KeyOf(o))
		for _, m := range []map[string]string{o.GetLabels(), o.GetAnnotations()} {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(&b, "%q=%q,", k, m[k])
			}
			b.WriteString("|")
		}
	}
	return b.String()
}

// TuningCache remembers the last few rendered tunings. Rendering costs
// tens of milliseconds, so a steady pass renders again only when the
// tuning (its generation), the deployment or the placement of the
// monitoring objects changed. The zero value is ready to use.
type TuningCache = recent.Cache[tuningKey, *tuned]

// keptTunings bounds the tunings a TuningCache remembers.
const keptTunings = 4

type tuningKey struct {
	uid          types.UID
	generation   int64
	deploymentID string
	in           tuning.Input
	placed       string
}

// tuned is one rendering: the rewritten objects by key (shared, copied on
// use), or the error.
type tuned struct {
	objects map[strategy.Key]client.Object
	res     *tuning.Result
	err     error
}
