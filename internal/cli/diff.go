package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/tools/diff"
)

func init() { register(newDiffCommand) }

func newDiffCommand() *cobra.Command {
	var (
		rf             renderFlags
		output         string
		ignoreMetadata bool
		showStamps     bool
	)
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two install strategies object by object",
		Long: `Compare two install strategies and print what B adds, removes and changes
relative to A.

Each operand is one of:
  FILE          a dump (virtop dump's YAML stream, or a JSON List), or a file
                holding one strategy ConfigMap, virtop's or upstream KubeVirt's
                (kubectl get configmap kubevirt-install-strategy-xxxxx -o yaml)
  version:TAG   the strategy of a catalog version, rendered in process; the
                rendering flags (--kubevirt, --namespace, --registry,
                --feature-gates, --tuning) apply to every version: operand

Objects are matched by group, kind, namespace and name. For objects both
have, the changed fields are listed by path; items of lists whose items have
names (containers, env, volumes, rules...) are matched by name, other lists by
index. PrometheusRules are also compared alert by alert and recording rule by
recording rule. The kubevirt.io/install-strategy-identifier annotation (a hash
of the whole config) and server-written metadata are ignored, and so, unless
--show-stamps, are the version stamps (the install-strategy-version and
-registry and kubevirt.io/generation annotations, the app.kubernetes.io/version
label) and the bookkeeping (virtop's virtop.dev/... annotations and the
app.kubernetes.io/managed-by label).

A strategy written by upstream's operator (ConfigMap or decoded YAML, gzipped
or not) is read with its quirks (CA ConfigMaps listed twice, odd apiVersions)
and compared as upstream's operator applies it: the objects of feature gates
that are off left out, its labels, install-strategy annotations and placement
stamped, for the rendering flags' KubeVirt resource. What then differs from
virtop's rendering of the same release is listed, with the reasons, in
docs/upstream-differences.md.

Exit status: 0 when the strategies are equal, 1 when they differ, 2 on error.`,
		Example: `  # what changes between KubeVirt v1.5.0 and v1.5.3
  virtop diff version:v1.5.0 version:v1.5.3

  # what the operator installed (upstream's or virtop's strategy ConfigMap)
  # against what this virtop would render, ignoring labels and annotations
  kubectl -n kubevirt get configmap kubevirt-install-strategy-abcde -o yaml > installed.yaml
  virtop diff --ignore-metadata installed.yaml version:v1.5.3

  # what a KubeVirtMonitoring changes (a dump tuned with virtop dump --tuning)
  virtop diff version:v1.5.3 tuned.yaml

  # upstream's own strategy of v1.5.3 against virtop's
  virtop diff ../shared/upstream-strategies/v1.5.3/strategy-monitoring.yaml.gz version:v1.5.3

  # two dumps, as JSON for a script
  virtop dump --registry registry.example.com/kubevirt > a.yaml
  virtop dump > b.yaml
  virtop diff a.yaml b.yaml -o json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output, reportFormats); err != nil {
				return err
			}
			if rf.version != "" || rf.tag != "" {
				return fmt.Errorf("--version and --tag do not apply to diff; name the version in the operand (version:<tag>)")
			}
			if !strings.HasPrefix(args[0], diff.VersionPrefix) && !strings.HasPrefix(args[1], diff.VersionPrefix) {
				if changed := renderFlagsSet(cmd); len(changed) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: the rendering flags (%s) apply only to version: operands; neither operand is one\n", strings.Join(changed, ", "))
				}
			}
			render := func(version string) (*strategy.Strategy, error) {
				f := rf
				f.version = version
				return f.generate()
			}
			loader := diff.Loader{Render: render, Upstream: func(version string, objs []client.Object) ([]client.Object, error) {
				f := rf
				f.version = version
				cfg, err := f.config()
				if err != nil {
					return nil, err
				}
				return strategy.AsAppliedByUpstream(objs, cfg)
			}}
			a, err := loader.Load(args[0])
			if err != nil {
				return err
			}
			b, err := loader.Load(args[1])
			if err != nil {
				return err
			}
			res := diff.Options{IgnoreMetadata: ignoreMetadata, ShowStamps: showStamps}.Compare(a, b)
			var out []byte
			if output == "json" {
				out, err = res.JSON()
				if err != nil {
					return err
				}
			} else {
				out = []byte(res.Text())
			}
			if _, err := cmd.OutOrStdout().Write(out); err != nil {
				return err
			}
			if !res.Equal() {
				return &ExitError{Code: 1}
			}
			return nil
		},
	}
	rf.bind(cmd)
	// The version comes from each version: operand; the flags are refused.
	_ = cmd.Flags().MarkHidden("version")
	_ = cmd.Flags().MarkHidden("tag")
	addOutputFlag(cmd, &output, reportFormats)
	cmd.Flags().BoolVar(&ignoreMetadata, "ignore-metadata", false, "ignore labels and annotations altogether (of objects and pod templates; not of alerts)")
	cmd.Flags().BoolVar(&showStamps, "show-stamps", false, "compare the version stamps and the bookkeeping metadata (virtop.dev/ annotations, managed-by label) too")
	return cmd
}

// renderFlagsSet lists the rendering flags given on the command line.
func renderFlagsSet(cmd *cobra.Command) []string {
	var out []string
	for _, name := range []string{"kubevirt", "namespace", "registry", "feature-gates", "tuning"} {
		if cmd.Flags().Changed(name) {
			out = append(out, "--"+name)
		}
	}
	return out
}
