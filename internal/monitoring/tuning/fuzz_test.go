package tuning

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/internal/release"
)

// FuzzRender: any tuning document decodes and renders, for a release,
// to rules or an error, never a panic; a tuning that renders also gives
// the rule options promtool's files are made with.
func FuzzRender(f *testing.F) {
	sample, err := os.ReadFile("../../../config/samples/kubevirtmonitoring.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(sample)
	f.Add([]byte("apiVersion: virtop.dev/v1alpha1\nkind: KubeVirtMonitoring\nspec:\n  alerts:\n  - name: VirtApiRESTErrorsBurst\n    parameters: {ratio: \"x\", window: \"-1s\"}\n"))
	f.Add([]byte("apiVersion: virtop.dev/v1alpha1\nkind: KubeVirtMonitoring\nspec:\n  additionalGroups:\n  - name: g\n    rules:\n    - alert: A\n      expr: 'sum(rate(x[5m])) >'\n"))
	versions := release.Builtin().Versions()
	f.Fuzz(func(t *testing.T, data []byte) {
		tu, err := Decode(data)
		if err != nil {
			return
		}
		// One release per input (rendering all is slow to fuzz).
		v := versions[len(data)%len(versions)]
		if _, err := Render(input(v), tu); err != nil {
			return
		}
		if _, err := RulesOptions(input(v), tu); err != nil {
			t.Fatalf("%s: a tuning that renders has no rule options: %v", v, err)
		}
	})
}
