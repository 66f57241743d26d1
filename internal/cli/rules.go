package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/tools/ruletest"
)

func init() { register(newRulesCommand) }

// rulesFlags select the rules to print or test. The monitoring tuning
// resource (--tuning FILE, a KubeVirtMonitoring) becomes the tuned rules of
// both commands.
type rulesFlags struct {
	version    string
	tuningFile string
	namespace  string
}

func (f *rulesFlags) bind(cmd *cobra.Command, namespaceHelp string) {
	cmd.Flags().StringVar(&f.version, "version", "", "KubeVirt version whose rules to use (default: the catalog default, "+release.Default+")")
	cmd.Flags().StringVar(&f.tuningFile, "tuning", "", "a KubeVirtMonitoring (virtop.dev/v1alpha1, YAML or JSON) whose alert tuning and additional groups to apply")
	cmd.Flags().StringVar(&f.namespace, "namespace", "", namespaceHelp)
}

// release resolves the version to a catalog release.
func (f *rulesFlags) release() (*release.Release, error) {
	v := f.version
	if v == "" {
		v = release.Default
	}
	r, ok := release.Lookup(v)
	if !ok {
		return &release.Release{}, fmt.Errorf("version %s is not in virtop's catalog (have %s)", v, strings.Join(release.Builtin().Versions(), ", "))
	}
	return r, nil
}

func newRulesCommand() *cobra.Command {
	var (
		rf     rulesFlags
		output string
	)
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "Print the PrometheusRule virtop installs for a KubeVirt version",
		Long: `Print the PrometheusRule prometheus-kubevirt-rules that the install strategy
of a KubeVirt version contains: KubeVirt's recording rules and alerts for that
version, plus virtop's KubeVirtControlPlaneDown, for the default install
namespace and runbook URL template.

"virtop rules test" evaluates rule unit tests against them.`,
		Example: `  virtop rules
  virtop rules --version v1.5.0 -o json
  virtop rules --tuning kubevirtmonitoring.yaml

  # a plain rule file for promtool, pint or a Thanos or Mimir ruler
  virtop rules -o rulefile --namespace kubevirt > kubevirt.rules.yaml
  promtool check rules kubevirt.rules.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "yaml" && output != "json" && output != "rulefile" {
				return fmt.Errorf("unknown output format %q (want yaml, json or rulefile)", output)
			}
			r, err := rf.release()
			if err != nil {
				return err
			}
			pr, err := prometheusRule(r.Version, rf.tuningFile, rf.namespace)
			if err != nil {
				return err
			}
			var out []byte
			if output == "rulefile" {
				out, err = rules.RuleFile(&pr.Spec)
			} else {
				out, err = printObject(pr, output)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	rf.bind(cmd, "install namespace the expressions select in (default kubevirt)")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json (the PrometheusRule), or rulefile (a plain Prometheus rule file, groups: at the top)")
	cmd.AddCommand(newRulesTestCommand())
	return cmd
}

// prometheusRule renders the strategy of a version for an install
// namespace (empty: the default) and returns its PrometheusRule, exactly as
// the strategy holds it, or as a tuning file (empty: none) changes it.
func prometheusRule(version, tuningFile, namespace string) (*monitoringv1.PrometheusRule, error) {
	f := renderFlags{version: version, tuningFile: tuningFile, namespace: namespace}
	s, err := f.generate()
	if err != nil {
		return nil, err
	}
	for _, o := range s.Objects {
		if pr, ok := o.(*monitoringv1.PrometheusRule); ok {
			return pr, nil
		}
	}
	return nil, fmt.Errorf("the %s strategy holds no PrometheusRule", version)
}

// printObject prints one object as YAML or JSON (one object, not a List).
func printObject(o client.Object, format string) ([]byte, error) {
	y, err := strategy.EncodeObject(o)
	if err != nil {
		return nil, err
	}
	switch format {
	case "yaml":
		return y, nil
	case "json":
		j, err := yaml.YAMLToJSON(y)
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, j, "", "  "); err != nil {
			return nil, err
		}
		buf.WriteByte('\n')
		return buf.Bytes(), nil
	}
	return nil, fmt.Errorf("unknown output format %q (want yaml or json)", format)
}

func newRulesTestCommand() *cobra.Command {
	var (
		rf    rulesFlags
		run   string
		junit string
	)
	cmd := &cobra.Command{
		Use:   "test [TESTFILE...]",
		Short: "Run rule unit tests (promtool's test-file format) in process",
		Long: `Evaluate rule unit tests written in promtool's test-file format against the
rules of a KubeVirt version, with the Prometheus libraries built into virtop
(no promtool needed, same results everywhere).

Without arguments the version's built-in tests run. A test file's rule_files
entry "` + rules.BuiltinTestRuleFile + `" reads the rendered rules (namespace
` + rules.BuiltinTestNamespace + `, runbook URLs from ` + rules.BuiltinTestRunbookURLTemplate + `);
other entries are files relative to the test file (a rule file, or a
PrometheusRule as "virtop rules" prints it).

With --tuning the rules are tuned first (alerts disabled or changed, the
additional groups added); the built-in tests of a disabled or retuned alert
may then fail, as they should. --namespace renders the rules for another
install namespace (the built-in tests are written for ` + rules.BuiltinTestNamespace + `).

--run selects test groups by name (a regular expression, as promtool's
--run); --junit writes a JUnit XML report (one testcase per test group) for
a CI system.

Prints one line per failed test and a summary "N passed, N failed"; exits 1
when a test fails.`,
		Example: `  virtop rules test
  virtop rules test --version v1.5.0 --run 'virt-api'
  virtop rules test my-tests.yaml
  virtop rules test --namespace ci --junit report.xml my-tests.yaml
  virtop rules test --tuning kubevirtmonitoring.yaml my-tests.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var runRE *regexp.Regexp
			if run != "" {
				var err error
				if runRE, err = regexp.Compile(run); err != nil {
					return fmt.Errorf("--run: %w", err)
				}
			}
			r, err := rf.release()
			if err != nil {
				return err
			}
			opts := ruletest.BuiltinOptions(r.RuleSet)
			if rf.namespace != "" {
				opts.Namespace = rf.namespace
			}
			if rf.tuningFile != "" {
				if opts, err = tunedRuleTestOptions(r, opts, rf.tuningFile); err != nil {
					return err
				}
			}
			var results []ruletest.Result
			if len(args) == 0 {
				results, err = ruletest.RunBuiltin(opts, runRE)
			} else {
				results, err = ruletest.RunFiles(opts, args, runRE)
			}
			if err != nil {
				return err
			}
			if junit != "" {
				if err := writeJUnit(junit, results); err != nil {
					return err
				}
			}
			return reportRuleTests(cmd, results)
		},
	}
	rf.bind(cmd, "install namespace to render the rules for (default "+rules.BuiltinTestNamespace+")")
	cmd.Flags().StringVar(&run, "run", "", "run only the test groups whose name matches this regular expression")
	cmd.Flags().StringVar(&junit, "junit", "", "write a JUnit XML report of the results to this file")
	return cmd
}

// writeJUnit writes the JUnit report to path.
func writeJUnit(path string, results []ruletest.Result) error {
	var buf bytes.Buffer
	if err := ruletest.JUnit(&buf, results); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}

func reportRuleTests(cmd *cobra.Command, results []ruletest.Result) error {
	out := cmd.OutOrStdout()
	passed, failed := 0, 0
	for _, r := range results {
		for _, t := range r.Tests {
			if t.Passed() {
				passed++
				continue
			}
			failed++
			fmt.Fprintf(out, "FAIL %s: %s\n", r.File, t.Name)
			for _, e := range t.Errors {
				fmt.Fprintf(out, "    %s\n", strings.ReplaceAll(e.Error(), "\n", "\n    "))
			}
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return &ExitError{Code: 1}
	}
	return nil
}
