package doctor

import (
	"fmt"
	"sort"
	"strings"
)

// maxNodesNamed bounds the nodes the VM line names.
const maxNodesNamed = 5

// vmLine is the reassuring half of the runbook, said in the verdict: how
// many VMs run and on which nodes, and what fails while the control plane
// is down. Empty when KubeVirt's VM APIs are not served.
func (f *Facts) vmLine() string {
	if f.absent(ReadVMIs) {
		return ""
	}
	if err := f.readErr(ReadVMIs); err != nil {
		return fmt.Sprintf("VMs: not counted (could not list %s: %v).", ReadVMIs, err)
	}
	w := f.Workloads
	where, stale := f.runningNodes()
	others := otherPhases(w.ByPhase)
	at := ""
	if where != "" {
		at = " (" + where + ")"
	}
	var b strings.Builder
	if f.controlPlaneDown() {
		if w.VMIsRunning == 0 {
			b.WriteString("No VM is running (no Running VMI), so none is affected; lifecycle operations (create, start) fail until virt-api and virt-controller are back")
		} else {
			fmt.Fprintf(&b, "%d %s keep running%s; lifecycle operations (create, start, stop, migrate, console) fail until virt-api and virt-controller are back", w.VMIsRunning, plural(w.VMIsRunning, "VM", "VMs"), at)
		}
		if others != "" {
			b.WriteString("; " + others + " wait for virt-controller")
		}
	} else {
		fmt.Fprintf(&b, "%d %s running%s", w.VMIsRunning, plural(w.VMIsRunning, "VM", "VMs"), at)
		if others != "" {
			b.WriteString("; " + others)
		}
	}
	if stale != "" {
		b.WriteString("; " + stale)
	}
	return b.String() + "."
}

// runningNodes describes where the Running VMIs are ("node-a: 2, node-b:
// 1"), and those on nodes that are not Ready, whose VMs may be down.
func (f *Facts) runningNodes() (where, stale string) {
	type n struct {
		name  string
		count int
	}
	var nodes []n
	staleCount := 0
	var staleNodes []string
	for name, count := range f.Workloads.RunningByNode {
		nodes = append(nodes, n{name, count})
		if name == "" {
			continue
		}
		if ready, known := f.nodeReady(name); known && !ready {
			staleCount += count
			staleNodes = append(staleNodes, name)
		}
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].count != nodes[j].count {
			return nodes[i].count > nodes[j].count
		}
		return nodes[i].name < nodes[j].name
	})
	var parts []string
	for i, x := range nodes {
		if i == maxNodesNamed {
			parts = append(parts, fmt.Sprintf("and %d more nodes", len(nodes)-maxNodesNamed))
			break
		}
		name := x.name
		if name == "" {
			name = "no node named"
		}
		parts = append(parts, fmt.Sprintf("%s: %d", name, x.count))
	}
	if len(nodes) > 1 || len(nodes) == 1 && nodes[0].name != "" {
		where = "on " + strings.Join(parts, ", ")
	}
	if staleCount > 0 {
		sort.Strings(staleNodes)
		stale = fmt.Sprintf("%d of them on NotReady nodes (%s) may not be running: their status is stale", staleCount, strings.Join(staleNodes, ", "))
	}
	return where, stale
}

// otherPhases lists the VMIs that are not Running, by phase: "1 Pending, 2
// Scheduling".
func otherPhases(byPhase map[string]int) string {
	var phases []string
	for p, n := range byPhase {
		if p != "Running" && n > 0 {
			phases = append(phases, fmt.Sprintf("%d %s", n, p))
		}
	}
	sort.Strings(phases)
	if len(phases) == 0 {
		return ""
	}
	return "VMIs also " + strings.Join(phases, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
