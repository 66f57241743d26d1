package strategy

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy/podplacement"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// IsUpstream reports whether objects are an install strategy written by
// upstream's operator rather than virtop: none carries virtop's stage
// annotation.
func IsUpstream(objs []client.Object) bool {
	for _, o := range objs {
		if _, ok := o.GetAnnotations()[vocab.StageAnnotation]; ok {
			return false
		}
	}
	return len(objs) > 0
}

// UpstreamVersion is the KubeVirt version of an upstream strategy, read
// from its virt-api image tag; "" when it has none.
func UpstreamVersion(objs []client.Object) string {
	for _, o := range objs {
		d, ok := o.(*appsv1.Deployment)
		if !ok || d.Name != vocab.VirtAPI || len(d.Spec.Template.Spec.Containers) == 0 {
			continue
		}
		img := d.Spec.Template.Spec.Containers[0].Image
		if i := strings.LastIndex(img, ":"); i > 0 && !strings.Contains(img[i:], "/") {
			return img[i+1:]
		}
	}
	return ""
}

// AsAppliedByUpstream returns copies of an upstream strategy's objects as
// upstream's operator applies them for a config
// (pkg/virt-operator/resource/apply), so they compare with virtop's, which
// fold those steps into the strategy: the objects of feature gates that
// are off are left out (upstream deletes them); every object and pod
// template gets the operator's labels and install-strategy annotations
// (injectOperatorMetadata; objects also the KubeVirt resource's generation,
// taken as 0, the dump's); Deployments get the infra placement (by default
// the control-plane one) and DaemonSets the workloads placement
// (InjectPlacementMetadata). virt-handler's staged TLS rollout depends on
// the live DaemonSet and stays out of both strategies (virtop's is in
// internal/plan). The config's version must be in the catalog.
func AsAppliedByUpstream(objs []client.Object, cfg *config.DeploymentConfig) ([]client.Object, error) {
	rel, ok := release.Lookup(cfg.Version)
	if !ok {
		return nil, fmt.Errorf("KubeVirt %s is not in this virtop's catalog", cfg.Version)
	}
	out := make([]client.Object, 0, len(objs))
	for _, in := range objs {
		o := in.DeepCopyObject().(client.Object)
		if !gateOn(cfg, rel, o) {
			continue
		}
		l, a := upstreamStamps(cfg, o.GetLabels(), o.GetAnnotations(), true)
		o.SetLabels(l)
		o.SetAnnotations(a)
		switch w := o.(type) {
		case *appsv1.Deployment:
			w.Spec.Template.Labels, w.Spec.Template.Annotations = upstreamStamps(cfg, w.Spec.Template.Labels, w.Spec.Template.Annotations, false)
			podplacement.PlaceInfra(&w.Spec.Template.Spec, cfg.Infra)
		case *appsv1.DaemonSet:
			w.Spec.Template.Labels, w.Spec.Template.Annotations = upstreamStamps(cfg, w.Spec.Template.Labels, w.Spec.Template.Annotations, false)
			podplacement.PlaceWorkloads(&w.Spec.Template.Spec, cfg.Workloads)
		}
		out = append(out, o)
	}
	return out, nil
}

func upstreamStamps(cfg *config.DeploymentConfig, labels, ann map[string]string, generation bool) (map[string]string, map[string]string) {
	if labels == nil {
		labels = map[string]string{}
	}
	if ann == nil {
		ann = map[string]string{}
	}
	if cfg.ProductVersion != "" {
		labels[vocab.AppVersionLabel] = cfg.ProductVersion
	}
	if cfg.ProductName != "" {
		labels[vocab.AppPartOfLabel] = cfg.ProductName
	}
	labels[vocab.AppComponentLabel] = DefaultComponent
	if cfg.ProductComponent != "" {
		labels[vocab.AppComponentLabel] = cfg.ProductComponent
	}
	labels[vocab.ManagedByLabel] = vocab.UpstreamManagedByValue
	ann[vocab.InstallStrategyVersionAnnotation] = cfg.Version
	ann[vocab.InstallStrategyRegistryAnnotation] = cfg.Registry
	ann[vocab.InstallStrategyIdentifierAnnotation] = cfg.ID
	if generation {
		ann[vocab.UpstreamGenerationAnnotation] = "0"
	}
	return labels, ann
}
