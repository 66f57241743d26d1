package doctor

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// ownership is who the KubeVirt installation of the namespace belongs to,
// as its component workloads and operators show it (docs/migrate.md).
type ownership struct {
	kv *kvv1.KubeVirt
	// record is virtop's adoption record on the resource; adopted says
	// there is one.
	record  adopt.Record
	adopted bool
	// recordErr: the record could not be read.
	recordErr error
	// upstream and virtop name the component workloads labelled
	// app.kubernetes.io/managed-by virt-operator and virtop.
	upstream, virtop []string
	// upstreamRuns and virtopRuns name what runs each operator.
	upstreamRuns, virtopRuns []string
}

// components are the workloads an adoption takes over and a hand back
// relabels: the control plane's Deployments and DaemonSet.
func (f *Facts) ownership() ownership {
	var o ownership
	kvs := f.kubeVirtsIn(f.Where.Namespace)
	if len(kvs) == 0 {
		return o
	}
	o.kv = kvs[0]
	o.record, o.adopted, o.recordErr = adopt.Adopted(o.kv)
	label := func(kind, name string, labels map[string]string) {
		switch labels[vocab.ManagedByLabel] {
		case vocab.UpstreamManagedByValue:
			o.upstream = append(o.upstream, kind+" "+name)
		case vocab.ManagedByValue:
			o.virtop = append(o.virtop, kind+" "+name)
		}
	}
	for _, name := range updateOrder {
		if name == vocab.VirtHandler {
			if ds := f.daemonSet(name); ds != nil {
				label("DaemonSet", name, ds.Labels)
			}
		} else if d := f.deployment(name); d != nil {
			label("Deployment", name, d.Labels)
		}
	}
	var pods []corev1.Pod
	for _, p := range f.Pods {
		if p.Labels[vocab.AppLabel] == vocab.VirtOperator {
			pods = append(pods, p)
		}
	}
	o.upstreamRuns = adopt.RunningOperators(f.Deployments, pods)
	o.virtopRuns = adopt.VirtopOperators(f.Deployments)
	sort.Strings(o.upstream)
	sort.Strings(o.virtop)
	return o
}

// adoptionSkip returns the skipped check when the facts the adoption
// checks need are missing, and false otherwise.
func (f *Facts) adoptionSkip(c Check) (Check, bool) {
	if f.Namespace == nil {
		return namespaceMissing(f, c), true
	}
	for _, key := range []string{ReadKubeVirts, ReadDeployments, ReadDaemonSets, ReadPods} {
		if f.readErr(key) != nil && !f.absent(key) {
			return f.skipped(c, key, "list", " in "+f.Where.Namespace), true
		}
	}
	if len(f.kubeVirtsIn(f.Where.Namespace)) == 0 {
		c.Status = Skipped
		c.Evidence = "skipped: no KubeVirt resource in " + f.Where.Namespace + "."
		return c, true
	}
	return c, false
}

// checkUpstreamOwner says whether the installation is still upstream's
// operator's, and fails when both operators run.
func checkUpstreamOwner(f *Facts) Check {
	c := Check{Name: CheckUpstreamOwner, Group: GroupInfo}
	if sk, ok := f.adoptionSkip(c); ok {
		return sk
	}
	o := f.ownership()
	switch {
	case len(o.upstreamRuns) > 0 && len(o.virtopRuns) > 0:
		c.Group, c.Status = GroupCluster, Fail
		c.Evidence = fmt.Sprintf("upstream's operator (%s) and virtop's (%s) both run: each rewrites every object to its own form, and the workloads roll back and forth.",
			strings.Join(o.upstreamRuns, ", "), strings.Join(o.virtopRuns, ", "))
		c.cause = c.Evidence
		c.Hint = "stop the one you are leaving: " + f.stopCommand(o.upstreamRuns[0])
	case len(o.upstreamRuns) > 0 && len(o.virtop) > 0:
		c.Group, c.Status = GroupCluster, Fail
		c.Evidence = fmt.Sprintf("upstream's operator runs (%s) while virtop's label is on %s: it takes the installation back object by object, without the hand back (docs/migrate.md).",
			strings.Join(o.upstreamRuns, ", "), strings.Join(o.virtop, ", "))
		c.cause = c.Evidence
		c.Hint = "virtop handback --dry-run -n " + f.Where.Namespace + " (with virtop's operator stopped), or " + f.stopCommand(o.upstreamRuns[0])
	case len(o.upstream) > 0 && !o.adopted:
		c.Status = Warn
		runs := "its operator does not run"
		if len(o.upstreamRuns) > 0 {
			runs = "its operator runs (" + strings.Join(o.upstreamRuns, ", ") + ")"
		}
		c.Evidence = fmt.Sprintf("the installation is still upstream's virt-operator's: %s=%s on %s, and %s; virtop does not manage it.",
			vocab.ManagedByLabel, vocab.UpstreamManagedByValue, strings.Join(o.upstream, ", "), runs)
		c.Hint = "to move it to virtop, see what would happen first: virtop adopt --dry-run -n " + f.Where.Namespace + " (docs/migrate.md)"
	case len(o.virtop) > 0:
		c.Status = OK
		c.Evidence = fmt.Sprintf("virtop manages the installation (%s labelled %s=%s).", strings.Join(o.virtop, ", "), vocab.ManagedByLabel, vocab.ManagedByValue)
	default:
		c.Status = OK
		c.Evidence = "no component carries upstream's label; nothing is left to upstream's operator."
	}
	return c
}

// stopCommand is the command that stops what runs an operator: scale a
// Deployment ("Deployment ns/name") to zero, or wait for a pod ("Pod
// ns/name") to be gone.
func (f *Facts) stopCommand(what string) string {
	name := what[strings.LastIndex(what, "/")+1:]
	if strings.HasPrefix(what, "Pod ") {
		return f.kubectlNS("wait pod/%s --for=delete --timeout=2m", name)
	}
	return f.kubectlNS("scale deployment/%s --replicas=0", name)
}

// checkAdoptionRefused reports the refusal virtop's operator set on the
// KubeVirt resource (Synchronized=False), with what to do about it.
func checkAdoptionRefused(f *Facts) Check {
	c := Check{Name: CheckAdoptionRefused, Group: GroupCluster}
	if sk, ok := f.adoptionSkip(c); ok {
		return sk
	}
	kv := f.kubeVirtsIn(f.Where.Namespace)[0]
	s := kv.Status.FindCondition(kvv1.KubeVirtConditionSynchronized)
	if s == nil || s.Status != corev1.ConditionFalse {
		c.Status = OK
		c.Evidence = "no adoption refused."
		return c
	}
	o := f.ownership()
	observed := kv.Status.ObservedKubeVirtVersion
	switch s.Reason {
	case kvv1.ReasonUpstreamOperatorRunning:
		c.Hint = "stop upstream's operator, then put virtop's in its place (docs/migrate.md step 2): " + f.kubectlNS("scale deployment/%s --replicas=0", vocab.VirtOperator)
		if len(o.upstreamRuns) > 0 {
			c.Hint = "stop upstream's operator, then put virtop's in its place (docs/migrate.md step 2): " + f.stopCommand(o.upstreamRuns[0])
		}
	case kvv1.ReasonAdoptionNotInCatalog:
		c.Hint = "upgrade with upstream's operator to a release virtop renders (virtop version lists them) before moving: " +
			f.kubectlNS(`patch kv %s --type merge -p '{"spec":{"imageTag":"<release>"}}'`, kv.Name)
	case kvv1.ReasonAdoptionWouldUpgrade:
		c.Hint = "pin the release upstream runs, so the takeover is no upgrade: " +
			f.kubectlNS(`patch kv %s --type merge -p '{"spec":{"imageTag":"%s"}}'`, kv.Name, observed)
	default:
		c.Status = OK
		c.Evidence = "no adoption refused."
		return c
	}
	c.Status = Fail
	c.Evidence = fmt.Sprintf("virtop refuses to take over upstream's installation (Synchronized=False, %s): %s", s.Reason, s.Message)
	c.cause = fmt.Sprintf("the adoption is refused (%s)", s.Reason)
	return c
}

// checkAdoptionProgress reports an adoption under way or done.
func checkAdoptionProgress(f *Facts) Check {
	c := Check{Name: CheckAdoptionProgress, Group: GroupInfo}
	if sk, ok := f.adoptionSkip(c); ok {
		return sk
	}
	o := f.ownership()
	st := o.kv.Status
	switch {
	case o.recordErr != nil:
		c.Group, c.Status = GroupCluster, Warn
		c.Evidence = "the adoption record cannot be read: " + o.recordErr.Error()
		c.Hint = f.kubectlNS("get kv %s -o jsonpath='{.metadata.annotations.virtop\\.dev/adopted-from}'", o.kv.Name)
	case !o.adopted:
		c.Status = OK
		c.Evidence = "no adoption recorded (annotation " + vocab.AdoptedFromAnnotation + " absent)."
	case recordLeft(o):
		c.Status = OK
		c.Evidence = fmt.Sprintf("handed back to upstream's %s but for the adoption record (adoption/handback says how to finish).", o.record.Version)
	case st.ObservedDeploymentID == o.record.DeploymentID && len(o.virtopRuns) == 0 && !f.operatorRuns():
		c.Group, c.Status = GroupCluster, Warn
		c.Evidence = fmt.Sprintf("the adoption of upstream's %s began (%s of %d components labelled virtop) but no operator runs: nothing moves on.",
			o.record.Version, countOf(o.virtop), len(o.virtop)+len(o.upstream))
		c.Hint = "start virtop's operator again: " + f.kubectlNS("scale deployment/%s --replicas=1", vocab.VirtOperator)
	case st.ObservedDeploymentID == o.record.DeploymentID:
		c.Status = OK
		left := "every component carries virtop's label"
		if len(o.upstream) > 0 {
			left = "still upstream's: " + strings.Join(o.upstream, ", ")
		}
		c.Evidence = fmt.Sprintf("adoption of upstream's %s (deployment %s) in progress: %s of %d components labelled virtop (%s); Available %s. It ends when the status carries virtop's deployment %s.",
			o.record.Version, short(o.record.DeploymentID), countOf(o.virtop), len(o.virtop)+len(o.upstream), left,
			conditionStatus(o.kv, kvv1.KubeVirtConditionAvailable), short(st.TargetDeploymentID))
	default:
		c.Status = OK
		c.Evidence = fmt.Sprintf("adopted from upstream's %s (deployment %s); virtop's deployment %s runs %s.",
			o.record.Version, short(o.record.DeploymentID), short(st.ObservedDeploymentID), orNone(st.ObservedKubeVirtVersion))
	}
	return c
}

// recordLeft: a hand back that left only the adoption record (its first
// run, while upstream's validator had no backend): every component
// upstream's, upstream's deployment in the status, no inventory of
// virtop's (an adoption under way has one).
func recordLeft(o ownership) bool {
	st := o.kv.Status
	return o.adopted && st.ObservedDeploymentID == o.record.DeploymentID && len(o.virtop) == 0 && len(o.upstream) > 0 &&
		!inventory.Recorded(st.Generations)
}

// checkHandback finds a hand back left half done: virtop's operator
// stopped, some components relabelled for upstream while the KubeVirt
// resource still holds virtop's adoption record, or components of both.
func checkHandback(f *Facts) Check {
	c := Check{Name: CheckHandback, Group: GroupCluster}
	if sk, ok := f.adoptionSkip(c); ok {
		return sk
	}
	o := f.ownership()
	st := o.kv.Status
	adoptionDone := o.adopted && st.ObservedDeploymentID != o.record.DeploymentID
	stopped := len(o.virtopRuns) == 0
	switch {
	case stopped && recordLeft(o):
		c.Status = Fail
		c.Evidence = fmt.Sprintf("a hand back is done but for virtop's adoption record of %s on the KubeVirt resource: every component carries upstream's label and the status upstream's deployment again, but upstream's virt-operator-validator refused the last update while no operator served it.",
			o.record.Version)
		c.cause = c.Evidence
		c.Hint = "install upstream's operator (its kubevirt-operator.yaml of " + o.record.Version + "), whose pods serve that webhook, then run virtop handback -n " + f.Where.Namespace + " again: it only removes the record"
		if len(o.upstreamRuns) > 0 {
			c.Hint = "upstream's operator runs and serves the webhook: virtop handback -n " + f.Where.Namespace + " removes the record"
		}
		return c
	case stopped && adoptionDone && len(o.upstream) > 0:
		c.Status = Fail
		c.Evidence = fmt.Sprintf("a hand back is half done: upstream's label is back on %s, virtop's still on %s, and the KubeVirt resource still holds virtop's adoption record of %s.",
			orNone(strings.Join(o.upstream, ", ")), orNone(strings.Join(o.virtop, ", ")), o.record.Version)
	case stopped && !o.adopted && len(o.upstream) > 0 && len(o.virtop) > 0:
		c.Status = Fail
		c.Evidence = fmt.Sprintf("the components have two owners with no operator of virtop's running: %s upstream's, %s virtop's; a hand back stopped part way.",
			strings.Join(o.upstream, ", "), strings.Join(o.virtop, ", "))
	case o.adopted || len(o.virtop) > 0:
		c.Status = OK
		c.Evidence = "no hand back under way."
		return c
	default:
		c.Status = OK
		c.Evidence = "no hand back under way (nothing of virtop's to hand back)."
		return c
	}
	c.cause = c.Evidence
	c.Hint = "run it again, it changes only what is left: virtop handback -n " + f.Where.Namespace + " --dry-run, then without --dry-run"
	return c
}

func countOf(l []string) string { return fmt.Sprint(len(l)) }

func conditionStatus(kv *kvv1.KubeVirt, t kvv1.KubeVirtConditionType) string {
	if c := kv.Status.FindCondition(t); c != nil {
		return string(c.Status)
	}
	return "unknown"
}
