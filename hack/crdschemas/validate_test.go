package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/install"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// TestGoldenCRDsValidate runs the API server's create-time validation of
// CustomResourceDefinitions (after the defaulting and the conversion to the
// internal type the server applies first) on the CRDs of the strategy
// golden files (internal/strategy/testdata/<version>/), i.e. exactly what
// virtop renders: names, versions, subresources, printer columns and the
// schemas, including the structural and CEL-cost checks.
//
// It lives in this tools module, and reads the golden files rather than
// importing the renderer, because the validation package pulls in cel-go and
// k8s.io/apiserver, which the main module does not require.
func TestGoldenCRDsValidate(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	dirs, err := filepath.Glob(filepath.Join("..", "..", "internal", "strategy", "testdata", "v*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden directories: %v", err)
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "customresourcedefinition_*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 16 {
			t.Errorf("%s: %d CRDs, want 16", dir, len(files))
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			crd := &apiextv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(data, crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
				}
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil || v.Schema.OpenAPIV3Schema.XPreserveUnknownFields != nil {
					t.Errorf("%s: version %s has no closed schema", f, v.Name)
				}
			}
			scheme.Default(crd)
			internal := &apiextensions.CustomResourceDefinition{}
			if err := scheme.Convert(crd, internal, nil); err != nil {
				t.Fatalf("%s: convert: %v", f, err)
			}
			if errs := validation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
				t.Errorf("%s: %v", filepath.Base(f), errs.ToAggregate())
			}
		}
	}
}
