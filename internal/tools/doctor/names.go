package doctor

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// runbookNames are the resource names the runbooks and people type: a
// short name that resolves to another kind than meant makes a command act
// on the wrong thing.
var runbookNames = []string{
	"vm", "vms", "vmi", "vmis", "vmim", "vmims", "kv", "kubevirt", "kubevirts",
	"virtualmachine", "virtualmachines", "virtualmachineinstance", "virtualmachineinstances",
	"servicemonitor", "servicemonitors", "prometheusrule", "prometheusrules", "prometheus", "prometheuses",
	"backup", "backups", "snapshot", "snapshots", "migration", "migrations", "export", "exports",
	"pods", "deployments", "daemonsets", "services", "endpointslices", "networkpolicies", "configmaps",
	"apiservices", "roles", "rolebindings", "nodes", "events",
}

// builtinGroup: a group Kubernetes itself serves. Ambiguity between
// built-in groups only (events and events.events.k8s.io) is resolved by
// kubectl's fixed preference and is not reported.
func builtinGroup(g string) bool {
	return g == "" || !strings.Contains(g, ".") || strings.HasSuffix(g, ".k8s.io")
}

// kubevirtGroup: a group of KubeVirt or its monitoring.
func kubevirtGroup(g string) bool {
	return g == "kubevirt.io" || strings.HasSuffix(g, ".kubevirt.io") || g == "monitoring.coreos.com"
}

func checkShortNames(f *Facts) Check {
	c := Check{Name: CheckShortNames, Group: GroupInfo}
	if f.readErr(ReadDiscovery) != nil && len(f.Resources) == 0 {
		return f.skipped(c, ReadDiscovery, "read", "")
	}
	// name -> fully qualified resources it resolves to.
	index := map[string]map[string]bool{}
	groupsOf := map[string]map[string]bool{}
	add := func(name string, r Resource) {
		if name == "" {
			return
		}
		name = strings.ToLower(name)
		if index[name] == nil {
			index[name] = map[string]bool{}
			groupsOf[name] = map[string]bool{}
		}
		index[name][r.FullName()] = true
		groupsOf[name][r.Group] = true
	}
	names := map[string]bool{}
	for _, n := range runbookNames {
		names[n] = true
	}
	for _, r := range f.Resources {
		add(r.Name, r)
		add(r.SingularName, r)
		add(r.Kind, r)
		for _, s := range r.ShortNames {
			add(s, r)
		}
		if kubevirtGroup(r.Group) {
			names[strings.ToLower(r.Kind)] = true
			for _, s := range r.ShortNames {
				names[strings.ToLower(s)] = true
			}
		}
	}
	var found []string
	for _, n := range slices.Sorted(maps.Keys(names)) {
		targets := index[n]
		if len(targets) < 2 {
			continue
		}
		allBuiltin := true
		for g := range groupsOf[n] {
			if !builtinGroup(g) {
				allBuiltin = false
			}
		}
		if allBuiltin {
			continue
		}
		full := make([]string, 0, len(targets))
		for t := range targets {
			full = append(full, t)
		}
		sort.Strings(full)
		found = append(found, fmt.Sprintf("%q resolves to %s", n, strings.Join(full, ", ")))
	}
	if len(found) == 0 {
		c.Status = OK
		c.Evidence = "no short or kind name used by the runbooks or of KubeVirt's resources resolves to more than one resource."
		if f.readErr(ReadDiscovery) != nil {
			c.Evidence += fmt.Sprintf(" (discovery was partial: %v)", f.readErr(ReadDiscovery))
		}
		return c
	}
	c.Status = Warn
	c.Evidence = strings.Join(found, "; ") + ". Use the fully qualified names in commands."
	c.Hint = f.kubectl("api-resources -o wide")
	return c
}
