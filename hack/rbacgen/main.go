// Command rbacgen writes the operator's RBAC: its own rules (rules.go) plus
// every permission the roles of the install strategies grant, which the
// operator must hold to create those roles (Kubernetes' escalation check;
// virtop holds them rather than the escalate and bind verbs, as upstream's
// operator does). The strategies of every catalog version are rendered.
//
// Outputs, committed and checked by `make verify`:
//
//	config/rbac/cluster_role.yaml         ClusterRole kubevirt-operator
//	config/rbac/role.yaml                 Role kubevirt-operator (install namespace)
//	config/rbac/strategy_job_role.yaml    Role virtop-strategy-job (the dump-install-strategy Job's account)
//	charts/virtop/files/cluster-role-rules.yaml, role-rules.yaml, strategy-job-role-rules.yaml  the same rules for the chart
//	docs/security-rbac.md                 every rule with its reason
//
// Usage: go run ./hack/rbacgen [-root DIR] [-check]
package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func main() {
	root := flag.String("root", ".", "repository root")
	check := flag.Bool("check", false, "fail if the committed files differ from what would be generated")
	flag.Parse()
	files, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rbacgen:", err)
		os.Exit(2)
	}
	stale := 0
	for _, f := range files {
		p := filepath.Join(*root, f.path)
		if *check {
			old, err := os.ReadFile(p)
			if err != nil || !bytes.Equal(old, f.data) {
				fmt.Fprintf(os.Stderr, "rbacgen: %s is out of date: run `make rbac` and commit\n", f.path)
				stale++
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "rbacgen:", err)
			os.Exit(2)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "rbacgen:", err)
			os.Exit(2)
		}
	}
	if stale > 0 {
		os.Exit(1)
	}
}

type file struct {
	path string
	data []byte
}

// commented is a rule with the reason printed above it.
type commented struct {
	why  string
	rule rbacv1.PolicyRule
}

func generate() ([]file, error) {
	var clusterGranted, nsGranted []commented
	crdList := map[string][]string{} // group -> plurals
	var sccNames, secretNames []string
	for _, v := range release.Builtin().Versions() {
		objs, err := render(v)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			c, n := ownership.GrantedRules([]client.Object{o})
			src := fmt.Sprintf("%s %s", strategy.Kind(o), o.GetName())
			for _, r := range c {
				clusterGranted = append(clusterGranted, commented{src, r})
			}
			for _, r := range n {
				nsGranted = append(nsGranted, commented{src, r})
			}
			if strategy.Kind(o) == "SecurityContextConstraints" && !slices.Contains(sccNames, o.GetName()) {
				sccNames = append(sccNames, o.GetName())
			}
			if strategy.Kind(o) == "Secret" && !slices.Contains(secretNames, o.GetName()) {
				secretNames = append(secretNames, o.GetName())
			}
			if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
				crdList[crd.Spec.Group] = append(crdList[crd.Spec.Group], crd.Spec.Names.Plural)
			}
		}
	}
	slices.Sort(sccNames)
	kinds, err := ownership.Get()
	if err != nil {
		return nil, err
	}
	var placedConfigMaps, placedMonitoring []string
	for _, e := range kinds.Elsewhere {
		var into *[]string
		switch {
		case e.GVK.Group == "" && e.GVK.Kind == "ConfigMap":
			into = &placedConfigMaps
		case e.GVK.Group == "monitoring.coreos.com" && (e.GVK.Kind == "ServiceMonitor" || e.GVK.Kind == "PrometheusRule"):
			into = &placedMonitoring
		default:
			continue
		}
		if len(e.Namespaces) > 0 || len(e.PlacedNames) == 0 {
			return nil, fmt.Errorf("%s rendered in fixed namespaces %v besides the install namespace: the ClusterRole names only the placed ones", e.GVK.Kind, e.Namespaces)
		}
		for _, n := range e.PlacedNames {
			if !slices.Contains(*into, n) {
				*into = append(*into, n)
			}
		}
	}
	slices.Sort(placedMonitoring)
	names, err := renderedNames()
	if err != nil {
		return nil, err
	}
	named := clusterNamedRules(names)
	for _, r := range named {
		if len(r.rule.ResourceNames) == 0 && slices.ContainsFunc(r.rule.Verbs, func(v string) bool { return v != "list" && v != "watch" }) {
			// An empty resourceNames grants every name.
			return nil, fmt.Errorf("no catalog release renders a %v: drop its rule rather than grant every name", r.rule.Resources)
		}
	}
	ownCluster := toCommented(slices.Concat(ownClusterRules, named, sccRules(sccNames), monitoringRules(placedMonitoring), configMapRules(placedConfigMaps)))
	groups := slices.Sorted(maps.Keys(crdList))
	for _, g := range groups {
		ownCluster = append(ownCluster, commented{
			"Uninstall: whether KubeVirt's CRDs of " + g + " still hold objects (a CRD with user objects is kept; protected workloads block uninstall).",
			rule(g, dedupe(crdList[g]), "list"),
		})
	}
	slices.Sort(secretNames)
	ownNS := toCommented(append(slices.Clone(ownNamespacedRules), secretRules(secretNames)...))

	// What the generated rules must add on top of the operator's own.
	cluster := compact(clusterGranted, ownCluster, nil)
	namespaced := compact(nsGranted, append(slices.Clone(ownCluster), ownNS...), cluster)

	clusterAll := append(ownCluster, cluster...)
	nsAll := append(ownNS, namespaced...)

	header := "# Code generated by hack/rbacgen (`make rbac`); DO NOT EDIT.\n" +
		"# The operator's own rules come first, then what it must hold to create the\n" +
		"# roles of the install strategies of every catalog version (" + strings.Join(release.Builtin().Versions(), ", ") + ").\n"
	clusterRules := rulesYAML(clusterAll, "")
	nsRules := rulesYAML(nsAll, "")
	jobAll := toCommented(strategyJobRules)
	jobRules := rulesYAML(jobAll, "")
	jobHeader := "# Code generated by hack/rbacgen (`make rbac`); DO NOT EDIT.\n" +
		"# What the dump-install-strategy Job's ServiceAccount may do: create the strategy\n" +
		"# ConfigMap in the install namespace (hack/rbacgen/rules.go, strategyJobRules).\n"
	return []file{
		{"config/rbac/cluster_role.yaml", []byte(header +
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: " + vocab.OperatorRBACName + "\n  labels:\n    kubevirt.io: \"\"\nrules:\n" + clusterRules)},
		{"config/rbac/role.yaml", []byte(header +
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: " + vocab.OperatorRBACName + "\n  labels:\n    kubevirt.io: \"\"\nrules:\n" + nsRules)},
		{"config/rbac/strategy_job_role.yaml", []byte(jobHeader +
			"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: " + vocab.StrategyJobServiceAccount + "\n  labels:\n    kubevirt.io: \"\"\nrules:\n" + jobRules)},
		{"charts/virtop/files/cluster-role-rules.yaml", []byte(header + clusterRules)},
		{"charts/virtop/files/role-rules.yaml", []byte(header + nsRules)},
		{"charts/virtop/files/strategy-job-role-rules.yaml", []byte(jobHeader + jobRules)},
		{"docs/security-rbac.md", []byte(rbacMarkdown(clusterAll, nsAll, jobAll))},
	}, nil
}

// rbacMarkdown is the operator's RBAC as tables for docs/security.md: each
// rule with its reason, cluster-wide then in the install namespace.
func rbacMarkdown(cluster, namespaced, job []commented) string {
	var b strings.Builder
	b.WriteString("<!-- Code generated by hack/rbacgen (`make rbac`); DO NOT EDIT. -->\n")
	b.WriteString("# The operator's RBAC, rule by rule\n\n")
	b.WriteString("What ClusterRole and Role `" + vocab.OperatorRBACName + "` (config/rbac, the chart) grant virt-operator's\n")
	b.WriteString("ServiceAccount, and why. The operator's own rules come first; the rules after\n")
	b.WriteString("them are what Kubernetes requires it to hold to create the roles of the install\n")
	b.WriteString("strategies of every catalog version (" + strings.Join(release.Builtin().Versions(), ", ") + "): a role can only be\n")
	b.WriteString("created by someone who holds every permission it grants (virtop has no\n")
	b.WriteString("`escalate` or `bind` verb). The trust model is in docs/security.md.\n")
	table := func(title string, rules []commented) {
		b.WriteString("\n## " + title + "\n\n| API group | resources | names | verbs | why |\n| --- | --- | --- | --- | --- |\n")
		for _, r := range rules {
			cell := func(ss []string) string {
				if len(ss) == 0 {
					return ""
				}
				return "`" + strings.Join(ss, "`, `") + "`"
			}
			groups := slices.Clone(r.rule.APIGroups)
			for i, g := range groups {
				if g == "" {
					groups[i] = "core"
				}
			}
			res := r.rule.Resources
			if len(r.rule.NonResourceURLs) > 0 {
				res = r.rule.NonResourceURLs
			}
			why := strings.ReplaceAll(r.why, "|", "\\|")
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(groups), cell(res), cell(r.rule.ResourceNames), cell(r.rule.Verbs), why)
		}
	}
	table("Cluster-wide (ClusterRole)", cluster)
	table("In the install namespace (Role)", namespaced)
	table("The strategy Job's ServiceAccount (Role "+vocab.StrategyJobServiceAccount+", install namespace)", job)
	b.WriteString("\nThe dump-install-strategy Job (versions outside the catalog) runs as ServiceAccount\n")
	b.WriteString("`" + vocab.StrategyJobServiceAccount + "`, not as the operator. Its Role and RoleBinding of the same name\n")
	b.WriteString("ship with the operator's (config/rbac, the chart); the operator creates no RBAC\n")
	b.WriteString("of its own at run time.\n")
	return b.String()
}

// render is the strategy of a catalog version with the feature gates that
// add objects on (as internal/ownership renders it), so that every role,
// SCC and Secret the version can render is seen.
func render(version string) ([]client.Object, error) {
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: config.DefaultNamespace}}
	kv.Spec.ImageTag = version
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{vocab.VMExportFeatureGate}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: config.DefaultNamespace})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", version, err)
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", version, err)
	}
	return st.Objects, nil
}

func toCommented(in []ownRule) []commented {
	out := make([]commented, len(in))
	for i, r := range in {
		out[i] = commented{r.why, r.rule}
	}
	return out
}

// atom is one permission: a verb on one resource (and name) of one group,
// or a verb on one non-resource URL.
type atom struct {
	group, resource, name, url, verb string
}

func atoms(r rbacv1.PolicyRule) []atom {
	var out []atom
	for _, v := range r.Verbs {
		for _, u := range r.NonResourceURLs {
			out = append(out, atom{url: u, verb: v})
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if len(r.ResourceNames) == 0 {
					out = append(out, atom{group: g, resource: res, verb: v})
				}
				for _, n := range r.ResourceNames {
					out = append(out, atom{group: g, resource: res, name: n, verb: v})
				}
			}
		}
	}
	return out
}

func has(list []string, s string) bool { return slices.Contains(list, s) || slices.Contains(list, "*") }

// covers reports whether a rule grants an atom (wildcards included, as the
// RBAC authorizer and its escalation check read them).
func covers(r rbacv1.PolicyRule, a atom) bool {
	if !has(r.Verbs, a.verb) {
		return false
	}
	if a.url != "" {
		for _, u := range r.NonResourceURLs {
			if u == a.url || u == "*" || strings.HasSuffix(u, "*") && strings.HasPrefix(a.url, strings.TrimSuffix(u, "*")) {
				return true
			}
		}
		return false
	}
	if !has(r.APIGroups, a.group) || !has(r.Resources, a.resource) {
		return false
	}
	return len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, a.name)
}

func isWild(a atom) bool { return a.group == "*" || a.resource == "*" || a.verb == "*" || a.url == "*" }

// compact returns the granted permissions not already held through held or
// also, merged into few rules, each commented with the roles that need it.
func compact(granted, held, also []commented) []commented {
	sources := map[atom][]string{}
	var order []atom
	for _, g := range granted {
		for _, a := range atoms(g.rule) {
			if _, ok := sources[a]; !ok {
				order = append(order, a)
			}
			if !slices.Contains(sources[a], g.why) {
				sources[a] = append(sources[a], g.why)
			}
		}
	}
	var wild []rbacv1.PolicyRule
	for _, a := range order {
		if isWild(a) {
			wild = append(wild, atomRule(a))
		}
	}
	coveredBy := func(a atom, rules []commented) bool {
		for _, r := range rules {
			if covers(r.rule, a) {
				return true
			}
		}
		return false
	}
	// Merge: same group, name, URL and verb set -> one rule of resources.
	type resKey struct{ group, resource, name, url string }
	verbs := map[resKey][]string{}
	srcs := map[resKey][]string{}
	var keys []resKey
	for _, a := range order {
		if coveredBy(a, held) || coveredBy(a, also) {
			continue
		}
		if !isWild(a) {
			skip := false
			for _, w := range wild {
				if covers(w, a) {
					skip = true
				}
			}
			if skip {
				continue
			}
		}
		k := resKey{a.group, a.resource, a.name, a.url}
		if _, ok := verbs[k]; !ok {
			keys = append(keys, k)
		}
		if !slices.Contains(verbs[k], a.verb) {
			verbs[k] = append(verbs[k], a.verb)
		}
		for _, s := range sources[a] {
			if !slices.Contains(srcs[k], s) {
				srcs[k] = append(srcs[k], s)
			}
		}
	}
	type ruleKey struct{ group, name, url, verbs string }
	merged := map[ruleKey]*commented{}
	mergedSrc := map[ruleKey][]string{}
	var rkeys []ruleKey
	for _, k := range keys {
		vs := slices.Clone(verbs[k])
		slices.Sort(vs)
		rk := ruleKey{k.group, k.name, k.url, strings.Join(vs, ",")}
		if k.url != "" {
			rk.url = "url" // group non-resource URLs with the same verbs
		}
		c, ok := merged[rk]
		if !ok {
			c = &commented{}
			if k.url != "" {
				c.rule.Verbs = vs
			} else {
				c.rule = rbacv1.PolicyRule{APIGroups: []string{k.group}, Verbs: vs}
				if k.name != "" {
					c.rule.ResourceNames = []string{k.name}
				}
			}
			merged[rk] = c
			rkeys = append(rkeys, rk)
		}
		if k.url != "" {
			c.rule.NonResourceURLs = append(c.rule.NonResourceURLs, k.url)
		} else {
			c.rule.Resources = append(c.rule.Resources, k.resource)
		}
		for _, s := range srcs[k] {
			if !slices.Contains(mergedSrc[rk], s) {
				mergedSrc[rk] = append(mergedSrc[rk], s)
			}
		}
	}
	slices.SortStableFunc(rkeys, func(a, b ruleKey) int {
		return strings.Compare(a.url+"|"+a.group+"|"+a.name+"|"+a.verbs, b.url+"|"+b.group+"|"+b.name+"|"+b.verbs)
	})
	var out []commented
	for _, rk := range rkeys {
		c := merged[rk]
		slices.Sort(c.rule.Resources)
		slices.Sort(c.rule.NonResourceURLs)
		s := slices.Clone(mergedSrc[rk])
		slices.Sort(s)
		why := "Granted by " + strings.Join(s, ", ") + "."
		if slices.Contains(c.rule.Verbs, "*") || slices.Contains(c.rule.Resources, "*") {
			why += " A wildcard, because that role holds one: the escalation check accepts only a rule at least as wide."
		}
		c.why = why
		out = append(out, *c)
	}
	return out
}

func atomRule(a atom) rbacv1.PolicyRule {
	if a.url != "" {
		return rbacv1.PolicyRule{NonResourceURLs: []string{a.url}, Verbs: []string{a.verb}}
	}
	r := rbacv1.PolicyRule{APIGroups: []string{a.group}, Resources: []string{a.resource}, Verbs: []string{a.verb}}
	if a.name != "" {
		r.ResourceNames = []string{a.name}
	}
	return r
}

// rulesYAML writes a YAML list of rules, each preceded by its comment.
func rulesYAML(rules []commented, indent string) string {
	var b strings.Builder
	for _, r := range rules {
		for _, line := range wrap(r.why, 76) {
			b.WriteString(indent + "# " + line + "\n")
		}
		data, err := yaml.Marshal(r.rule)
		if err != nil {
			panic(err)
		}
		for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
			if i == 0 {
				b.WriteString(indent + "- " + line + "\n")
			} else {
				b.WriteString(indent + "  " + line + "\n")
			}
		}
	}
	return b.String()
}

func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = w
			continue
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

func dedupe(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}
