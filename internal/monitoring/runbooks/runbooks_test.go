package runbooks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
)

// shippedAlerts returns every alert virtop ships, in any rule set: the
// union of the alert names of rules.Lookup(n) over rules.Names(), sorted.
// The runbooks follow the rules package by construction, so a new alert
// without a runbook fails these tests.
func shippedAlerts(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, set := range rules.Names() {
		rs, err := rules.Lookup(set)
		if err != nil {
			t.Fatalf("rule set %s: %v", set, err)
		}
		for _, a := range rs.AlertNames() {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}

// repoRoot is the repository root seen from this package's directory.
const repoRoot = "../../.."

func runbookDir() string { return filepath.Join(repoRoot, Dir) }

func readRunbook(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runbookDir(), name+".md"))
	if err != nil {
		t.Fatalf("alert %s has no runbook: %v", name, err)
	}
	return string(b)
}

// TestShippedAlerts guards the list the other tests iterate: the rules
// package must yield alerts, including virtop's own KubeVirtControlPlaneDown,
// and no rule set may define an alert twice.
func TestShippedAlerts(t *testing.T) {
	names := shippedAlerts(t)
	if len(names) == 0 {
		t.Fatal("the rules package defines no alerts")
	}
	if !slices.Contains(names, "KubeVirtControlPlaneDown") {
		t.Error("no rule set has KubeVirtControlPlaneDown")
	}
	for _, set := range rules.Names() {
		rs, err := rules.Lookup(set)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range rs.AlertNames() {
			if seen[a] {
				t.Errorf("rule set %s defines alert %s twice", set, a)
			}
			seen[a] = true
		}
	}
}

func TestEveryAlertHasAWellFormedRunbook(t *testing.T) {
	for _, name := range shippedAlerts(t) {
		t.Run(name, func(t *testing.T) {
			for _, p := range checkRunbook(name, readRunbook(t, name)) {
				t.Error(p)
			}
		})
	}
}

// TestNoRunbookWithoutAlert keeps runbooks and alerts in lock-step the other
// way round: a runbook for an alert virtop does not ship misleads whoever
// finds it (kubevirt/monitoring#163).
func TestNoRunbookWithoutAlert(t *testing.T) {
	alertNames := shippedAlerts(t)
	entries, err := os.ReadDir(runbookDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || n == "README.md" {
			continue
		}
		if !strings.HasSuffix(n, ".md") {
			t.Errorf("unexpected file %s in %s", n, Dir)
			continue
		}
		if !slices.Contains(alertNames, strings.TrimSuffix(n, ".md")) {
			t.Errorf("runbook %s is for no alert virtop ships", n)
		}
	}
}

// TestRunbookURLResolves checks that the default runbook_url of every alert
// names a file of this repository that exists.
func TestRunbookURLResolves(t *testing.T) {
	const prefix = "https://github.com/virtop-dev/virtop/blob/main/"
	if err := rules.CheckRunbookURLTemplate(config.DefaultRunbookURLTemplate); err != nil {
		t.Fatal(err)
	}
	for _, name := range shippedAlerts(t) {
		u := rules.RunbookURL(config.DefaultRunbookURLTemplate, name)
		rel, ok := strings.CutPrefix(u, prefix)
		if !ok {
			t.Errorf("runbook URL %s of %s is not in this repository (%s...)", u, name, prefix)
			continue
		}
		if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err != nil {
			t.Errorf("runbook URL %s of %s does not resolve to a file: %v", u, name, err)
		}
	}
}

// TestRuleSetAlertsHaveRunbooks checks every alert of every rule set for a
// runbook file, naming the set in the failure.
func TestRuleSetAlertsHaveRunbooks(t *testing.T) {
	for _, set := range rules.Names() {
		rs, err := rules.Lookup(set)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range rs.AlertNames() {
			if _, err := os.Stat(filepath.Join(runbookDir(), a+".md")); err != nil {
				t.Errorf("rule set %s has alert %s, which has no runbook (add %s/%s.md and a README row)", set, a, Dir, a)
			}
		}
	}
}

var readmeRow = regexp.MustCompile(`^\|\s*\[([A-Za-z]+)\]\(([A-Za-z]+)\.md\)\s*\|\s*([a-z]+)\s*\|`)

// TestReadmeIndexesEveryAlert checks the index: one row per alert, linking
// its runbook, with a valid severity; no row for anything else.
func TestReadmeIndexesEveryAlert(t *testing.T) {
	alertNames := shippedAlerts(t)
	b, err := os.ReadFile(filepath.Join(runbookDir(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		m := readmeRow.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if m[1] != m[2] {
			t.Errorf("README row for %s links %s.md", m[1], m[2])
		}
		if !slices.Contains(alertNames, m[1]) {
			t.Errorf("README lists %s, which virtop does not ship", m[1])
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("README lists %s twice", m[1])
		}
		rows[m[1]] = m[3]
	}
	for _, n := range alertNames {
		sev, ok := rows[n]
		if !ok {
			t.Errorf("README has no row for %s", n)
			continue
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, sev) {
			t.Errorf("README row for %s has severity %q", n, sev)
		}
	}
}

// TestCheckCatchesBadRunbooks makes sure the checks themselves bite.
func TestCheckCatchesBadRunbooks(t *testing.T) {
	good := strings.Join([]string{
		"# SomeAlert",
		"",
		"## Meaning",
		"",
		"It fires. It does not mean much.",
		"",
		"## Impact",
		"",
		"None.",
		"",
		"## Diagnosis",
		"",
		"```bash",
		"$ virtop doctor --context <ctx>",
		"$ kubectl --context <ctx> -n kubevirt get deployments.apps virt-api",
		"$ kubectl --context <ctx> get kubevirts.kubevirt.io -A -o yaml | grep phase",
		"$ kubectl --context <ctx> -n kubevirt get pods -l kubevirt.io=virt-api \\",
		"    -o wide",
		"```",
		"",
		"## Mitigation",
		"",
		"Wait.",
		"",
	}, "\n")
	if p := checkRunbook("SomeAlert", good); len(p) != 0 {
		t.Fatalf("good sample flagged: %v", p)
	}

	cases := []struct {
		name string
		edit func(string) string
		want string
	}{
		{"wrong H1", func(s string) string { return strings.Replace(s, "# SomeAlert", "# OtherAlert", 1) }, "H1"},
		{"missing section", func(s string) string { return strings.Replace(s, "## Impact", "Impact:", 1) }, "sections"},
		{"sections out of order", func(s string) string {
			s = strings.Replace(s, "## Impact", "## X", 1)
			s = strings.Replace(s, "## Meaning", "## Impact", 1)
			return strings.Replace(s, "## X", "## Meaning", 1)
		}, "sections"},
		{"extra section", func(s string) string { return s + "\n## Additional notes\n\nMore.\n" }, "sections"},
		{"no doctor", func(s string) string { return strings.ReplaceAll(s, "virtop doctor", "virtop check") }, "virtop doctor"},
		{"no does-not-mean", func(s string) string { return strings.Replace(s, "does not mean", "means", 1) }, "does not mean"},
		{"kubectl without context", func(s string) string {
			return strings.Replace(s, "$ kubectl --context <ctx> -n kubevirt get deployments.apps", "$ kubectl -n kubevirt get deployments.apps", 1)
		}, "--context"},
		{"kubectl after a pipe without context", func(s string) string {
			return strings.Replace(s, "| grep phase", "| xargs kubectl get pods", 1)
		}, "--context"},
		{"short KubeVirt name", func(s string) string { return strings.Replace(s, "kubevirts.kubevirt.io", "kv", 1) }, `"kv"`},
		{"unqualified apps kind", func(s string) string { return strings.Replace(s, "deployments.apps", "deployment", 1) }, `"deployment"`},
		{"short name in type/name form", func(s string) string {
			return strings.Replace(s, "$ kubectl --context <ctx> -n kubevirt get deployments.apps virt-api",
				"$ kubectl --context <ctx> -n kubevirt describe vmi/testvm", 1)
		}, `"vmi"`},
		{"no dollar prompt", func(s string) string { return strings.Replace(s, "$ virtop doctor", "virtop doctor", 1) }, "$ "},
		{"fence without language", func(s string) string { return strings.Replace(s, "```bash", "```", 1) }, "language"},
		{"long prose line", func(s string) string {
			return strings.Replace(s, "Wait.", strings.Repeat("word ", 17), 1)
		}, "columns"},
		{"inline kubectl without context", func(s string) string {
			return strings.Replace(s, "Wait.", "Run `kubectl get pods`.", 1)
		}, "--context"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := checkRunbook("SomeAlert", c.edit(good))
			for _, s := range p {
				if strings.Contains(s, c.want) {
					return
				}
			}
			t.Errorf("want a problem mentioning %q, got %q", c.want, p)
		})
	}

	// Lines with URLs, table rows and code are exempt from the width limit.
	long := strings.Repeat("x", 90)
	exempt := strings.Replace(good, "Wait.",
		"See https://example.com/"+long+"\n\n| a | "+long+" |\n|---|---|\n\n```text\n"+long+"\n```", 1)
	if p := checkRunbook("SomeAlert", exempt); len(p) != 0 {
		t.Errorf("exempt long lines flagged: %v", p)
	}
}

// coreResources are resources of the core API group, whose plain plural
// name is already fully qualified. Everything else must carry its group
// (deployments.apps, kubevirts.kubevirt.io, servicemonitors.monitoring.coreos.com),
// so that a short name can never resolve to the wrong kind.
var coreResources = map[string]bool{
	"pods": true, "nodes": true, "services": true, "events": true,
	"endpoints": true, "namespaces": true, "serviceaccounts": true,
	"configmaps": true, "secrets": true, "persistentvolumeclaims": true,
	"persistentvolumes": true, "resourcequotas": true, "limitranges": true,
	"replicationcontrollers": true,
}

// resourceVerbs are the kubectl verbs whose first argument names resources.
var resourceVerbs = map[string]bool{
	"get": true, "describe": true, "edit": true, "patch": true, "delete": true,
	"scale": true, "label": true, "annotate": true,
}

// valueFlags are kubectl flags that take the next token as their value
// when written without "=".
var valueFlags = map[string]bool{
	"-n": true, "--namespace": true, "-l": true, "--selector": true,
	"-o": true, "--output": true, "--context": true, "--kubeconfig": true,
	"--field-selector": true, "--sort-by": true, "-L": true, "--label-columns": true,
	"-c": true, "--container": true, "--since": true, "--tail": true,
	"--as": true, "--type": true, "--patch": true, "--replicas": true,
	"--for": true, "--timeout": true, "--raw": true, "-p": true,
}

var allowedFences = []string{"bash", "promql", "text", "yaml"}

// checkRunbook returns the problems of one runbook, each a sentence.
func checkRunbook(name, text string) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}

	lines := strings.Split(text, "\n")
	var (
		inFence   bool
		fenceLang string
		h1s       []string
		h2s       []string
		section   string
		prose     []string
		// firstDiagCmd is the first shell command of the Diagnosis section.
		firstDiagCmd string
		pending      string // a shell command continued with a trailing backslash
	)
	for i, l := range lines {
		ln := i + 1
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if !inFence {
				fenceLang = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))
				if !slices.Contains(allowedFences, fenceLang) {
					add("line %d: code block without a known language (%q; want one of %v)", ln, fenceLang, allowedFences)
				}
			} else if pending != "" {
				add("line %d: shell command ends with a continuation backslash", ln)
				pending = ""
			}
			inFence = !inFence
			continue
		}
		if inFence {
			if fenceLang != "bash" {
				continue
			}
			if pending == "" && !strings.HasPrefix(l, "$ ") {
				add("line %d: shell line does not start with \"$ \": %q", ln, l)
				continue
			}
			cmd := pending + strings.TrimPrefix(l, "$ ")
			if strings.HasSuffix(cmd, `\`) {
				pending = strings.TrimSuffix(cmd, `\`) + " "
				continue
			}
			pending = ""
			if section == "Diagnosis" && firstDiagCmd == "" {
				firstDiagCmd = cmd
			}
			for _, p := range checkCommand(cmd) {
				add("line %d: %s", ln, p)
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "# "):
			h1s = append(h1s, strings.TrimPrefix(l, "# "))
		case strings.HasPrefix(l, "## "):
			section = strings.TrimSpace(strings.TrimPrefix(l, "## "))
			h2s = append(h2s, section)
		}
		prose = append(prose, l)
		if utf8.RuneCountInString(l) > 80 && !strings.HasPrefix(strings.TrimSpace(l), "|") &&
			!strings.Contains(l, "http://") && !strings.Contains(l, "https://") {
			add("line %d: prose line has %d columns, more than 80", ln, utf8.RuneCountInString(l))
		}
	}
	if inFence {
		add("code block not closed")
	}

	first := ""
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = l
			break
		}
	}
	if first != "# "+name || len(h1s) != 1 {
		add("H1 must be the first line and the only H1, and equal %q (have %q)", "# "+name, h1s)
	}
	if !slices.Equal(h2s, Sections) {
		add("H2 sections are %q, want exactly %q in that order", h2s, Sections)
	}
	if !strings.Contains(text, "virtop doctor") {
		add("does not mention virtop doctor")
	}
	if !strings.HasPrefix(firstDiagCmd, "virtop doctor ") || !strings.Contains(firstDiagCmd, "--context") {
		add("Diagnosis must start with `virtop doctor --context <ctx>`, starts with %q", firstDiagCmd)
	}
	if !strings.Contains(strings.ToLower(strings.Join(prose, " ")), "does not mean") {
		add("does not say what the alert does not mean (no \"does not mean\")")
	}

	// Inline code spans in prose that hold kubectl commands obey the same
	// rules as commands in code blocks. A span may cross a line break.
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		span := strings.Join(strings.Fields(m[1]), " ")
		if strings.HasPrefix(span, "kubectl ") {
			for _, p := range checkCommand(span) {
				add("inline `%s`: %s", span, p)
			}
		}
	}
	return problems
}

// checkCommand checks one shell command line (continuations joined): every
// kubectl invocation in it names its context, and resource arguments are
// fully qualified.
func checkCommand(cmd string) []string {
	var problems []string
	for _, seg := range splitPipeline(cmd) {
		toks := tokenize(seg)
		k := slices.Index(toks, "kubectl")
		if k < 0 {
			continue
		}
		args := toks[k+1:]
		hasContext := false
		for _, a := range args {
			if a == "--context" || strings.HasPrefix(a, "--context=") {
				hasContext = true
			}
		}
		if !hasContext {
			problems = append(problems, fmt.Sprintf("kubectl without --context: %q", strings.TrimSpace(seg)))
		}
		pos, raw := positional(args)
		if raw || len(pos) < 2 || !resourceVerbs[pos[0]] {
			continue
		}
		for _, r := range resourceTypes(pos[1:]) {
			if !strings.Contains(r, ".") && !coreResources[r] {
				problems = append(problems, fmt.Sprintf("kubectl %s uses resource %q; use its fully qualified name (resource.group)", pos[0], r))
			}
		}
	}
	return problems
}

// positional returns the arguments that are not flags or flag values, and
// whether --raw was given.
func positional(args []string) (pos []string, raw bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--raw" || strings.HasPrefix(a, "--raw=") {
			raw = true
		}
		if strings.HasPrefix(a, "-") {
			if valueFlags[a] {
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return pos, raw
}

// resourceTypes returns the resource types named by the arguments after a
// verb: "a,b name" names a and b; "a/x b/y" names a and b.
func resourceTypes(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	var out []string
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			if typ, _, ok := strings.Cut(a, "/"); ok {
				out = append(out, typ)
			}
		}
		return out
	}
	return strings.Split(args[0], ",")
}

// splitPipeline splits a command line at |, ||, && and ; outside quotes.
func splitPipeline(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '|' || r == ';' || r == '&':
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(out, cur.String())
}

// tokenize splits a command into words, keeping quoted strings whole (with
// their quotes removed).
func tokenize(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote = r
			inWord = true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}
