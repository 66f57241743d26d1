package crds_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/fatal"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{SkipVirtopCRDs: true, Scheme: scheme.New()}))
}

func widget(plural string) *apiextv1.CustomResourceDefinition {
	kind := strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]
	crd := &apiextv1.CustomResourceDefinition{}
	crd.Name = plural + ".wait.virtop.dev"
	crd.Spec.Group = "wait.virtop.dev"
	crd.Spec.Scope = apiextv1.ClusterScoped
	crd.Spec.Names = apiextv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"}
	schema := &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	for _, v := range []string{"v1beta1", "v1"} {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == "v1", Schema: schema})
	}
	return crd
}

// TestWaitServedThenWrite: right after WaitServed returns, an object of the
// new kind can be created at every served version, for CRDs created one
// after the other (CI saw "no matches for kind" after Established alone).
func TestWaitServedThenWrite(t *testing.T) {
	c := testenv.Get(t).Client
	ctx := context.Background()
	for i := range 5 {
		crd := widget(fmt.Sprintf("widget%ds", i))
		if err := c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		crds.WaitServed(t, c, time.Minute, crd)
		for _, v := range crd.Spec.Versions {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(crd.Spec.Group + "/" + v.Name)
			u.SetKind(crd.Spec.Names.Kind)
			u.SetName("at-" + v.Name)
			if err := c.Create(ctx, u); err != nil {
				t.Fatalf("%s at %s right after WaitServed: %v", crd.Name, v.Name, err)
			}
		}
	}
}

// TestWaitServedFailsForAnUnknownKind: a CRD the API server does not have
// fails the wait, naming the kind and the mapper's answer.
func TestWaitServedFailsForAnUnknownKind(t *testing.T) {
	c := testenv.Get(t).Client
	msg := fatal.Message(func(tb testing.TB) {
		crds.WaitServed(tb, c, 2*time.Second, widget("neverapplieds"))
	})
	if !strings.Contains(msg, "Neverapplied.wait.virtop.dev served at [v1beta1 v1]") || !strings.Contains(msg, "no matches for kind") {
		t.Errorf("failure %q; want one naming the kind, its versions and the mapper's miss", msg)
	}
}
