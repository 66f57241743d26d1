package strategy_test

// The fidelity test: each release virtop renders, for the minimal KubeVirt
// resource of ../shared/upstream-strategies/kv-plain.json, compared object
// by object and field by field with what upstream's own operator renders for
// it (that directory's reference dumps, with and without a monitoring
// stack). Every difference must be a row of docs/upstream-differences.md,
// and every row must still be needed.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/tools/diff"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// referenceDir is ../shared/upstream-strategies beside the repository
// (VIRTOP_UPSTREAM_STRATEGIES overrides it).
func referenceDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "upstream-strategies")
	}
	abs, _ := filepath.Abs(dir)
	if _, err := os.Stat(filepath.Join(abs, "kv-plain.json")); err != nil {
		t.Skipf("no upstream reference strategies: %s is missing (set VIRTOP_UPSTREAM_STRATEGIES to the directory)", abs)
	}
	return abs
}

// differenceRow is a row of docs/upstream-differences.md and whether a
// difference needed it.
type differenceRow struct {
	*diff.Documented
	used bool
	// stamp: a row of the section "Every object" (the manager label and
	// the generation annotation), which touches every object; an object
	// whose only differences are stamps counts as identical.
	stamp bool
}

// strategyOnlySection holds rows about the strategy before the plan places
// it, which `virtop diff` shows and an installation does not.
const strategyOnlySection = "In the strategy, before it is applied"

func readDifferences(t *testing.T) []*differenceRow {
	t.Helper()
	docs, err := diff.ReadDocumented(filepath.Join("..", "..", "docs", "upstream-differences.md"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []*differenceRow
	for _, d := range docs {
		if d.Section != strategyOnlySection {
			rows = append(rows, &differenceRow{Documented: d, stamp: d.Section == "Every object"})
		}
	}
	return rows
}

// fidelityCase is one reference file of one release.
type fidelityCase struct {
	version    string
	monitoring bool
}

func (c fidelityCase) String() string {
	if c.monitoring {
		return c.version + "/monitoring"
	}
	return c.version
}

func TestFidelity(t *testing.T) {
	dir := referenceDir(t)
	rows := readDifferences(t)
	var mu sync.Mutex
	counts := map[string]string{}
	var cases []fidelityCase
	for _, v := range release.Versions() {
		if _, err := os.Stat(filepath.Join(dir, v, "strategy.yaml.gz")); err != nil {
			continue
		}
		cases = append(cases, fidelityCase{v, false}, fidelityCase{v, true})
	}
	if len(cases) == 0 {
		t.Fatalf("%s has no reference for any release of %v", dir, release.Versions())
	}
	t.Run("releases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				res, compared := compareWithReference(t, dir, c)
				undocumented := 0
				documented := map[string]int{}
				// check finds the row of a difference; it reports whether
				// the difference is more than a stamp.
				check := func(item string) bool {
					for _, r := range rows {
						if r.Matches(item) {
							mu.Lock()
							r.used = true
							mu.Unlock()
							documented[r.What]++
							return !r.stamp
						}
					}
					undocumented++
					if undocumented <= 40 {
						t.Errorf("undocumented difference from upstream: %s", item)
					}
					return true
				}
				for _, ref := range res.Added {
					check(objectName(ref) + " (virtop only)")
				}
				for _, ref := range res.Removed {
					check(objectName(ref) + " (upstream only)")
				}
				differ := 0
				for _, d := range res.Changed {
					real := false
					for _, f := range d.Fields {
						if check(objectName(d.ObjectRef) + " " + f.Path) {
							real = true
						}
					}
					if real {
						differ++
					}
				}
				if undocumented > 40 {
					t.Errorf("... %d undocumented differences in all", undocumented)
				}
				var rowNames []string
				for w, n := range documented {
					rowNames = append(rowNames, fmt.Sprintf("%s (%d)", w, n))
				}
				slices.Sort(rowNames)
				mu.Lock()
				counts[c.String()] = fmt.Sprintf("%d objects compared, %d identical (but for the stamps of every object), %d with documented differences, %d upstream only, %d virtop only; rows: %s",
					compared, compared-differ-len(res.Removed), differ, len(res.Removed), len(res.Added), strings.Join(rowNames, "; "))
				mu.Unlock()
			})
		}
	})
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t.Logf("%s: %s", k, counts[k])
	}
	if t.Failed() {
		return
	}
	for _, r := range rows {
		if !r.used {
			t.Errorf("docs/upstream-differences.md: row %q matches no difference any more: remove it", r.What)
		}
	}
}

func objectName(r diff.ObjectRef) string { return r.Kind + "/" + r.Name }

// kvPlain reads the reference KubeVirt resource for a release.
func kvPlain(t *testing.T, dir, version string) *kvv1.KubeVirt {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "kv-plain.json"))
	if err != nil {
		t.Fatal(err)
	}
	kv := &kvv1.KubeVirt{}
	if err := json.Unmarshal(raw, kv); err != nil {
		t.Fatal(err)
	}
	kv.Spec.ImageTag = version
	return kv
}

// compareWithReference renders a release for kv-plain.json and compares it
// with the reference, both brought to what lands in the cluster.
func compareWithReference(t *testing.T, dir string, c fidelityCase) (diff.Result, int) {
	t.Helper()
	file := "strategy.yaml.gz"
	if c.monitoring {
		file = "strategy-monitoring.yaml.gz"
	}
	raw, err := os.ReadFile(filepath.Join(dir, c.version, file))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := strategy.ReadManifests(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	kv := kvPlain(t, dir, c.version)
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: kv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ours := virtopAsApplied(t, s, cfg, c.monitoring)
	if !strategy.IsUpstream(ref) || strategy.UpstreamVersion(ref) != c.version {
		t.Fatalf("%s: not upstream's strategy of %s (version %q)", file, c.version, strategy.UpstreamVersion(ref))
	}
	theirs, err := strategy.AsAppliedByUpstream(ref, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range theirs {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			upstreamCreateTLS(ds)
		}
	}
	return diff.Options{ShowStamps: true}.Compare(theirs, ours), len(theirs)
}

// virtopAsApplied is the strategy as the plan applies it to a cluster like
// the reference's: every API served, virt-api answering and, with the
// monitoring stack, Prometheus's account prometheus-k8s in namespace
// monitoring (upstream's second default); without it the monitoring objects
// stay out, as upstream renders none. virtop's own bookkeeping (its
// virtop.dev/ annotations) is dropped.
func virtopAsApplied(t *testing.T, s *strategy.Strategy, cfg *config.DeploymentConfig, monitoring bool) []client.Object {
	t.Helper()
	p := &plan.Plan{}
	for _, o := range s.Objects {
		st, _ := stage.Of(o)
		if st == stage.Monitoring && !monitoring {
			continue
		}
		p.Objects = append(p.Objects, o.DeepCopyObject().(client.Object))
	}
	if monitoring {
		plan.PlaceMonitoring(p, &placement.Input{
			InstallNamespace:  cfg.Namespace,
			ServiceMonitorAPI: true, PrometheusRuleAPI: true,
			Accounts: []types.NamespacedName{{Namespace: "monitoring", Name: "prometheus-k8s"}},
		})
	}
	// A fresh installation: virt-handler's staged TLS rollout starts in
	// its final form.
	for _, o := range p.Objects {
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			plan.StageHandlerTLS(ds, nil)
		}
	}
	for _, o := range p.Objects {
		ann := o.GetAnnotations()
		for k := range ann {
			if strings.HasPrefix(k, vocab.VirtopKeyPrefix) {
				delete(ann, k)
			}
		}
		o.SetAnnotations(ann)
	}
	return p.Objects
}

// upstreamCreateTLS is upstream's create path for a virt-handler that can
// validate migration peers (apps.go: supportsTLS, insertTLS,
// unattachCertificateSecret), written out here so the comparison does not
// take the facts from the code it checks (internal/plan's staged rollout):
// the fresh-install form of both sides is compared.
func upstreamCreateTLS(ds *appsv1.DaemonSet) {
	if ds.Labels[vocab.SupportsMigrationCNsLabel] != "true" || len(ds.Spec.Template.Spec.Containers) == 0 {
		return
	}
	c := &ds.Spec.Template.Spec.Containers[0]
	if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, "migration-cn-types") }) {
		c.Args = append(c.Args, "--migration-cn-types", "migration")
	}
	const old = "kubevirt-virt-handler-certs"
	pod := &ds.Spec.Template.Spec
	pod.Volumes = slices.DeleteFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == old })
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == old })
}
