package strategy

// Config transforms: what a KubeVirt resource changes in a release's
// objects beyond the tokens of its templates. Each is a small pure function
// that changes the objects it is given (fresh ones, decoded for this
// render). Most are what upstream's operator does when it applies a
// strategy (pkg/virt-operator/resource/apply) or when it renders one for a
// config the reference dumps do not show (components/*.go); virtop folds
// them into the strategy because they come from the config.

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/podplacement"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// transform is one named step of the rendering.
type transform struct {
	name string
	fn   func(c *config.DeploymentConfig, objs []client.Object) error
}

// configTransforms run in this order after the templates are rendered.
var configTransforms = []transform{
	{"placement", placeWorkloads},
	{"image pull secrets", addImagePullSecrets},
	{"passthrough environment", addPassthroughEnv},
	{"customizeComponents flags", applyComponentFlags},
	{"migration network", annotateMigrationNetwork},
	{"max devices", setMaxDevices},
	{"pod template metadata", stampPodTemplates},
}

// podTemplate returns the pod template of a Deployment or DaemonSet.
func podTemplate(o client.Object) *corev1.PodTemplateSpec {
	switch t := o.(type) {
	case *appsv1.Deployment:
		return &t.Spec.Template
	case *appsv1.DaemonSet:
		return &t.Spec.Template
	}
	return nil
}

// kubeVirtComponents are the workloads upstream's operator renders from its
// own code (components/deployments.go, daemonsets.go), which take the
// passthrough environment, pull-secret and customization treatment;
// virt-template's come from its own bundle.
var kubeVirtComponents = []string{
	vocab.VirtAPI, vocab.VirtController, vocab.VirtHandler,
	vocab.VirtExportProxy, vocab.VirtSynchronizationController,
}

func isKubeVirtComponent(o client.Object) bool {
	return slices.Contains(kubeVirtComponents, o.GetName())
}

// placeWorkloads places Deployments by spec.infra (default: upstream's
// control-plane placement) and the DaemonSet by spec.workloads, as
// upstream's InjectPlacementMetadata does at apply time.
func placeWorkloads(c *config.DeploymentConfig, objs []client.Object) error {
	for _, o := range objs {
		switch t := o.(type) {
		case *appsv1.Deployment:
			podplacement.PlaceInfra(&t.Spec.Template.Spec, c.Infra)
			if c.Infra.Replicas != nil {
				t.Spec.Replicas = c.Infra.Replicas
			}
		case *appsv1.DaemonSet:
			podplacement.PlaceWorkloads(&t.Spec.Template.Spec, c.Workloads)
		}
	}
	return nil
}

// addImagePullSecrets gives every KubeVirt component pod the pull secrets
// (newPodTemplateSpec).
func addImagePullSecrets(c *config.DeploymentConfig, objs []client.Object) error {
	if len(c.ImagePullSecrets) == 0 {
		return nil
	}
	for _, o := range objs {
		pt := podTemplate(o)
		if pt == nil || !isKubeVirtComponent(o) {
			continue
		}
		for _, s := range c.ImagePullSecrets {
			pt.Spec.ImagePullSecrets = append(pt.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
	}
	return nil
}

// addPassthroughEnv hands the operator's KV_IO_EXTRA_ENV_* variables to the
// main container of every KubeVirt component, before its own variables
// (upstream's NewEnvVarMap base), sorted by name where upstream's order is a
// map's. A variable the container already sets keeps its own value.
func addPassthroughEnv(c *config.DeploymentConfig, objs []client.Object) error {
	if len(c.PassthroughEnv) == 0 {
		return nil
	}
	env := c.PassthroughEnvVars()
	for _, o := range objs {
		pt := podTemplate(o)
		if pt == nil || !isKubeVirtComponent(o) || len(pt.Spec.Containers) == 0 {
			continue
		}
		main := &pt.Spec.Containers[0]
		var add []corev1.EnvVar
		for _, e := range env {
			if !slices.ContainsFunc(main.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }) {
				add = append(add, e)
			}
		}
		main.Env = append(add, main.Env...)
	}
	return nil
}

// componentFlagKeys maps a customizeComponents.flags key to its workload.
var componentFlagKeys = map[string]string{
	"api":        vocab.VirtAPI,
	"controller": vocab.VirtController,
	"handler":    vocab.VirtHandler,
}

// applyComponentFlags applies customizeComponents.flags as upstream does
// (apply/patches.go): the main container's command becomes the binary
// followed by the flags (--<lowercased name> [value]), while its default
// args stay and still follow. Upstream emits the flags in map order; here
// they are sorted by name so the strategy is deterministic.
func applyComponentFlags(c *config.DeploymentConfig, objs []client.Object) error {
	for key, flags := range c.Customize.Flags {
		name, ok := componentFlagKeys[key]
		if !ok || len(flags) == 0 {
			continue
		}
		for _, o := range objs {
			pt := podTemplate(o)
			if pt == nil || o.GetName() != name || len(pt.Spec.Containers) == 0 || len(pt.Spec.Containers[0].Command) == 0 {
				continue
			}
			main := &pt.Spec.Containers[0]
			main.Command = customizedCommand(main.Command[0], flags)
		}
	}
	return nil
}

func customizedCommand(binary string, flags config.Flags) []string {
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	sort.Strings(names)
	cmd := []string{binary}
	for _, n := range names {
		cmd = append(cmd, "--"+strings.ToLower(n))
		if v := flags[n]; v != "" {
			cmd = append(cmd, v)
		}
	}
	return cmd
}

// Multus's annotation and the interface name upstream gives the migration
// network (daemonsets.go; virtv1.MigrationInterfaceName).
const (
	networksAnnotation     = "k8s.v1.cni.cncf.io/networks"
	migrationInterfaceName = "migration0"
)

// annotateMigrationNetwork joins virt-handler's pods to
// spec.configuration.migrations.network as interface migration0.
func annotateMigrationNetwork(c *config.DeploymentConfig, objs []client.Object) error {
	if c.MigrationNetwork == "" {
		return nil
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == vocab.VirtHandler {
			if ds.Spec.Template.Annotations == nil {
				ds.Spec.Template.Annotations = map[string]string{}
			}
			ds.Spec.Template.Annotations[networksAnnotation] = c.MigrationNetwork + "@" + migrationInterfaceName
		}
	}
	return nil
}

// setMaxDevices passes virtualMachineInstancesPerNode to virt-handler as
// --max-devices, appended to its command (apply/apps.go setMaxDevices).
func setMaxDevices(c *config.DeploymentConfig, objs []client.Object) error {
	if c.MaxVMIsPerNode == 0 {
		return nil
	}
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == vocab.VirtHandler {
			main := &ds.Spec.Template.Spec.Containers[0]
			main.Command = append(main.Command, "--max-devices", strconv.Itoa(c.MaxVMIsPerNode))
		}
	}
	return nil
}

// stampPodTemplates gives every pod template the labels and
// install-strategy annotations upstream's injectOperatorMetadata stamps at
// apply time (without the customizer's generation annotation, which upstream
// puts on objects only), so a new strategy rolls the pods.
func stampPodTemplates(c *config.DeploymentConfig, objs []client.Object) error {
	for _, o := range objs {
		pt := podTemplate(o)
		if pt == nil {
			continue
		}
		stampMeta(c, pt.Labels, pt.Annotations, func(l, a map[string]string) { pt.Labels, pt.Annotations = l, a })
	}
	return nil
}

// stampMeta sets the labels and annotations upstream's
// injectOperatorMetadata sets: the product labels when given (the version
// label also where the object already has it, from the product version or
// the KubeVirt version), the component label, the manager label (virtop's
// value) and the three install-strategy annotations.
func stampMeta(c *config.DeploymentConfig, labels, ann map[string]string, set func(l, a map[string]string)) {
	if labels == nil {
		labels = map[string]string{}
	}
	if c.ProductVersion != "" {
		labels[vocab.AppVersionLabel] = c.ProductVersion
	}
	if c.ProductName != "" {
		labels[vocab.AppPartOfLabel] = c.ProductName
	}
	labels[vocab.AppComponentLabel] = cmp.Or(c.ProductComponent, DefaultComponent)
	labels[vocab.ManagedByLabel] = vocab.ManagedByValue
	if ann == nil {
		ann = map[string]string{}
	}
	ann[vocab.InstallStrategyVersionAnnotation] = c.Version
	ann[vocab.InstallStrategyRegistryAnnotation] = c.Registry
	ann[vocab.InstallStrategyIdentifierAnnotation] = c.ID
	set(labels, ann)
}

func runTransforms(c *config.DeploymentConfig, objs []client.Object, ts []transform) error {
	for _, t := range ts {
		if err := t.fn(c, objs); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	return nil
}
