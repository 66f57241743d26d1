// Command kubevirtcrd writes virtop's KubeVirt CRD (kubevirts.kubevirt.io):
// upstream's CRD, generated from kubevirt.io/api of the newest catalog
// release, with virtop's own checks laid over it.
//
//	kubevirtcrd upstream -in DIR -source S -out config/crd/upstream/kubevirt.io_kubevirts.yaml
//	    DIR is controller-gen's CRD output over kubevirt.io/api's core/v1
//	    (hack/kubevirtcrd/gen.sh, `make kubevirt-crd-upstream`, run by hand:
//	    it needs the Go module proxy). The CRD gets upstream's names, short
//	    names, categories, versions (v1 stored, v1alpha3 served and
//	    deprecated), printer columns, status subresource and label, the
//	    facts of upstream's virt-operator; every version the full schema.
//	kubevirtcrd merge -upstream F -virtop F -out config/crd/bases/kubevirt.io_kubevirts.yaml
//	    F (virtop) is controller-gen's CRD of virtop's own api/v1 types
//	    (`make manifests`): the validations virtop declares there (patterns,
//	    lengths, bounds, enums, required fields and CEL rules) are copied to
//	    the same paths of upstream's schema, so the API server refuses what
//	    it refused with virtop's subset schema, and explains and validates
//	    everything else as upstream's does.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

const crdName = "kubevirts.kubevirt.io"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubevirtcrd upstream|merge [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "upstream":
		fs := flag.NewFlagSet("upstream", flag.ExitOnError)
		in := fs.String("in", "", "controller-gen's output directory over kubevirt.io/api core/v1")
		source := fs.String("source", "", "what the input was generated from, for the header")
		out := fs.String("out", "", "output file")
		_ = fs.Parse(os.Args[2:])
		err = writeUpstream(*in, *source, *out)
	case "merge":
		fs := flag.NewFlagSet("merge", flag.ExitOnError)
		up := fs.String("upstream", "", "upstream's CRD (kubevirtcrd upstream)")
		own := fs.String("virtop", "", "controller-gen's CRD of virtop's api/v1")
		out := fs.String("out", "", "output file")
		_ = fs.Parse(os.Args[2:])
		err = writeMerged(*up, *own, *out)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubevirtcrd:", err)
		os.Exit(1)
	}
}

func readCRD(path string) (*apiextv1.CustomResourceDefinition, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if crd.Name != crdName {
		return nil, fmt.Errorf("%s holds %s, not %s", path, crd.Name, crdName)
	}
	return crd, nil
}

func storageSchema(crd *apiextv1.CustomResourceDefinition) (*apiextv1.JSONSchemaProps, error) {
	for _, v := range crd.Spec.Versions {
		if v.Storage && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			return v.Schema.OpenAPIV3Schema, nil
		}
	}
	return nil, fmt.Errorf("%s has no storage version with a schema", crd.Name)
}

func write(path, header string, crd *apiextv1.CustomResourceDefinition) error {
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	body, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	// Neither status nor a creation timestamp belong in a manifest.
	var m map[string]any
	if err := yaml.Unmarshal(body, &m); err != nil {
		return err
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if body, err = yaml.Marshal(m); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte(header+"---\n"), body...), 0o644)
}

// writeUpstream builds upstream's CRD around controller-gen's schema.
func writeUpstream(in, source, out string) error {
	if in == "" || out == "" || source == "" {
		return fmt.Errorf("upstream: -in, -source and -out are required")
	}
	gen, err := readCRD(filepath.Join(in, "kubevirt.io_kubevirts.yaml"))
	if err != nil {
		return err
	}
	schema, err := storageSchema(gen)
	if err != nil {
		return err
	}
	crd := &apiextv1.CustomResourceDefinition{}
	crd.Name = crdName
	crd.Annotations = gen.Annotations // controller-gen's version
	// Upstream's virt-operator labels this CRD operator.kubevirt.io (the
	// others kubevirt.io).
	crd.Labels = map[string]string{"operator.kubevirt.io": ""}
	crd.Spec = apiextv1.CustomResourceDefinitionSpec{
		Group: "kubevirt.io",
		Scope: apiextv1.NamespaceScoped,
		Names: apiextv1.CustomResourceDefinitionNames{
			Plural: "kubevirts", Singular: "kubevirt", Kind: "KubeVirt", ListKind: "KubeVirtList",
			ShortNames: []string{"kv", "kvs"}, Categories: []string{"all"},
		},
	}
	warning := "kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release."
	for _, v := range []apiextv1.CustomResourceDefinitionVersion{
		{Name: "v1", Served: true, Storage: true},
		{Name: "v1alpha3", Served: true, Deprecated: true, DeprecationWarning: &warning},
	} {
		v.Schema = &apiextv1.CustomResourceValidation{OpenAPIV3Schema: schema.DeepCopy()}
		v.Subresources = &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}}
		v.AdditionalPrinterColumns = []apiextv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		}
		crd.Spec.Versions = append(crd.Spec.Versions, v)
	}
	header := "# Upstream's KubeVirt CRD: the schema generated from " + source + ",\n" +
		"# names, versions, printer columns and label as upstream's virt-operator\n" +
		"# defines them. Generated by `make kubevirt-crd-upstream` (hack/kubevirtcrd). Do not edit.\n"
	return write(out, header, crd)
}

// writeMerged lays virtop's checks over upstream's CRD.
func writeMerged(upPath, ownPath, out string) error {
	if upPath == "" || ownPath == "" || out == "" {
		return fmt.Errorf("merge: -upstream, -virtop and -out are required")
	}
	up, err := readCRD(upPath)
	if err != nil {
		return err
	}
	own, err := readCRD(ownPath)
	if err != nil {
		return err
	}
	checks, err := storageSchema(own)
	if err != nil {
		return err
	}
	var copied []string
	for i := range up.Spec.Versions {
		v := &up.Spec.Versions[i]
		copied = copied[:0]
		if err := overlay(v.Schema.OpenAPIV3Schema, checks, "", &copied); err != nil {
			return fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	sort.Strings(copied)
	header := "# virtop's KubeVirt CRD: upstream's (" + filepath.ToSlash(upPath) + ", generated from\n" +
		"# kubevirt.io/api) with the validations of virtop's api/v1 types laid over it at\n" +
		"# the same paths (" + fmt.Sprint(len(copied)) + " fields). Generated by `make manifests` (hack/kubevirtcrd merge). Do not edit.\n"
	return write(out, header, up)
}

// overlay copies the validation keywords of src into dst, recursively at
// the same paths. A path that src validates and dst lacks is an error:
// virtop would check a field upstream's schema does not have.
func overlay(dst, src *apiextv1.JSONSchemaProps, path string, copied *[]string) error {
	if dst == nil {
		return fmt.Errorf("%s: virtop validates it, upstream's schema has no such field", cmpOr(path, "."))
	}
	did := false
	set := func(ok bool, f func()) {
		if ok {
			f()
			did = true
		}
	}
	set(src.Pattern != "", func() { dst.Pattern = src.Pattern })
	set(src.MaxLength != nil, func() { dst.MaxLength = src.MaxLength })
	set(src.MinLength != nil, func() { dst.MinLength = src.MinLength })
	set(src.Maximum != nil, func() { dst.Maximum, dst.ExclusiveMaximum = src.Maximum, src.ExclusiveMaximum })
	set(src.Minimum != nil, func() { dst.Minimum, dst.ExclusiveMinimum = src.Minimum, src.ExclusiveMinimum })
	set(src.MaxItems != nil, func() { dst.MaxItems = src.MaxItems })
	set(src.MinItems != nil, func() { dst.MinItems = src.MinItems })
	set(src.MaxProperties != nil, func() { dst.MaxProperties = src.MaxProperties })
	set(len(src.Enum) > 0, func() { dst.Enum = src.Enum })
	set(len(src.XValidations) > 0, func() { dst.XValidations = src.XValidations })
	set(len(src.Required) > 0, func() { dst.Required = union(dst.Required, src.Required) })
	if did {
		*copied = append(*copied, cmpOr(path, "."))
	}
	keys := make([]string, 0, len(src.Properties))
	for k := range src.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := src.Properties[k]
		if !validates(&s) {
			continue
		}
		d, ok := dst.Properties[k]
		if !ok {
			return fmt.Errorf("%s.%s: virtop validates it, upstream's schema has no such field", path, k)
		}
		if err := overlay(&d, &s, path+"."+k, copied); err != nil {
			return err
		}
		dst.Properties[k] = d
	}
	if src.Items != nil && src.Items.Schema != nil && validates(src.Items.Schema) {
		if dst.Items == nil || dst.Items.Schema == nil {
			return fmt.Errorf("%s[]: virtop validates its items, upstream's schema has none", path)
		}
		if err := overlay(dst.Items.Schema, src.Items.Schema, path+"[]", copied); err != nil {
			return err
		}
	}
	if src.AdditionalProperties != nil && src.AdditionalProperties.Schema != nil && validates(src.AdditionalProperties.Schema) {
		if dst.AdditionalProperties == nil || dst.AdditionalProperties.Schema == nil {
			return fmt.Errorf("%s.*: virtop validates its values, upstream's schema has none", path)
		}
		if err := overlay(dst.AdditionalProperties.Schema, src.AdditionalProperties.Schema, path+".*", copied); err != nil {
			return err
		}
	}
	return nil
}

// validates reports whether a schema, or anything below it, declares a
// validation overlay copies.
func validates(s *apiextv1.JSONSchemaProps) bool {
	if s == nil {
		return false
	}
	if s.Pattern != "" || s.MaxLength != nil || s.MinLength != nil || s.Maximum != nil || s.Minimum != nil ||
		s.MaxItems != nil || s.MinItems != nil || s.MaxProperties != nil || len(s.Enum) > 0 ||
		len(s.XValidations) > 0 || len(s.Required) > 0 {
		return true
	}
	for _, p := range s.Properties {
		if validates(&p) {
			return true
		}
	}
	if s.Items != nil && validates(s.Items.Schema) {
		return true
	}
	return s.AdditionalProperties != nil && validates(s.AdditionalProperties.Schema)
}

func union(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
