package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestBaseIsTheKustomizeBase: the embedded base is every resource of the
// kustomizations it stands for (config/crd, config/namespace and the
// PriorityClass of config/manager), so `virtop up` and the release
// manifests install the same objects.
func TestBaseIsTheKustomizeBase(t *testing.T) {
	var want []string
	for _, dir := range []string{"crd", "namespace"} {
		var k struct{ Resources []string }
		data, err := os.ReadFile(dir + "/kustomization.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		for _, r := range k.Resources {
			want = append(want, dir+"/"+r)
		}
	}
	want = append(want, "manager/priority_class.yaml")
	got := Base()
	slices.Sort(want)
	sorted := slices.Sorted(slices.Values(got))
	if !slices.Equal(sorted, want) {
		t.Errorf("Base() = %v, the kustomizations list %v", got, want)
	}
	if !strings.HasPrefix(got[0], "crd/") {
		t.Errorf("Base() starts with %s: the CRDs go first", got[0])
	}
	for _, f := range append(got, SampleKubeVirt) {
		data, err := FS.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		embedded, _ := os.ReadFile(f)
		if string(data) != string(embedded) {
			t.Errorf("%s: the embedded copy differs from the file", f)
		}
	}
}
