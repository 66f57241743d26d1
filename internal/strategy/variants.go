package strategy

import (
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// variantTransforms are the transforms a release's variants may name
// (release.Variant.Transform): changes that follow a rule over many
// objects rather than a patch of one. Each changes the freshly decoded
// objects it is given.
var variantTransforms = map[string]func(objs []client.Object){
	"optOutRoleAggregation": optOutRoleAggregation,
}

// aggregateLabelPrefix starts the labels by which Kubernetes aggregates a
// ClusterRole into the default admin, edit and view roles.
const aggregateLabelPrefix = "rbac.authorization.k8s.io/aggregate-to-"

// optOutRoleAggregation keeps every ClusterRole out of the default roles:
// each aggregate-to-* label it carries says "false" (upstream v1.8+,
// install/strategy.go, under roleAggregationStrategy Manual), so a cluster
// administrator grants KubeVirt's roles explicitly.
func optOutRoleAggregation(objs []client.Object) {
	for _, o := range objs {
		cr, ok := o.(*rbacv1.ClusterRole)
		if !ok {
			continue
		}
		for k := range cr.Labels {
			if strings.HasPrefix(k, aggregateLabelPrefix) {
				cr.Labels[k] = "false"
			}
		}
	}
}
