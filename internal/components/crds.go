package components

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The API groups of KubeVirt's custom resources.
const (
	CoreGroup         = "kubevirt.io"
	SnapshotGroup     = "snapshot.kubevirt.io"
	InstancetypeGroup = "instancetype.kubevirt.io"
	PoolGroup         = "pool.kubevirt.io"
	MigrationsGroup   = "migrations.kubevirt.io"
	ExportGroup       = "export.kubevirt.io"
	CloneGroup        = "clone.kubevirt.io"
)

func init() { register("crds", renderCRDs) }

// crdVersion is one served version of a CRD.
type crdVersion struct {
	name    string
	storage bool
	// deprecation, when set, marks the version deprecated with this
	// warning. Every version upstream lists is served.
	deprecation string
}

// crdDef is one row of the CRD table: everything that differs between
// KubeVirt's CRDs except the schema, which crdSchema supplies per kind and
// version.
type crdDef struct {
	group    string
	plural   string
	singular string
	kind     string
	// listKind is left empty, as upstream leaves it: the API server
	// defaults it to <kind>List.
	shortNames []string
	// inAll puts the kind in the "all" category (kubectl get all).
	inAll      bool
	namespaced bool
	versions   []crdVersion
	// status and scale are the subresources every version gets.
	status bool
	scale  bool
	// conversionNone sets spec.conversion.strategy None explicitly, as
	// upstream does for some groups (it is also the server default).
	conversionNone bool
	columns        []apiextv1.CustomResourceColumnDefinition
}

// Versions shared by several CRDs, as KubeVirt v1.5.3 serves them.
var (
	// coreVersions is kubevirt.io's ApiSupportedVersions: v1 stores,
	// v1alpha3 is served but deprecated.
	coreVersions = []crdVersion{
		{name: "v1", storage: true},
		{name: "v1alpha3", deprecation: "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."},
	}
	// alphaBetaVersions: v1alpha1 served, v1beta1 stores (snapshot,
	// export, clone).
	alphaBetaVersions = []crdVersion{
		{name: "v1alpha1"},
		{name: "v1beta1", storage: true},
	}
)

// instancetypeVersions are the versions of the instancetype.kubevirt.io
// kinds; the deprecation warnings name the kind as upstream spells it
// (note "InstanceTypes" for the cluster-wide instancetype).
func instancetypeVersions(kindInWarning string) []crdVersion {
	return []crdVersion{
		{name: "v1alpha1", deprecation: "instancetype.kubevirt.io/v1alpha1 " + kindInWarning + " is now deprecated and will be removed in v1."},
		{name: "v1alpha2", deprecation: "instancetype.kubevirt.io/v1alpha2 " + kindInWarning + " is now deprecated and will be removed in v1."},
		{name: "v1beta1", storage: true},
	}
}

// Printer column JSON paths used by several CRDs.
const (
	ageJSONPath   = ".metadata.creationTimestamp"
	phaseJSONPath = ".status.phase"
	errorJSONPath = ".status.error.message"
)

func col(name, typ, path string) apiextv1.CustomResourceColumnDefinition {
	return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path}
}

func colDesc(name, typ, path, desc string) apiextv1.CustomResourceColumnDefinition {
	return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path, Description: desc}
}

// crdTable lists KubeVirt v1.5.3's CRDs in upstream's strategy order
// (GenerateCurrentInstallStrategy). Source:
// pkg/virt-operator/resource/generate/components/crds.go.
var crdTable = []crdDef{
	{
		group: CoreGroup, plural: "virtualmachineinstances", singular: "virtualmachineinstance", kind: "VirtualMachineInstance",
		shortNames: []string{"vmi", "vmis"}, inAll: true, namespaced: true, versions: coreVersions,
		// Upstream gives VirtualMachineInstance no subresources at all.
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("Age", "date", ageJSONPath),
			col("Phase", "string", phaseJSONPath),
			col("IP", "string", ".status.interfaces[0].ipAddress"),
			col("NodeName", "string", ".status.nodeName"),
			col("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
			{Name: "Live-Migratable", Type: "string", JSONPath: ".status.conditions[?(@.type=='LiveMigratable')].status", Priority: 1},
			{Name: "Paused", Type: "string", JSONPath: ".status.conditions[?(@.type=='Paused')].status", Priority: 1},
		},
	},
	{
		group: CoreGroup, plural: "virtualmachineinstancepresets", singular: "virtualmachineinstancepreset", kind: "VirtualMachineInstancePreset",
		shortNames: []string{"vmipreset", "vmipresets"}, inAll: true, namespaced: true,
		// Presets keep v1alpha3 as storage version and deprecate both.
		versions: []crdVersion{
			{name: "v1", deprecation: "kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2."},
			{name: "v1alpha3", storage: true, deprecation: "kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2."},
		},
	},
	{
		group: CoreGroup, plural: "virtualmachineinstancereplicasets", singular: "virtualmachineinstancereplicaset", kind: "VirtualMachineInstanceReplicaSet",
		shortNames: []string{"vmirs", "vmirss"}, inAll: true, namespaced: true, versions: coreVersions,
		status: true, scale: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			colDesc("Desired", "integer", ".spec.replicas", "Number of desired VirtualMachineInstances"),
			colDesc("Current", "integer", ".status.replicas", "Number of managed and not final or deleted VirtualMachineInstances"),
			colDesc("Ready", "integer", ".status.readyReplicas", "Number of managed VirtualMachineInstances which are ready to receive traffic"),
			col("Age", "date", ageJSONPath),
		},
	},
	{
		group: CoreGroup, plural: "virtualmachines", singular: "virtualmachine", kind: "VirtualMachine",
		shortNames: []string{"vm", "vms"}, inAll: true, namespaced: true, versions: coreVersions,
		status: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("Age", "date", ageJSONPath),
			colDesc("Status", "string", ".status.printableStatus", "Human Readable Status"),
			col("Ready", "string", ".status.conditions[?(@.type=='Ready')].status"),
		},
	},
	{
		group: CoreGroup, plural: "virtualmachineinstancemigrations", singular: "virtualmachineinstancemigration", kind: "VirtualMachineInstanceMigration",
		shortNames: []string{"vmim", "vmims"}, inAll: true, namespaced: true, versions: coreVersions,
		status: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			colDesc("Phase", "string", phaseJSONPath, "The current phase of VM instance migration"),
			colDesc("VMI", "string", ".spec.vmiName", "The name of the VMI to perform the migration on"),
		},
	},
	{
		group: SnapshotGroup, plural: "virtualmachinesnapshots", singular: "virtualmachinesnapshot", kind: "VirtualMachineSnapshot",
		shortNames: []string{"vmsnapshot", "vmsnapshots"}, inAll: true, namespaced: true, versions: alphaBetaVersions,
		status: true, conversionNone: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("SourceKind", "string", ".spec.source.kind"),
			col("SourceName", "string", ".spec.source.name"),
			col("Phase", "string", phaseJSONPath),
			col("ReadyToUse", "boolean", ".status.readyToUse"),
			col("CreationTime", "date", ".status.creationTime"),
			col("Error", "string", errorJSONPath),
		},
	},
	{
		group: SnapshotGroup, plural: "virtualmachinesnapshotcontents", singular: "virtualmachinesnapshotcontent", kind: "VirtualMachineSnapshotContent",
		shortNames: []string{"vmsnapshotcontent", "vmsnapshotcontents"}, inAll: true, namespaced: true, versions: alphaBetaVersions,
		status: true, conversionNone: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("ReadyToUse", "boolean", ".status.readyToUse"),
			col("CreationTime", "date", ".status.creationTime"),
			col("Error", "string", errorJSONPath),
		},
	},
	{
		group: SnapshotGroup, plural: "virtualmachinerestores", singular: "virtualmachinerestore", kind: "VirtualMachineRestore",
		shortNames: []string{"vmrestore", "vmrestores"}, inAll: true, namespaced: true, versions: alphaBetaVersions,
		status: true, conversionNone: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("TargetKind", "string", ".spec.target.kind"),
			col("TargetName", "string", ".spec.target.name"),
			col("Complete", "boolean", ".status.complete"),
			col("RestoreTime", "date", ".status.restoreTime"),
			col("Error", "string", errorJSONPath),
		},
	},
	{
		group: InstancetypeGroup, plural: "virtualmachineinstancetypes", singular: "virtualmachineinstancetype", kind: "VirtualMachineInstancetype",
		shortNames: []string{"vminstancetype", "vminstancetypes", "vmf", "vmfs"}, inAll: true, namespaced: true,
		versions: instancetypeVersions("VirtualMachineInstancetypes"), conversionNone: true,
	},
	{
		// The cluster-scoped instancetype and preference kinds are in no
		// category upstream.
		group: InstancetypeGroup, plural: "virtualmachineclusterinstancetypes", singular: "virtualmachineclusterinstancetype", kind: "VirtualMachineClusterInstancetype",
		shortNames: []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"},
		versions:   instancetypeVersions("VirtualMachineClusterInstanceTypes"), conversionNone: true,
	},
	{
		// v1.5.3 serves only v1alpha1 for pools (v1beta1 came later).
		group: PoolGroup, plural: "virtualmachinepools", singular: "virtualmachinepool", kind: "VirtualMachinePool",
		shortNames: []string{"vmpool", "vmpools"}, inAll: true, namespaced: true,
		versions: []crdVersion{{name: "v1alpha1", storage: true}},
		status:   true, scale: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			colDesc("Desired", "integer", ".spec.replicas", "Number of desired VirtualMachines"),
			colDesc("Current", "integer", ".status.replicas", "Number of managed and not final or deleted VirtualMachines"),
			colDesc("Ready", "integer", ".status.readyReplicas", "Number of managed VirtualMachines which are ready to receive traffic"),
			col("Age", "date", ageJSONPath),
		},
	},
	{
		group: MigrationsGroup, plural: "migrationpolicies", singular: "migrationpolicy", kind: "MigrationPolicy",
		versions: []crdVersion{{name: "v1alpha1", storage: true}},
		status:   true,
	},
	{
		group: InstancetypeGroup, plural: "virtualmachinepreferences", singular: "virtualmachinepreference", kind: "VirtualMachinePreference",
		shortNames: []string{"vmpref", "vmprefs", "vmp", "vmps"}, inAll: true, namespaced: true,
		versions: instancetypeVersions("VirtualMachinePreferences"), conversionNone: true,
	},
	{
		group: InstancetypeGroup, plural: "virtualmachineclusterpreferences", singular: "virtualmachineclusterpreference", kind: "VirtualMachineClusterPreference",
		shortNames: []string{"vmcp", "vmcps"},
		versions:   instancetypeVersions("VirtualMachineClusterPreferences"), conversionNone: true,
	},
	{
		group: ExportGroup, plural: "virtualmachineexports", singular: "virtualmachineexport", kind: "VirtualMachineExport",
		shortNames: []string{"vmexport", "vmexports"}, inAll: true, namespaced: true, versions: alphaBetaVersions,
		status: true, conversionNone: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("SourceKind", "string", ".spec.source.kind"),
			col("SourceName", "string", ".spec.source.name"),
			col("Phase", "string", phaseJSONPath),
		},
	},
	{
		group: CloneGroup, plural: "virtualmachineclones", singular: "virtualmachineclone", kind: "VirtualMachineClone",
		shortNames: []string{"vmclone", "vmclones"}, inAll: true, namespaced: true, versions: alphaBetaVersions,
		status: true,
		columns: []apiextv1.CustomResourceColumnDefinition{
			col("Phase", "string", phaseJSONPath),
			col("SourceVirtualMachine", "string", ".spec.source.name"),
			col("TargetVirtualMachine", "string", ".spec.target.name"),
		},
	},
}

// crdSchemaFiles holds the OpenAPI v3 schema of each CRD, one file per
// CRD named <plural>.<group>.yaml. They are generated (`make crd-schemas`,
// hack/crdschemas) by controller-gen from the typed Go definitions of the
// published kubevirt.io/api module, the way upstream generates
// validations_generated.go, and committed.
//
//go:embed schemas/*.yaml
var crdSchemaFiles embed.FS

var (
	crdSchemasOnce sync.Once
	crdSchemas     map[string]*apiextv1.JSONSchemaProps
	crdSchemasErr  error
)

// loadCRDSchemas parses every embedded schema file once; crdSchema hands
// out the parsed schemas themselves, which nothing may modify.
func loadCRDSchemas() (map[string]*apiextv1.JSONSchemaProps, error) {
	crdSchemasOnce.Do(func() {
		files, err := fs.Glob(crdSchemaFiles, "schemas/*.yaml")
		if err != nil {
			crdSchemasErr = err
			return
		}
		m := make(map[string]*apiextv1.JSONSchemaProps, len(files))
		for _, f := range files {
			data, err := crdSchemaFiles.ReadFile(f)
			if err != nil {
				crdSchemasErr = err
				return
			}
			s := &apiextv1.JSONSchemaProps{}
			if err := yaml.UnmarshalStrict(data, s); err != nil {
				crdSchemasErr = fmt.Errorf("%s: %w", f, err)
				return
			}
			m[strings.TrimSuffix(path.Base(f), ".yaml")] = s
		}
		crdSchemas = m
	})
	return crdSchemas, crdSchemasErr
}

// crdSchema returns the OpenAPI schema of one version of a kind: the
// structural schema generated from the kubevirt.io/api Go types of the
// kind's storage version.
//
// Every served version gets the storage version's schema, as upstream does
// (patchValidationForAllVersions applies one schema per kind). The versions
// convert with strategy None, so an object has one shape in every version;
// a narrower schema for an older version (instancetype v1alpha1/v1alpha2,
// snapshot v1alpha1 lack fields v1beta1 has) would prune the newer fields of
// stored objects read or written through that version and lose them on the
// next update. kubevirt.io v1alpha3 has no Go package of its own; it is the
// v1 types under another name.
//
// Known approximation: both catalog releases (v1.5.0 and v1.5.3) get the
// schemas of kubevirt.io/api v1.5.0, because the Go module proxy does not
// serve kubevirt.io/api@v1.5.3. crds_schema_test.go compares the result
// with upstream v1.5.3's validations_generated.go: descriptions aside they
// are equal except for fields v1.5.x patch releases added (devices.tpm.enabled,
// devices.watchdog.diag288, preference devices.preferredTPM.enabled), which
// the API server therefore prunes from v1.5.3 objects.
//
// A missing or unparsable schema file is a build defect (the files are
// embedded and tested), so it panics rather than render an open schema.
func crdSchema(_ catalog.Release, d crdDef, _ string) *apiextv1.CustomResourceValidation {
	schemas, err := loadCRDSchemas()
	if err != nil {
		panic(fmt.Sprintf("components: embedded CRD schemas: %v", err))
	}
	s, ok := schemas[d.plural+"."+d.group]
	if !ok {
		panic(fmt.Sprintf("components: no embedded schema for CRD %s.%s (run make crd-schemas)", d.plural, d.group))
	}
	// Shared, not copied: the parsed schemas are about 7 MB, and a copy per
	// CRD version kept every cached strategy 14 MB larger. Nothing writes
	// into a strategy's objects (plan.Build copies before changing one;
	// customizeComponents patches a copy); TestGenerateLeavesSharedSchemasAlone
	// in internal/plan holds that.
	return &apiextv1.CustomResourceValidation{OpenAPIV3Schema: s}
}

// crdReleaseChanges adjusts a table row for a catalog release whose CRDs
// differ from v1.5.3's.
var crdReleaseChanges = map[string]func(d *crdDef){
	// v1.5.0 still put the cluster-scoped MigrationPolicy in the "all"
	// category; v1.5.3 does not.
	"v1.5.0": func(d *crdDef) {
		if d.plural == "migrationpolicies" {
			d.inAll = true
		}
	},
}

func renderCRDs(_ *config.DeploymentConfig, r catalog.Release) ([]client.Object, error) {
	out := make([]client.Object, 0, len(crdTable))
	for _, d := range crdTable {
		if change := crdReleaseChanges[r.Version]; change != nil {
			change(&d)
		}
		out = append(out, newCRD(r, d))
	}
	return out, nil
}

// newCRD builds one CRD from its table row. Every version gets its own
// copies of the columns and subresources, so a later change to one version
// (a customization patch, a schema) never leaks into another.
func newCRD(r catalog.Release, d crdDef) *apiextv1.CustomResourceDefinition {
	crd := &apiextv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   d.plural + "." + d.group,
			Labels: map[string]string{vocab.AppLabel: ""},
		},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: d.group,
			Names: apiextv1.CustomResourceDefinitionNames{
				Plural:     d.plural,
				Singular:   d.singular,
				Kind:       d.kind,
				ShortNames: append([]string(nil), d.shortNames...),
			},
			Scope: apiextv1.ClusterScoped,
		},
	}
	if d.namespaced {
		crd.Spec.Scope = apiextv1.NamespaceScoped
	}
	if d.inAll {
		crd.Spec.Names.Categories = []string{"all"}
	}
	if d.conversionNone {
		crd.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: apiextv1.NoneConverter}
	}
	for _, v := range d.versions {
		ver := apiextv1.CustomResourceDefinitionVersion{
			Name:    v.name,
			Served:  true,
			Storage: v.storage,
			Schema:  crdSchema(r, d, v.name),
		}
		if v.deprecation != "" {
			ver.Deprecated = true
			ver.DeprecationWarning = ptr.To(v.deprecation)
		}
		if len(d.columns) > 0 {
			ver.AdditionalPrinterColumns = append([]apiextv1.CustomResourceColumnDefinition(nil), d.columns...)
		}
		if d.status || d.scale {
			ver.Subresources = &apiextv1.CustomResourceSubresources{}
			if d.status {
				ver.Subresources.Status = &apiextv1.CustomResourceSubresourceStatus{}
			}
			if d.scale {
				ver.Subresources.Scale = &apiextv1.CustomResourceSubresourceScale{
					SpecReplicasPath:   ".spec.replicas",
					StatusReplicasPath: ".status.replicas",
					LabelSelectorPath:  ptr.To(".status.labelSelector"),
				}
			}
		}
		crd.Spec.Versions = append(crd.Spec.Versions, ver)
	}
	stage.Set(crd, stage.CRDs)
	return crd
}
