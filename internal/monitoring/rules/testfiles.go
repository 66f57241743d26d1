package rules

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

// The built-in rule tests: promtool test files per rule set under
// testdata/<rule set>/, evaluated by package ruletest (virtop rules test,
// and the package tests).
//
//go:embed testdata
var testdata embed.FS

// Built-in tests read the rendered rules under this rule_files name, for
// this install namespace and runbook URL template.
const (
	BuiltinTestRuleFile           = "prometheus-kubevirt-rules.yaml"
	BuiltinTestNamespace          = "kubevirt"
	BuiltinTestRunbookURLTemplate = "https://github.com/virtop-dev/virtop/blob/main/docs/runbooks/%s.md"
)

// BuiltinTestFile is one built-in test file.
type BuiltinTestFile struct {
	Name    string
	Content []byte
}

// BuiltinTests returns a rule set's built-in test files, sorted by name.
func BuiltinTests(set string) ([]BuiltinTestFile, error) {
	if _, err := Lookup(set); err != nil {
		return nil, err
	}
	dir := path.Join("testdata", set)
	entries, err := fs.ReadDir(testdata, dir)
	if err != nil {
		return nil, fmt.Errorf("rules: no built-in tests for %s: %w", set, err)
	}
	var out []BuiltinTestFile
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
			continue
		}
		b, err := fs.ReadFile(testdata, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, BuiltinTestFile{Name: path.Join(dir, e.Name()), Content: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
