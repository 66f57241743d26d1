package components

import (
	"reflect"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

// familyTestConfig is a minimal v1.5.3 config for the CRD, Service and
// certificate renderers, with the given feature gates.
func familyTestConfig(t *testing.T, gates ...string) (*config.DeploymentConfig, catalog.Release) {
	t.Helper()
	r, ok := catalog.Lookup("v1.5.3")
	if !ok {
		t.Fatal("v1.5.3 not in catalog")
	}
	return &config.DeploymentConfig{
		Namespace:       "kubevirt",
		Version:         "v1.5.3",
		Registry:        "quay.io/kubevirt",
		ImagePullPolicy: "IfNotPresent",
		FeatureGates:    gates,
	}, r
}

// renderFamily runs a registered renderer.
func renderFamily(t *testing.T, family string, gates ...string) []client.Object {
	t.Helper()
	render, ok := Renderers[family]
	if !ok {
		t.Fatalf("renderer %q not registered", family)
	}
	c, r := familyTestConfig(t, gates...)
	objs, err := render(c, r)
	if err != nil {
		t.Fatalf("render %s: %v", family, err)
	}
	again, err := render(c, r)
	if err != nil {
		t.Fatalf("render %s again: %v", family, err)
	}
	if !reflect.DeepEqual(objs, again) {
		t.Fatalf("render %s is not deterministic", family)
	}
	return objs
}

func renderCRDMap(t *testing.T) ([]string, map[string]*apiextv1.CustomResourceDefinition) {
	t.Helper()
	var names []string
	crds := map[string]*apiextv1.CustomResourceDefinition{}
	for _, o := range renderFamily(t, "crds") {
		crd, ok := o.(*apiextv1.CustomResourceDefinition)
		if !ok {
			t.Fatalf("crds renderer returned %T", o)
		}
		names = append(names, crd.Name)
		crds[crd.Name] = crd
	}
	return names, crds
}

func TestCRDNames(t *testing.T) {
	names, _ := renderCRDMap(t)
	// upstream-facts.md §3.2, in GenerateCurrentInstallStrategy's order.
	want := []string{
		"virtualmachineinstances.kubevirt.io",
		"virtualmachineinstancepresets.kubevirt.io",
		"virtualmachineinstancereplicasets.kubevirt.io",
		"virtualmachines.kubevirt.io",
		"virtualmachineinstancemigrations.kubevirt.io",
		"virtualmachinesnapshots.snapshot.kubevirt.io",
		"virtualmachinesnapshotcontents.snapshot.kubevirt.io",
		"virtualmachinerestores.snapshot.kubevirt.io",
		"virtualmachineinstancetypes.instancetype.kubevirt.io",
		"virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
		"virtualmachinepools.pool.kubevirt.io",
		"migrationpolicies.migrations.kubevirt.io",
		"virtualmachinepreferences.instancetype.kubevirt.io",
		"virtualmachineclusterpreferences.instancetype.kubevirt.io",
		"virtualmachineexports.export.kubevirt.io",
		"virtualmachineclones.clone.kubevirt.io",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("CRDs:\n got %v\nwant %v", names, want)
	}
}

func TestCRDCommonFields(t *testing.T) {
	_, crds := renderCRDMap(t)
	for name, crd := range crds {
		if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
			t.Errorf("%s: TypeMeta %s %s", name, crd.APIVersion, crd.Kind)
		}
		if v, ok := crd.Labels["kubevirt.io"]; !ok || v != "" || len(crd.Labels) != 1 {
			t.Errorf("%s: labels %v, want only kubevirt.io: \"\"", name, crd.Labels)
		}
		if s, err := stage.Of(crd); err != nil || s != stage.CRDs {
			t.Errorf("%s: stage %q, %v", name, s, err)
		}
		if len(stage.GatesOf(crd)) != 0 {
			t.Errorf("%s: has gates %v", name, stage.GatesOf(crd))
		}
		if crd.Namespace != "" {
			t.Errorf("%s: namespace %q on a cluster object", name, crd.Namespace)
		}
		if got := crd.Spec.Names.Plural + "." + crd.Spec.Group; got != name {
			t.Errorf("%s: name does not match plural.group %s", name, got)
		}
		storage := 0
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				t.Errorf("%s/%s: not served", name, v.Name)
			}
			if v.Storage {
				storage++
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || v.Schema.OpenAPIV3Schema.Type != "object" {
				t.Errorf("%s/%s: schema %+v", name, v.Name, v.Schema)
			}
			if v.Deprecated != (v.DeprecationWarning != nil) {
				t.Errorf("%s/%s: deprecated %v with warning %v", name, v.Name, v.Deprecated, v.DeprecationWarning)
			}
		}
		if storage != 1 {
			t.Errorf("%s: %d storage versions", name, storage)
		}
	}
}

type wantVersion struct {
	name       string
	storage    bool
	deprecated string // warning; "" means not deprecated
}

func TestCRDDetails(t *testing.T) {
	_, crds := renderCRDMap(t)
	// Facts from upstream v1.5.3 components/crds.go.
	tests := []struct {
		name       string
		group      string
		kind       string
		singular   string
		scope      apiextv1.ResourceScope
		shortNames []string
		categories []string
		versions   []wantVersion
		status     bool
		scale      *apiextv1.CustomResourceSubresourceScale
		conversion bool // explicit conversion strategy None
		columns    int
		column     apiextv1.CustomResourceColumnDefinition // one column to check exactly
	}{
		{
			name: "virtualmachineinstances.kubevirt.io", group: "kubevirt.io", kind: "VirtualMachineInstance", singular: "virtualmachineinstance",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmi", "vmis"}, categories: []string{"all"},
			versions: []wantVersion{{"v1", true, ""}, {"v1alpha3", false, "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."}},
			columns:  7,
			column:   apiextv1.CustomResourceColumnDefinition{Name: "Paused", Type: "string", JSONPath: ".status.conditions[?(@.type=='Paused')].status", Priority: 1},
		},
		{
			name: "virtualmachines.kubevirt.io", group: "kubevirt.io", kind: "VirtualMachine", singular: "virtualmachine",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vm", "vms"}, categories: []string{"all"},
			versions: []wantVersion{{"v1", true, ""}, {"v1alpha3", false, "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."}},
			status:   true, columns: 3,
			column: apiextv1.CustomResourceColumnDefinition{Name: "Status", Type: "string", JSONPath: ".status.printableStatus", Description: "Human Readable Status"},
		},
		{
			name: "virtualmachineinstancepresets.kubevirt.io", group: "kubevirt.io", kind: "VirtualMachineInstancePreset", singular: "virtualmachineinstancepreset",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmipreset", "vmipresets"}, categories: []string{"all"},
			versions: []wantVersion{
				{"v1", false, "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."},
				{"v1alpha3", true, "kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2."},
			},
		},
		{
			name: "virtualmachineinstancereplicasets.kubevirt.io", group: "kubevirt.io", kind: "VirtualMachineInstanceReplicaSet", singular: "virtualmachineinstancereplicaset",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmirs", "vmirss"}, categories: []string{"all"},
			versions: []wantVersion{{"v1", true, ""}, {"v1alpha3", false, "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."}},
			status:   true,
			scale:    &apiextv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.labelSelector")},
			columns:  4,
			column:   apiextv1.CustomResourceColumnDefinition{Name: "Desired", Type: "integer", JSONPath: ".spec.replicas", Description: "Number of desired VirtualMachineInstances"},
		},
		{
			name: "virtualmachinepools.pool.kubevirt.io", group: "pool.kubevirt.io", kind: "VirtualMachinePool", singular: "virtualmachinepool",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmpool", "vmpools"}, categories: []string{"all"},
			versions: []wantVersion{{"v1alpha1", true, ""}},
			status:   true,
			scale:    &apiextv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ptr.To(".status.labelSelector")},
			columns:  4,
			column:   apiextv1.CustomResourceColumnDefinition{Name: "Ready", Type: "integer", JSONPath: ".status.readyReplicas", Description: "Number of managed VirtualMachines which are ready to receive traffic"},
		},
		{
			name: "virtualmachinesnapshots.snapshot.kubevirt.io", group: "snapshot.kubevirt.io", kind: "VirtualMachineSnapshot", singular: "virtualmachinesnapshot",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmsnapshot", "vmsnapshots"}, categories: []string{"all"},
			versions: []wantVersion{{"v1alpha1", false, ""}, {"v1beta1", true, ""}},
			status:   true, conversion: true, columns: 6,
			column: apiextv1.CustomResourceColumnDefinition{Name: "ReadyToUse", Type: "boolean", JSONPath: ".status.readyToUse"},
		},
		{
			name: "virtualmachineclusterinstancetypes.instancetype.kubevirt.io", group: "instancetype.kubevirt.io", kind: "VirtualMachineClusterInstancetype", singular: "virtualmachineclusterinstancetype",
			scope: apiextv1.ClusterScoped, shortNames: []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"},
			versions: []wantVersion{
				{"v1alpha1", false, "instancetype.kubevirt.io/v1alpha1 VirtualMachineClusterInstanceTypes is now deprecated and will be removed in v1."},
				{"v1alpha2", false, "instancetype.kubevirt.io/v1alpha2 VirtualMachineClusterInstanceTypes is now deprecated and will be removed in v1."},
				{"v1beta1", true, ""},
			},
			conversion: true,
		},
		{
			name: "virtualmachinepreferences.instancetype.kubevirt.io", group: "instancetype.kubevirt.io", kind: "VirtualMachinePreference", singular: "virtualmachinepreference",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmpref", "vmprefs", "vmp", "vmps"}, categories: []string{"all"},
			versions: []wantVersion{
				{"v1alpha1", false, "instancetype.kubevirt.io/v1alpha1 VirtualMachinePreferences is now deprecated and will be removed in v1."},
				{"v1alpha2", false, "instancetype.kubevirt.io/v1alpha2 VirtualMachinePreferences is now deprecated and will be removed in v1."},
				{"v1beta1", true, ""},
			},
			conversion: true,
		},
		{
			name: "migrationpolicies.migrations.kubevirt.io", group: "migrations.kubevirt.io", kind: "MigrationPolicy", singular: "migrationpolicy",
			scope:    apiextv1.ClusterScoped,
			versions: []wantVersion{{"v1alpha1", true, ""}},
			status:   true,
		},
		{
			name: "virtualmachineexports.export.kubevirt.io", group: "export.kubevirt.io", kind: "VirtualMachineExport", singular: "virtualmachineexport",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmexport", "vmexports"}, categories: []string{"all"},
			versions: []wantVersion{{"v1alpha1", false, ""}, {"v1beta1", true, ""}},
			status:   true, conversion: true, columns: 3,
			column: apiextv1.CustomResourceColumnDefinition{Name: "SourceKind", Type: "string", JSONPath: ".spec.source.kind"},
		},
		{
			name: "virtualmachineclones.clone.kubevirt.io", group: "clone.kubevirt.io", kind: "VirtualMachineClone", singular: "virtualmachineclone",
			scope: apiextv1.NamespaceScoped, shortNames: []string{"vmclone", "vmclones"}, categories: []string{"all"},
			versions: []wantVersion{{"v1alpha1", false, ""}, {"v1beta1", true, ""}},
			status:   true, columns: 3,
			column: apiextv1.CustomResourceColumnDefinition{Name: "TargetVirtualMachine", Type: "string", JSONPath: ".spec.target.name"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd, ok := crds[tt.name]
			if !ok {
				t.Fatal("not rendered")
			}
			s := crd.Spec
			if s.Group != tt.group || s.Names.Kind != tt.kind || s.Names.Singular != tt.singular || s.Scope != tt.scope {
				t.Errorf("group/kind/singular/scope = %s %s %s %s", s.Group, s.Names.Kind, s.Names.Singular, s.Scope)
			}
			if s.Names.ListKind != "" {
				t.Errorf("listKind %q, upstream leaves it to the server", s.Names.ListKind)
			}
			if !reflect.DeepEqual(s.Names.ShortNames, tt.shortNames) {
				t.Errorf("shortNames %v, want %v", s.Names.ShortNames, tt.shortNames)
			}
			if !reflect.DeepEqual(s.Names.Categories, tt.categories) {
				t.Errorf("categories %v, want %v", s.Names.Categories, tt.categories)
			}
			if tt.conversion != (s.Conversion != nil && s.Conversion.Strategy == apiextv1.NoneConverter) {
				t.Errorf("conversion %+v, want explicit None: %v", s.Conversion, tt.conversion)
			}
			if len(s.Versions) != len(tt.versions) {
				t.Fatalf("%d versions, want %d", len(s.Versions), len(tt.versions))
			}
			for i, w := range tt.versions {
				v := s.Versions[i]
				if v.Name != w.name || !v.Served || v.Storage != w.storage {
					t.Errorf("version %d = %s served=%v storage=%v, want %s storage=%v", i, v.Name, v.Served, v.Storage, w.name, w.storage)
				}
				gotWarn := ""
				if v.DeprecationWarning != nil {
					gotWarn = *v.DeprecationWarning
				}
				if v.Deprecated != (w.deprecated != "") || gotWarn != w.deprecated {
					t.Errorf("%s: deprecated=%v %q, want %q", v.Name, v.Deprecated, gotWarn, w.deprecated)
				}
				gotStatus := v.Subresources != nil && v.Subresources.Status != nil
				if gotStatus != tt.status {
					t.Errorf("%s: status subresource %v, want %v", v.Name, gotStatus, tt.status)
				}
				var gotScale *apiextv1.CustomResourceSubresourceScale
				if v.Subresources != nil {
					gotScale = v.Subresources.Scale
				}
				if !reflect.DeepEqual(gotScale, tt.scale) {
					t.Errorf("%s: scale %+v, want %+v", v.Name, gotScale, tt.scale)
				}
				if len(v.AdditionalPrinterColumns) != tt.columns {
					t.Errorf("%s: %d printer columns, want %d", v.Name, len(v.AdditionalPrinterColumns), tt.columns)
				}
				if tt.columns > 0 {
					found := false
					for _, c := range v.AdditionalPrinterColumns {
						if reflect.DeepEqual(c, tt.column) {
							found = true
						}
					}
					if !found {
						t.Errorf("%s: no column %+v in %+v", v.Name, tt.column, v.AdditionalPrinterColumns)
					}
				}
			}
		})
	}
}

// The versions of one CRD must not share slices or pointers, except the
// parsed schemas, which are shared on purpose (they are large and never
// written; internal/plan's TestGenerateLeavesSharedSchemasAlone holds the
// callers to that).
func TestCRDVersionsIndependent(t *testing.T) {
	_, crds := renderCRDMap(t)
	crd := crds["virtualmachineinstancereplicasets.kubevirt.io"]
	a, b := &crd.Spec.Versions[0], &crd.Spec.Versions[1]
	a.AdditionalPrinterColumns[0].Name = "changed"
	a.Subresources.Scale.SpecReplicasPath = "changed"
	if b.AdditionalPrinterColumns[0].Name == "changed" || b.Subresources.Scale.SpecReplicasPath == "changed" {
		t.Fatal("versions share state")
	}
	if a.Schema == b.Schema {
		t.Error("versions share the CustomResourceValidation wrapper")
	}
	if a.Schema.OpenAPIV3Schema != b.Schema.OpenAPIV3Schema {
		t.Error("versions no longer share the parsed schema: each strategy pays for copies again")
	}
	// Nor may two renders share the table's data.
	_, again := renderCRDMap(t)
	if again["virtualmachineinstancereplicasets.kubevirt.io"].Spec.Versions[0].AdditionalPrinterColumns[0].Name != "Desired" {
		t.Fatal("render mutated the CRD table")
	}
}

// v1.5.0 differs from v1.5.3 in one CRD fact: MigrationPolicy was in the
// "all" category (components/crds.go at v1.5.0).
func TestCRDsV150(t *testing.T) {
	r, ok := catalog.Lookup("v1.5.0")
	if !ok {
		t.Skip("v1.5.0 not in catalog")
	}
	c, _ := familyTestConfig(t)
	objs, err := Renderers["crds"](c, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 16 {
		t.Fatalf("%d CRDs", len(objs))
	}
	for _, o := range objs {
		crd := o.(*apiextv1.CustomResourceDefinition)
		if crd.Name == "migrationpolicies.migrations.kubevirt.io" && !reflect.DeepEqual(crd.Spec.Names.Categories, []string{"all"}) {
			t.Errorf("v1.5.0 migrationpolicies categories %v, want [all]", crd.Spec.Names.Categories)
		}
	}
	// The v1.5.3 table is untouched by rendering v1.5.0.
	_, crds := renderCRDMap(t)
	if got := crds["migrationpolicies.migrations.kubevirt.io"].Spec.Names.Categories; got != nil {
		t.Errorf("v1.5.3 migrationpolicies categories %v, want none", got)
	}
}
