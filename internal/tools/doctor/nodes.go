package doctor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// controlPlaneComponents run the control plane; their nodes' allocatable
// use is read (virt-handler runs on every node: only its nodes'
// conditions are).
var controlPlaneComponents = []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtOperator, vocab.VirtExportProxy}

// pressureConditions are the node conditions under which the kubelet
// evicts pods and refuses new ones.
var pressureConditions = []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure}

// High allocatable use: requests of this share of a node's allocatable
// CPU or memory, or pods of its pod capacity.
const (
	highRequests = 0.90
	highPods     = 0.95
)

// controlPlaneNodes are the nodes hosting control-plane pods (not
// virt-handler's), sorted.
func (f *Facts) controlPlaneNodes() []string {
	set := map[string]bool{}
	for _, name := range controlPlaneComponents {
		for _, p := range f.componentPods(name) {
			if p.Spec.NodeName != "" {
				set[p.Spec.NodeName] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// gatherNodePods lists the pods bound to each control-plane node, for
// their allocatable use.
func (g *Gatherer) gatherNodePods(ctx context.Context, f *Facts) {
	f.NodePods = map[string][]corev1.Pod{}
	if f.readErr(ReadPods) != nil || f.readErr(ReadNodes) != nil {
		return
	}
	for _, n := range f.controlPlaneNodes() {
		var pods corev1.PodList
		if err := g.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n}); err != nil {
			f.Reads[ReadNodePods] = classify(err)
			return
		}
		f.NodePods[n] = pods.Items
	}
}

// flapping says which components are not steadily up, and which pods: not
// ready, restarted in the last hour, or evicted. By component, the pods'
// nodes.
func (f *Facts) flapping() map[string]struct {
	why   string
	nodes map[string]bool
} {
	out := map[string]struct {
		why   string
		nodes map[string]bool
	}{}
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController, vocab.VirtOperator, vocab.VirtHandler} {
		var notReady, restarted, evicted int
		nodes := map[string]bool{}
		pods := f.componentPods(name)
		for _, p := range pods {
			bad := false
			switch {
			case p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Evicted":
				evicted++
				bad = true
			case p.DeletionTimestamp == nil && !podReady(p):
				notReady++
				bad = true
			}
			for _, cs := range p.Status.ContainerStatuses {
				if t := cs.LastTerminationState.Terminated; t != nil && cs.RestartCount > 0 && t.FinishedAt.Add(time.Hour).After(f.Now) {
					restarted++
					bad = true
					break
				}
			}
			if bad && p.Spec.NodeName != "" {
				nodes[p.Spec.NodeName] = true
			}
		}
		var why []string
		if notReady > 0 {
			why = append(why, fmt.Sprintf("%d of %d pods not ready", notReady, len(pods)))
		}
		if restarted > 0 {
			why = append(why, fmt.Sprintf("%d restarted in the last hour", restarted))
		}
		if evicted > 0 {
			why = append(why, fmt.Sprintf("%d evicted", evicted))
		}
		if len(why) > 0 {
			out[name] = struct {
				why   string
				nodes map[string]bool
			}{strings.Join(why, ", "), nodes}
		}
	}
	return out
}

// nodePressure describes what weighs on one node, "" when nothing does.
func (f *Facts) nodePressure(n *corev1.Node) []string {
	var out []string
	for _, want := range pressureConditions {
		for _, c := range n.Status.Conditions {
			if c.Type == want && c.Status == corev1.ConditionTrue {
				s := fmt.Sprintf("under %s", c.Type)
				if !c.LastTransitionTime.IsZero() {
					s += " since " + f.whenAgo(c.LastTransitionTime.Time)
				}
				if msg := strings.TrimSpace(c.Message); msg != "" {
					s += " (" + msg + ")"
				}
				out = append(out, s)
			}
		}
	}
	pods, read := f.NodePods[n.Name]
	if !read {
		return out
	}
	var cpu, mem resource.Quantity
	running := 0
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		running++
		for _, c := range p.Spec.Containers {
			if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
				cpu.Add(q)
			}
			if q, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
				mem.Add(q)
			}
		}
		for name, q := range p.Spec.Overhead {
			switch name {
			case corev1.ResourceCPU:
				cpu.Add(q)
			case corev1.ResourceMemory:
				mem.Add(q)
			}
		}
	}
	alloc := n.Status.Allocatable
	share := func(used resource.Quantity, name corev1.ResourceName) float64 {
		a, ok := alloc[name]
		if !ok || a.IsZero() {
			return 0
		}
		return float64(used.MilliValue()) / float64(a.MilliValue())
	}
	if s := share(mem, corev1.ResourceMemory); s >= highRequests {
		out = append(out, fmt.Sprintf("its pods request %.0f%% of its allocatable memory (%s of %s)", s*100, mem.String(), ptrQ(alloc, corev1.ResourceMemory)))
	}
	if s := share(cpu, corev1.ResourceCPU); s >= highRequests {
		out = append(out, fmt.Sprintf("its pods request %.0f%% of its allocatable CPU (%s of %s)", s*100, cpu.String(), ptrQ(alloc, corev1.ResourceCPU)))
	}
	if a, ok := alloc[corev1.ResourcePods]; ok && a.Value() > 0 && float64(running)/float64(a.Value()) >= highPods {
		out = append(out, fmt.Sprintf("it runs %d pods of at most %d", running, a.Value()))
	}
	return out
}

func ptrQ(l corev1.ResourceList, name corev1.ResourceName) string {
	q := l[name]
	return q.String()
}

// checkNodePressure: nodes hosting the control plane under memory, disk
// or PID pressure, or with their allocatable resources nearly all
// requested. Named as the likely cause when components on them flap.
func checkNodePressure(f *Facts) Check {
	c := Check{Name: CheckNodePressure, Group: GroupCluster}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	if f.readErr(ReadPods) != nil {
		return f.skipped(c, ReadPods, "list", " in "+f.Where.Namespace)
	}
	if f.readErr(ReadNodes) != nil {
		return f.skipped(c, ReadNodes, "list", "")
	}
	hosted := map[string]map[string]bool{}
	for _, name := range append([]string{vocab.VirtHandler}, controlPlaneComponents...) {
		for _, p := range f.componentPods(name) {
			if p.Spec.NodeName == "" {
				continue
			}
			if hosted[p.Spec.NodeName] == nil {
				hosted[p.Spec.NodeName] = map[string]bool{}
			}
			hosted[p.Spec.NodeName][name] = true
		}
	}
	nodes := make([]string, 0, len(hosted))
	for n := range hosted {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	flaps := f.flapping()
	var problems, causes []string
	first := ""
	for _, n := range nodes {
		node := f.Nodes[n]
		if node == nil {
			continue
		}
		weighs := f.nodePressure(node)
		if len(weighs) == 0 {
			continue
		}
		if first == "" {
			first = n
		}
		comps := slices.Sorted(maps.Keys(hosted[n]))
		p := fmt.Sprintf("node %s is %s; it hosts %s", n, strings.Join(weighs, ", "), strings.Join(comps, ", "))
		problems = append(problems, p)
		var flapHere []string
		for _, comp := range comps {
			if fl, ok := flaps[comp]; ok && fl.nodes[n] {
				flapHere = append(flapHere, comp+" flaps ("+fl.why+")")
			}
		}
		if len(flapHere) > 0 {
			causes = append(causes, fmt.Sprintf("node %s is %s, and on it %s", n, strings.Join(weighs, ", "), strings.Join(flapHere, ", ")))
		}
	}
	unread := ""
	if err := f.readErr(ReadNodePods); err != nil {
		unread = fmt.Sprintf(" (allocatable use not checked: cannot list the pods of the nodes: %v)", err)
	}
	if len(problems) == 0 {
		c.Status = OK
		if len(nodes) == 0 {
			c.Evidence = "no control-plane pod is scheduled on a node." + unread
			return c
		}
		c.Evidence = fmt.Sprintf("no memory, disk or PID pressure on the nodes hosting control-plane pods (%s), and their pods' requests fit their allocatable resources.%s", strings.Join(nodes, ", "), unread)
		return c
	}
	c.Status = Warn
	c.Evidence = strings.Join(problems, "; ") + ". The kubelet evicts pods from a node under pressure and admits no new ones." + unread
	c.Hint = f.kubectl("describe nodes %s", first)
	if len(causes) > 0 {
		c.cause = strings.Join(causes, "; ")
	}
	return c
}
