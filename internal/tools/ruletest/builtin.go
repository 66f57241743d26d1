package ruletest

import (
	"fmt"
	"regexp"

	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

// RenderedRuleFile renders a rule set as a rule file (the PrometheusRule's
// spec) for tests.
func RenderedRuleFile(opts rules.Options) ([]byte, error) {
	spec, err := rules.Render(opts)
	if err != nil {
		return nil, err
	}
	return rules.RuleFile(spec)
}

// BuiltinOptions are the render options the built-in tests are written
// for.
func BuiltinOptions(set string) rules.Options {
	return rules.Options{RuleSet: set, Namespace: rules.BuiltinTestNamespace, RunbookURLTemplate: rules.BuiltinTestRunbookURLTemplate}
}

// RunFiles runs test files against rules rendered with opts; the files'
// rule_files entry rules.BuiltinTestRuleFile reads them. Files are paths on
// disk. run, when set, selects test groups by name.
func RunFiles(opts rules.Options, files []string, run *regexp.Regexp) ([]Result, error) {
	rf, err := RenderedRuleFile(opts)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, f := range files {
		r, err := RunFile(f, Options{RuleFiles: map[string][]byte{rules.BuiltinTestRuleFile: rf}, Run: run})
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunBuiltin runs a rule set's built-in tests against the rules rendered
// with opts (BuiltinOptions for the rule set as shipped); run, when set,
// selects test groups by name.
func RunBuiltin(opts rules.Options, run *regexp.Regexp) ([]Result, error) {
	files, err := rules.BuiltinTests(opts.RuleSet)
	if err != nil {
		return nil, err
	}
	rf, err := RenderedRuleFile(opts)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, f := range files {
		r, err := Run(f.Name, f.Content, "", Options{RuleFiles: map[string][]byte{rules.BuiltinTestRuleFile: rf}, Run: run})
		if err != nil {
			return out, fmt.Errorf("built-in test %s: %w", f.Name, err)
		}
		out = append(out, r)
	}
	return out, nil
}
