package cli

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy"
)

func init() { register(newDumpCommand) }

// renderFlags are the flags that describe a strategy to render offline;
// `dump` and the version: operands of `diff` share them.
type renderFlags struct {
	kubevirtFile string
	version      string
	tag          string
	namespace    string
	registry     string
	featureGates []string
	// tuningFile is a KubeVirtMonitoring applied to the monitoring
	// objects after rendering, as the operator's plan applies it.
	tuningFile string
}

func (f *renderFlags) bind(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.kubevirtFile, "kubevirt", "", "a KubeVirt resource (YAML or JSON) to render the strategy of; other flags override its fields")
	fs.StringVar(&f.version, "version", "", "KubeVirt version to render (spec.imageTag); default: the resource's, else the catalog default")
	fs.StringVar(&f.tag, "tag", "", "same as --version (upstream calls the version imageTag)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "install namespace (default: the resource's, else kubevirt)")
	for _, name := range []string{"version", "tag"} {
		_ = cmd.RegisterFlagCompletionFunc(name, completeVersions)
	}
	_ = cmd.MarkFlagFilename("kubevirt", "yaml", "yml", "json")
	_ = cmd.MarkFlagFilename("tuning", "yaml", "yml", "json")
	fs.StringVar(&f.registry, "registry", "", "image registry (spec.imageRegistry)")
	fs.StringSliceVar(&f.featureGates, "feature-gates", nil, "feature gates, comma-separated (replace the resource's)")
	fs.StringVar(&f.tuningFile, "tuning", "", "a KubeVirtMonitoring (virtop.dev/v1alpha1, YAML or JSON) to apply to the PrometheusRule and ServiceMonitor, as the operator does")
}

// kubeVirt builds the KubeVirt resource the flags describe.
func (f *renderFlags) kubeVirt() (*kvv1.KubeVirt, error) {
	kv := &kvv1.KubeVirt{}
	if f.kubevirtFile != "" {
		data, err := os.ReadFile(f.kubevirtFile)
		if err != nil {
			return nil, err
		}
		kv, err = decodeKubeVirt(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.kubevirtFile, err)
		}
	}
	if f.version != "" && f.tag != "" && f.version != f.tag {
		return nil, fmt.Errorf("--version %s and --tag %s disagree; give one", f.version, f.tag)
	}
	if v := firstNonEmpty(f.version, f.tag); v != "" {
		kv.Spec.ImageTag = v
	}
	if f.namespace != "" {
		kv.Namespace = f.namespace
	}
	if kv.Namespace == "" {
		kv.Namespace = config.DefaultNamespace
	}
	if f.registry != "" {
		kv.Spec.ImageRegistry = f.registry
	}
	if f.featureGates != nil {
		if kv.Spec.Configuration.DeveloperConfiguration == nil {
			kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{}
		}
		kv.Spec.Configuration.DeveloperConfiguration.FeatureGates = f.featureGates
	}
	return kv, nil
}

// config is the deployment config the flags describe, with the
// KV_IO_EXTRA_ENV_* variables of the environment as the operator would
// pass them on.
func (f *renderFlags) config() (*config.DeploymentConfig, error) {
	kv, err := f.kubeVirt()
	if err != nil {
		return nil, err
	}
	return config.FromKubeVirt(kv, config.Settings{PassthroughEnv: config.PassthroughEnvFrom(os.Environ())})
}

// generate renders the strategy the flags describe.
func (f *renderFlags) generate() (*strategy.Strategy, error) {
	cfg, err := f.config()
	if err != nil {
		return nil, err
	}
	s, err := strategy.Generate(cfg)
	if err != nil || f.tuningFile == "" {
		return s, err
	}
	if err := applyTuningFile(s, cfg, f.tuningFile); err != nil {
		return nil, err
	}
	return s, nil
}

func decodeKubeVirt(data []byte) (*kvv1.KubeVirt, error) {
	objs, err := strategy.DecodeManifests(data)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("want exactly one KubeVirt resource, found %d objects", len(objs))
	}
	kv, ok := objs[0].(*kvv1.KubeVirt)
	if !ok {
		return nil, fmt.Errorf("want a kubevirt.io/v1 KubeVirt, found %s", objs[0].GetObjectKind().GroupVersionKind())
	}
	return kv, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func newDumpCommand() *cobra.Command {
	var (
		rf          renderFlags
		kinds       []string
		output      string
		asConfigMap bool
	)
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "Render an install strategy offline, without a cluster",
		Long: `Render the install strategy for a KubeVirt resource and print its objects.

Rendering is pure: the same input always prints the same bytes. Optional
objects (monitoring, OpenShift kinds) are always printed; their
virtop.dev/gate annotation says what the live cluster must offer for the
operator to apply them.`,
		Example: `  # the default version's strategy as YAML
  virtop dump

  # only the Deployments and the DaemonSet of v1.5.0, as a JSON List
  virtop dump --version v1.5.0 --kind Deployment --kind DaemonSet -o json

  # the strategy ConfigMap the operator would write for a resource
  virtop dump --kubevirt kubevirt-cr.yaml --as-configmap

  # the monitoring objects as a KubeVirtMonitoring tunes them
  virtop dump --tuning kubevirtmonitoring.yaml --kind PrometheusRule --kind ServiceMonitor`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, objectFormats); err != nil {
				return err
			}
			if asConfigMap && rf.tuningFile != "" {
				return fmt.Errorf("--tuning and --as-configmap cannot be combined: the strategy ConfigMap holds the untuned objects; the operator applies the tuning when it plans")
			}
			s, err := rf.generate()
			if err != nil {
				return err
			}
			var objs []client.Object
			if asConfigMap {
				if len(kinds) > 0 {
					return fmt.Errorf("--kind and --as-configmap cannot be combined")
				}
				cm, err := s.ConfigMap(namespaceOf(s))
				if err != nil {
					return err
				}
				objs = []client.Object{cm}
			} else {
				objs, err = filterKinds(s.Objects, kinds)
				if err != nil {
					return err
				}
			}
			out, err := strategy.Print(objs, output)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	rf.bind(cmd)
	cmd.Flags().StringArrayVar(&kinds, "kind", nil, "print only objects of this kind (repeatable, case-insensitive)")
	_ = cmd.RegisterFlagCompletionFunc("kind", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return completeKinds(rf), cobra.ShellCompDirectiveNoFileComp
	})
	addOutputFlag(cmd, &output, objectFormats)
	cmd.Flags().BoolVar(&asConfigMap, "as-configmap", false, "print the strategy ConfigMap instead of the objects")
	return cmd
}

// completeKinds lists the kinds of the strategy the other flags describe
// (the default version's when they describe none that renders).
func completeKinds(rf renderFlags) []string {
	s, err := rf.generate()
	if err != nil {
		if s, err = (&renderFlags{}).generate(); err != nil {
			return nil
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range s.Objects {
		if k := strategy.Kind(o); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// namespaceOf finds the install namespace of a strategy from its
// namespaced objects.
func namespaceOf(s *strategy.Strategy) string {
	for _, o := range s.Objects {
		if o.GetNamespace() != "" {
			return o.GetNamespace()
		}
	}
	return config.DefaultNamespace
}

func filterKinds(objs []client.Object, kinds []string) ([]client.Object, error) {
	if len(kinds) == 0 {
		return objs, nil
	}
	want := map[string]bool{}
	have := map[string]bool{}
	for _, o := range objs {
		have[strings.ToLower(strategy.Kind(o))] = true
	}
	for _, k := range kinds {
		k = strings.ToLower(k)
		if !have[k] {
			return nil, fmt.Errorf("the strategy has no objects of kind %q", k)
		}
		want[k] = true
	}
	var out []client.Object
	for _, o := range objs {
		if want[strings.ToLower(strategy.Kind(o))] {
			out = append(out, o)
		}
	}
	return out, nil
}
