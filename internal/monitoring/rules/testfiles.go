package rules

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
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

// BuiltinTests returns a rule set's built-in test files, sorted by name:
// those of testdata/<set>/, and, for a set that is a delta of another
// (Base), the base's files that the set's directory does not replace by a
// file of the same name or drops with a file <name>.removed (whose text
// says why). A release's tests thus read, like its rules, as what changed;
// every inherited file runs against the release's own rules.
func BuiltinTests(set string) ([]BuiltinTestFile, error) {
	if _, err := Lookup(set); err != nil {
		return nil, err
	}
	byName := map[string]BuiltinTestFile{}
	removed := map[string]bool{}
	for s := set; s != ""; s = Base(s) {
		dir := path.Join("testdata", s)
		entries, err := fs.ReadDir(testdata, dir)
		if err != nil {
			if s == set && Base(s) == "" {
				return nil, fmt.Errorf("rules: no built-in tests for %s: %w", set, err)
			}
			continue
		}
		for _, e := range entries {
			if name, ok := strings.CutSuffix(e.Name(), ".removed"); ok && !e.IsDir() {
				if _, seen := byName[name]; !seen {
					removed[name] = true
				}
				continue
			}
			if e.IsDir() || path.Ext(e.Name()) != ".yaml" {
				continue
			}
			if _, replaced := byName[e.Name()]; replaced || removed[e.Name()] {
				continue
			}
			b, err := fs.ReadFile(testdata, path.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			byName[e.Name()] = BuiltinTestFile{Name: path.Join(dir, e.Name()), Content: b}
		}
	}
	if len(byName) == 0 {
		return nil, fmt.Errorf("rules: no built-in tests for %s", set)
	}
	out := make([]BuiltinTestFile, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return path.Base(out[i].Name) < path.Base(out[j].Name) })
	return out, nil
}
