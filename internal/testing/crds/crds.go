// Package crds holds the tests' wait for CustomResourceDefinitions to be
// usable through a controller-runtime client, on envtest and on the local
// cluster alike.
package crds

import (
	"context"
	"fmt"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/poll"
)

// WaitServed waits, up to timeout, until the client's REST mapper resolves
// every served version of each CRD's kind. A CRD is Established before the
// API server's discovery lists its versions, so a write right after
// Established can still fail with "no matches for kind" (seen in CI under
// load). controller-runtime's mapper asks discovery again on every miss, so
// polling it is enough; nothing needs resetting.
func WaitServed(t testing.TB, c client.Client, timeout time.Duration, defs ...*apiextv1.CustomResourceDefinition) {
	t.Helper()
	for _, crd := range defs {
		gk := schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		var versions []string
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions = append(versions, v.Name)
			}
		}
		poll.Eventually(t, fmt.Sprintf("%s served at %v in discovery", gk, versions), timeout, func(context.Context) (bool, error) {
			for _, v := range versions {
				if _, err := c.RESTMapper().RESTMapping(gk, v); err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}
}
