package strategy

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
)

// Names of the common-instancetypes bundles KubeVirt embeds
// (pkg/virt-operator/resource/generate/components/data/ of v1.5.0 and
// v1.5.3, common-instancetypes v1.3.0 and v1.3.1), written out from the
// upstream files.
var (
	itNames = []string{
		"cx1.2xlarge", "cx1.4xlarge", "cx1.8xlarge", "cx1.large", "cx1.medium", "cx1.xlarge",
		"m1.2xlarge", "m1.4xlarge", "m1.8xlarge", "m1.large", "m1.xlarge",
		"n1.2xlarge", "n1.4xlarge", "n1.8xlarge", "n1.large", "n1.medium", "n1.xlarge",
		"o1.2xlarge", "o1.4xlarge", "o1.8xlarge", "o1.large", "o1.medium", "o1.micro", "o1.nano", "o1.small", "o1.xlarge",
		"rt1.2xlarge", "rt1.4xlarge", "rt1.8xlarge", "rt1.large", "rt1.medium", "rt1.micro", "rt1.small", "rt1.xlarge",
		"u1.2xlarge", "u1.2xmedium", "u1.4xlarge", "u1.8xlarge", "u1.large", "u1.medium", "u1.micro", "u1.nano", "u1.small", "u1.xlarge",
	}
	prefNamesV150 = []string{
		"alpine", "centos.stream10", "centos.stream10.desktop", "centos.stream9", "centos.stream9.desktop",
		"centos.stream9.dpdk", "cirros", "fedora", "fedora.arm64", "fedora.s390x", "opensuse.leap",
		"opensuse.tumbleweed", "rhel.10", "rhel.10.arm64", "rhel.7", "rhel.7.desktop", "rhel.8", "rhel.8.desktop",
		"rhel.8.dpdk", "rhel.9", "rhel.9.arm64", "rhel.9.desktop", "rhel.9.dpdk", "rhel.9.realtime", "rhel.9.s390x",
		"sles", "ubuntu", "windows.10", "windows.10.virtio", "windows.11", "windows.11.virtio", "windows.2k16",
		"windows.2k16.virtio", "windows.2k19", "windows.2k19.virtio", "windows.2k22", "windows.2k22.virtio",
		"windows.2k25", "windows.2k25.virtio",
	}
	// v1.5.3 (common-instancetypes v1.3.1) adds debian, legacy, linux and
	// linux.efi.
	prefNamesV153 = func() []string {
		out := append(slices.Clone(prefNamesV150), "debian", "legacy", "linux", "linux.efi")
		slices.Sort(out)
		return out
	}()
)

func itRender(t *testing.T, version string, enabled bool) []client.Object {
	t.Helper()
	rel, ok := release.Lookup(version)
	if !ok {
		t.Fatalf("%s not in catalog", version)
	}
	c := &config.DeploymentConfig{Namespace: "kubevirt", Version: version, CommonInstancetypes: enabled}
	objs, err := renderInstancetypes(c, rel)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return objs
}

func TestInstancetypesBundle(t *testing.T) {
	tests := []struct {
		version, ciVersion string
		prefs              []string
	}{
		{"v1.5.3", "v1.3.1", prefNamesV153},
		{"v1.5.0", "v1.3.0", prefNamesV150},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			objs := itRender(t, tt.version, true)
			var gotIT, gotPref []string
			for i, o := range objs {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					t.Fatalf("object %d is %T, want *unstructured.Unstructured", i, o)
				}
				if u.GetAPIVersion() != "instancetype.kubevirt.io/v1beta1" {
					t.Errorf("%s: apiVersion %q", u.GetName(), u.GetAPIVersion())
				}
				if u.GetNamespace() != "" {
					t.Errorf("%s: cluster-scoped object has namespace %q", u.GetName(), u.GetNamespace())
				}
				switch u.GetKind() {
				case "VirtualMachineClusterInstancetype":
					if len(gotPref) > 0 {
						t.Errorf("instancetype %s after a preference", u.GetName())
					}
					gotIT = append(gotIT, u.GetName())
				case "VirtualMachineClusterPreference":
					gotPref = append(gotPref, u.GetName())
				default:
					t.Errorf("%s: unexpected kind %q", u.GetName(), u.GetKind())
				}
				if st, err := stage.Of(u); err != nil || st != stage.Instancetypes {
					t.Errorf("%s: stage %q, %v", u.GetName(), st, err)
				}
				if g := stage.GatesOf(u); len(g) != 0 {
					t.Errorf("%s: unexpected gates %v", u.GetName(), g)
				}
				l := u.GetLabels()
				if l["instancetype.kubevirt.io/common-instancetypes-version"] != tt.ciVersion {
					t.Errorf("%s: common-instancetypes-version %q, want %q", u.GetName(), l["instancetype.kubevirt.io/common-instancetypes-version"], tt.ciVersion)
				}
				if l["instancetype.kubevirt.io/vendor"] != "kubevirt.io" {
					t.Errorf("%s: vendor label %q", u.GetName(), l["instancetype.kubevirt.io/vendor"])
				}
				if _, ok := u.Object["spec"].(map[string]interface{}); !ok {
					t.Errorf("%s: no spec", u.GetName())
				}
			}
			// Rendered sorted by name within each kind.
			if len(gotIT) != 44 || !slices.Equal(gotIT, itNames) {
				t.Errorf("instancetypes: got %d %v\nwant 44 %v", len(gotIT), gotIT, itNames)
			}
			if !slices.Equal(gotPref, tt.prefs) {
				t.Errorf("preferences: got %d %v\nwant %d %v", len(gotPref), gotPref, len(tt.prefs), tt.prefs)
			}
		})
	}
}

func itFind(t *testing.T, objs []client.Object, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if u := o.(*unstructured.Unstructured); u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("%s %s not rendered", kind, name)
	return nil
}

// Spot checks of field values, from the upstream v1.5.3 bundle.
func TestInstancetypesFields(t *testing.T) {
	objs := itRender(t, "v1.5.3", true)
	checks := []struct {
		kind, name string
		path       []string
		want       interface{}
	}{
		{"VirtualMachineClusterInstancetype", "u1.medium", []string{"spec", "cpu", "guest"}, int64(1)},
		{"VirtualMachineClusterInstancetype", "u1.medium", []string{"spec", "memory", "guest"}, "4Gi"},
		{"VirtualMachineClusterInstancetype", "u1.medium", []string{"metadata", "labels", "instancetype.kubevirt.io/size"}, "medium"},
		{"VirtualMachineClusterInstancetype", "cx1.2xlarge", []string{"spec", "cpu", "guest"}, int64(8)},
		{"VirtualMachineClusterInstancetype", "cx1.2xlarge", []string{"spec", "cpu", "dedicatedCPUPlacement"}, true},
		{"VirtualMachineClusterInstancetype", "cx1.2xlarge", []string{"spec", "ioThreadsPolicy"}, "auto"},
		{"VirtualMachineClusterInstancetype", "cx1.2xlarge", []string{"metadata", "labels", "instancetype.kubevirt.io/cpu"}, "8"},
		{"VirtualMachineClusterInstancetype", "cx1.2xlarge", []string{"metadata", "annotations", "instancetype.kubevirt.io/displayName"}, "Compute Exclusive"},
		{"VirtualMachineClusterPreference", "windows.11", []string{"spec", "devices", "preferredDiskBus"}, "sata"},
		{"VirtualMachineClusterPreference", "windows.11", []string{"spec", "devices", "preferredInterfaceModel"}, "e1000e"},
		{"VirtualMachineClusterPreference", "windows.11", []string{"spec", "cpu", "preferredCPUTopology"}, "sockets"},
		{"VirtualMachineClusterPreference", "debian", []string{"spec", "requirements", "memory", "guest"}, "512Mi"},
		{"VirtualMachineClusterPreference", "debian", []string{"spec", "firmware", "preferredEfi", "secureBoot"}, false},
		{"VirtualMachineClusterPreference", "debian", []string{"metadata", "annotations", "openshift.io/display-name"}, "Debian"},
	}
	for _, c := range checks {
		u := itFind(t, objs, c.kind, c.name)
		got, found, err := unstructured.NestedFieldNoCopy(u.Object, c.path...)
		if err != nil || !found || got != c.want {
			t.Errorf("%s %s %s: got %#v (found %v, %v), want %#v", c.kind, c.name, strings.Join(c.path, "."), got, found, err, c.want)
		}
	}
	// The bundle's own annotations are kept next to the stage annotation.
	u := itFind(t, objs, "VirtualMachineClusterInstancetype", "cx1.2xlarge")
	if !strings.Contains(u.GetAnnotations()["instancetype.kubevirt.io/description"], "Compute Exclusive") {
		t.Errorf("cx1.2xlarge: description annotation lost: %v", u.GetAnnotations())
	}
}

func TestInstancetypesDisabled(t *testing.T) {
	for _, v := range []string{"v1.5.3", "v1.5.0"} {
		if objs := itRender(t, v, false); len(objs) != 0 {
			t.Errorf("%s with commonInstancetypes disabled rendered %d objects", v, len(objs))
		}
	}
}

// Renders hand out copies: changing one must not change the next render.
func TestInstancetypesDeepCopies(t *testing.T) {
	first := itRender(t, "v1.5.3", true)
	u := itFind(t, first, "VirtualMachineClusterInstancetype", "u1.medium")
	u.SetName("changed")
	if err := unstructured.SetNestedField(u.Object, "99Gi", "spec", "memory", "guest"); err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"x": "y"})
	second := itRender(t, "v1.5.3", true)
	again := itFind(t, second, "VirtualMachineClusterInstancetype", "u1.medium")
	if g, _, _ := unstructured.NestedString(again.Object, "spec", "memory", "guest"); g != "4Gi" {
		t.Errorf("shared parse was mutated: memory %q", g)
	}
	if again.GetLabels()["instancetype.kubevirt.io/size"] != "medium" {
		t.Errorf("shared parse was mutated: labels %v", again.GetLabels())
	}
}

func TestInstancetypesUnknownVersion(t *testing.T) {
	c := &config.DeploymentConfig{Namespace: "kubevirt", Version: "v9.9.9", CommonInstancetypes: true}
	if _, err := renderInstancetypes(c, &release.Release{Version: "v9.9.9"}); err == nil {
		t.Error("no error for a release without a bundle")
	}
	// Disabled needs no bundle.
	c.CommonInstancetypes = false
	if objs, err := renderInstancetypes(c, &release.Release{Version: "v9.9.9"}); err != nil || len(objs) != 0 {
		t.Errorf("disabled: %d objects, %v", len(objs), err)
	}
}

// Every catalog release has a bundle.
func TestInstancetypesEveryCatalogVersion(t *testing.T) {
	for _, v := range release.Builtin().Versions() {
		if _, err := commonBundle(v); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}

func TestParseBundleErrors(t *testing.T) {
	const kind = "VirtualMachineClusterPreference"
	good := "apiVersion: instancetype.kubevirt.io/v1beta1\nkind: VirtualMachineClusterPreference\nmetadata:\n  name: %s\nspec: {}\n"
	doc := func(name string) string { return strings.ReplaceAll(good, "%s", name) }
	tests := map[string]string{
		"not yaml":       "apiVersion: [unclosed\n",
		"empty":          "---\n---\n",
		"wrong kind":     strings.Replace(doc("a"), "VirtualMachineClusterPreference", "VirtualMachineClusterInstancetype", 1),
		"wrong version":  strings.Replace(doc("a"), "v1beta1", "v1alpha2", 1),
		"no name":        strings.Replace(doc("a"), "  name: a\n", "  labels: {}\n", 1),
		"duplicate name": doc("a") + "---\n" + doc("a"),
		"namespaced":     strings.Replace(doc("a"), "  name: a\n", "  name: a\n  namespace: x\n", 1),
		"no spec":        strings.Replace(doc("a"), "spec: {}\n", "", 1),
		"not an object":  "- a\n- b\n",
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			if objs, err := parseBundle([]byte(raw), kind); err == nil {
				t.Errorf("no error, got %d objects", len(objs))
			}
		})
	}
	objs, err := parseBundle([]byte("---\n"+doc("b")+"---\n# comment only\n---\n"+doc("a")), kind)
	if err != nil || len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetName() != "b" {
		t.Errorf("good bundle: %v, %v", objs, err)
	}
}
