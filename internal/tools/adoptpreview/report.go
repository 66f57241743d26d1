package adoptpreview

import (
	"fmt"
	"sort"
	"strings"
)

// Text is the report for a terminal: the verdict and why, the deployments,
// the objects by what would happen to them (one line per kind), and each
// workload that would roll with its changed fields.
func (r Report) Text() string {
	var b strings.Builder
	name := r.Namespace + "/" + r.KubeVirt
	if r.KubeVirt == "" {
		name = r.Namespace
	}
	fmt.Fprintf(&b, "Adoption of KubeVirt %s: %s (dry run: nothing was written)\n", name, r.Verdict)
	if r.Verdict == Refused {
		fmt.Fprintf(&b, "Refused with Synchronized=False, reason %s: %s\n", r.Reason, r.Message)
	} else {
		fmt.Fprintf(&b, "%s\n", r.Message)
	}
	if u := r.Upstream; u != nil {
		fmt.Fprintf(&b, "Upstream's deployment: %s from %s, deployment %s\n", u.Version, u.Registry, u.DeploymentID)
	}
	if t := r.Target; t != nil {
		fmt.Fprintf(&b, "virtop would install: %s from %s, deployment %s\n", t.Version, t.Registry, t.DeploymentID)
	}
	if r.Target == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "Would take over in place: %d objects (the fields upstream's field manager owns move to virtop's; nothing is deleted or recreated)\n", len(r.TakeOver))
	writeKinds(&b, r.TakeOver)
	fmt.Fprintf(&b, "Would create: %d objects\n", len(r.Create))
	writeKinds(&b, r.Create)
	fmt.Fprintf(&b, "Would leave to upstream: %d objects\n", len(r.Left))
	why := map[string][]Object{}
	for _, l := range r.Left {
		why[l.Why] = append(why[l.Why], l.Object)
	}
	reasons := make([]string, 0, len(why))
	for w := range why {
		reasons = append(reasons, w)
	}
	sort.Strings(reasons)
	for _, w := range reasons {
		fmt.Fprintf(&b, "  %s:\n", w)
		for _, line := range kindLines(why[w]) {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	total := len(r.Rolls) + len(r.Steady) + len(r.Kept)
	fmt.Fprintf(&b, "Workloads that would roll: %d of %d\n", len(r.Rolls), total)
	for _, roll := range r.Rolls {
		fmt.Fprintf(&b, "  %s: %d fields of its pod template change\n", roll.Object, len(roll.Changes))
		for _, c := range roll.Changes {
			fmt.Fprintf(&b, "    %s\n", c)
		}
	}
	if len(r.Steady) > 0 {
		var names []string
		for _, o := range r.Steady {
			names = append(names, o.String())
		}
		fmt.Fprintf(&b, "Would not roll: %s\n", strings.Join(names, ", "))
	}
	if len(r.Kept) > 0 {
		fmt.Fprintf(&b, "Pod templates kept as upstream wrote them (nothing rolls now; these fields change, and the workload rolls, with the next change of the deployment):\n")
		for _, k := range r.Kept {
			fmt.Fprintf(&b, "  %s: %d fields\n", k.Object, len(k.Changes))
			for _, c := range k.Changes {
				fmt.Fprintf(&b, "    %s\n", c)
			}
		}
	}
	return b.String()
}

func writeKinds(b *strings.Builder, objs []Object) {
	for _, line := range kindLines(objs) {
		fmt.Fprintf(b, "  %s\n", line)
	}
}

// kindLines groups objects by kind: "Deployment (2): kubevirt/virt-api, kubevirt/virt-controller".
func kindLines(objs []Object) []string {
	byKind := map[string][]string{}
	for _, o := range objs {
		k := o.Kind
		if o.Group != "" {
			k += "." + o.Group
		}
		n := o.Name
		if o.Namespace != "" {
			n = o.Namespace + "/" + n
		}
		byKind[k] = append(byKind[k], n)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%s (%d): %s", k, len(byKind[k]), strings.Join(byKind[k], ", ")))
	}
	return out
}
