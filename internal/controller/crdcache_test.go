package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestCachedCRDsCompareTrue: the operator caches CustomResourceDefinitions
// slimmed (schemas as JSON text, others' CRDs without spec; see
// apply.TransformCRD). A fresh operator, which remembers nothing it
// applied, must still find every CRD equal to what it wants (no write),
// and a schema edited by hand must still be seen and restored.
func TestCachedCRDsCompareTrue(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	stop := operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)
	stop()

	before := managedVersions(t, c)
	patchesBefore := crdWrites(t)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	// The new operator reconciles at once; give it time for several passes.
	time.Sleep(15 * time.Second)
	kvtest.WaitRolledOut(t, c, key)
	after := managedVersions(t, c)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s written by a restarted operator with nothing to change: %s -> %s", k, v, after[k])
		}
	}
	// A server-side apply that changes nothing keeps the resourceVersion,
	// so count the requests too.
	if n := crdWrites(t) - patchesBefore; n != 0 {
		t.Errorf("a restarted operator with nothing to change sent %g writes to CustomResourceDefinitions", n)
	}

	const name = "virtualmachines.kubevirt.io"
	crd := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	want := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description
	orig := crd.DeepCopy()
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "edited by hand"
	if err := c.Patch(ctx, crd, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the edited schema restored", 2*time.Minute, func() (bool, string) {
		got := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err.Error()
		}
		d := got.Spec.Versions[0].Schema.OpenAPIV3Schema.Description
		return d == want, fmt.Sprintf("description %q", d)
	})
}

// crdWrites sums the operator's write requests to CustomResourceDefinitions
// so far.
func crdWrites(t *testing.T) float64 {
	return operatortest.Requests(t, func(verb, resource string) bool {
		return resource == "customresourcedefinitions.apiextensions.k8s.io" &&
			(verb == "create" || verb == "update" || verb == "patch" || verb == "delete")
	})
}

// requestsTo sums the operator's requests (any verb) to resources whose
// name ends in suffix (for example ".instancetype.kubevirt.io").
func requestsTo(t *testing.T, suffix string) float64 {
	return operatortest.Requests(t, func(_, resource string) bool { return strings.HasSuffix(resource, suffix) })
}
