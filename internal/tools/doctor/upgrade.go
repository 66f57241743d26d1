package doctor

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	applystage "github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// updateOrder is the order in which a running control plane is updated,
// the applier's own (stage.Update): a rollout stuck on one component holds
// the ones after it.
var updateOrder = applystage.Update.Components()

// noProgressAfter: a Deployment whose rollout has not progressed for this
// long is stuck, even before its progressDeadlineSeconds.
const noProgressAfter = 10 * time.Minute

// blockingWaits are container waiting reasons a rollout does not get past
// by itself.
var blockingWaits = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "CrashLoopBackOff": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// rollout is one component's state in an update.
type rollout struct {
	name string
	kind string
	// exists: its Deployment or DaemonSet exists.
	exists bool
	// version and id are what its object was applied from (the
	// install-strategy annotations).
	version, id string
	// podVersions counts its pods per app.kubernetes.io/version.
	podVersions              map[string]int
	want, updated, available int32
	// complete: every pod is of the current template and available.
	complete bool
	// blocked says why its new pods do not become ready; since is when
	// the oldest of them was created (or the rollout last progressed).
	blocked []string
	since   time.Time
	// deadline: the Deployment reports ProgressDeadlineExceeded.
	deadline bool
}

// upgradeState is what doctor makes of an update of the control plane.
type upgradeState struct {
	kv         *kvv1.KubeVirt
	inProgress bool
	// fromVersion/fromID are observed, toVersion/toID the target.
	fromVersion, toVersion, fromID, toID string
	components                           []rollout
	// stuck is the component the update waits on and cannot get past;
	// stuckWhy says why.
	stuck    *rollout
	stuckWhy string
	since    time.Time
	// skew describes components at different versions ("" when none).
	skew string
	// previous is the strategy ConfigMap of the observed deployment.
	previous string
	// changed are the deployment-config fields that differ.
	changed []string
	// line is the verdict's upgrade line; rollback how to go back.
	line, rollback string
}

func (f *Facts) upgrade() upgradeState {
	var u upgradeState
	kvs := f.kubeVirtsIn(f.Where.Namespace)
	if len(kvs) == 0 || f.readErr(ReadDeployments) != nil || f.readErr(ReadDaemonSets) != nil {
		return u
	}
	kv := kvs[0]
	u.kv = kv
	st := kv.Status
	u.fromVersion, u.toVersion, u.fromID, u.toID = st.ObservedKubeVirtVersion, st.TargetKubeVirtVersion, st.ObservedDeploymentID, st.TargetDeploymentID
	if u.toVersion == "" {
		u.toVersion = u.fromVersion
	}
	u.inProgress = u.fromID != "" && u.toID != "" && u.fromID != u.toID
	for _, name := range updateOrder {
		u.components = append(u.components, f.rolloutOf(name, u.toVersion))
	}
	u.skew = skewOf(u.components)
	if !u.inProgress {
		return u
	}
	for _, s := range f.Strategies {
		if s.ID == u.fromID {
			u.previous = s.Name
		}
	}
	u.changed = changedFields(st.ObservedDeploymentConfig, st.TargetDeploymentConfig)
	if c := kv.Status.FindCondition(kvv1.KubeVirtConditionProgressing); c != nil && c.Status == corev1.ConditionTrue {
		u.since = c.LastTransitionTime.Time
	}
	for i := range u.components {
		r := &u.components[i]
		if !r.exists || r.id == u.toID && r.complete {
			continue
		}
		// The first component not done is where the update is.
		switch {
		case r.id != u.toID && !f.operatorRuns():
			u.stuck, u.stuckWhy = r, "not yet updated, and no operator runs to update it"
		case len(r.blocked) > 0:
			u.stuck, u.stuckWhy = r, strings.Join(r.blocked, "; ")
		case r.deadline:
			u.stuck, u.stuckWhy = r, fmt.Sprintf("its Deployment exceeded its progress deadline (%d of %d pods updated, %d available)", r.updated, r.want, r.available)
		case r.kind == "Deployment" && !r.since.IsZero() && f.Now.Sub(r.since) > noProgressAfter:
			u.stuck, u.stuckWhy = r, fmt.Sprintf("no progress for %s (%d of %d pods updated, %d available)", roundAgo(f.Now.Sub(r.since)), r.updated, r.want, r.available)
		}
		if u.stuck != nil && !u.stuck.since.IsZero() {
			u.since = u.stuck.since
		}
		break
	}
	u.rollback = f.rollbackPath(u)
	u.line = f.upgradeLine(u)
	return u
}

// operatorRuns: a virt-operator pod is ready or its Lease is held.
func (f *Facts) operatorRuns() bool {
	if f.readyCount(vocab.VirtOperator) > 0 {
		return true
	}
	_, _, held := f.leaseHolder()
	return held
}

func (f *Facts) rolloutOf(name, target string) rollout {
	r := rollout{name: name, kind: "Deployment", podVersions: map[string]int{}}
	var meta map[string]string
	if name == vocab.VirtHandler {
		r.kind = "DaemonSet"
		if ds := f.daemonSet(name); ds != nil {
			r.exists, meta = true, ds.Annotations
			r.want, r.updated, r.available = ds.Status.DesiredNumberScheduled, ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable
			r.complete = ds.Status.ObservedGeneration >= ds.Generation && r.updated == r.want && r.available == r.want
		}
	} else if d := f.deployment(name); d != nil {
		r.exists, meta = true, d.Annotations
		r.want = 1
		if d.Spec.Replicas != nil {
			r.want = *d.Spec.Replicas
		}
		r.updated, r.available = d.Status.UpdatedReplicas, d.Status.AvailableReplicas
		r.complete = d.Status.ObservedGeneration >= d.Generation && r.updated == r.want && d.Status.Replicas == r.want && r.available == r.want
		if c := deploymentCondition(d, appsv1.DeploymentProgressing); c != nil {
			r.deadline = c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
			r.since = c.LastUpdateTime.Time
		}
	}
	r.version, r.id = meta[vocab.InstallStrategyVersionAnnotation], meta[vocab.InstallStrategyIdentifierAnnotation]
	var oldest time.Time
	blocked := map[string]int{}
	for _, p := range f.componentPods(name) {
		if p.DeletionTimestamp != nil {
			continue
		}
		if v := p.Labels[vocab.AppVersionLabel]; v != "" {
			r.podVersions[v]++
		}
		if podReady(p) {
			continue
		}
		why := blockingReason(p)
		if why == "" {
			continue
		}
		blocked[why]++
		if t := p.CreationTimestamp.Time; oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	for _, why := range sortedIntKeys(blocked) {
		n := blocked[why]
		r.blocked = append(r.blocked, fmt.Sprintf("%d %s %s", n, plural(n, "pod", "pods"), why))
	}
	if !oldest.IsZero() {
		r.since = oldest
	}
	return r
}

// blockingReason says why a pod that is not ready will not become ready
// by itself, "" when it may.
func blockingReason(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			msg := strings.TrimSpace(c.Message)
			if msg == "" {
				msg = c.Reason
			}
			return "cannot be scheduled (" + msg + ")"
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && blockingWaits[w.Reason] {
			return fmt.Sprintf("in %s (container %s)", w.Reason, cs.Name)
		}
	}
	return ""
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// skewOf describes the versions the components run at, "" when they all
// run one.
func skewOf(rs []rollout) string {
	all := map[string]bool{}
	var parts []string
	for _, r := range rs {
		if !r.exists {
			continue
		}
		vs := sortedIntKeys(r.podVersions)
		for _, v := range vs {
			all[v] = true
		}
		if r.version != "" {
			all[r.version] = true
		}
		switch {
		case len(vs) == 0 && r.version != "":
			parts = append(parts, r.name+" "+r.version)
		case len(vs) == 1:
			parts = append(parts, r.name+" "+vs[0])
		case len(vs) > 1:
			var each []string
			for _, v := range vs {
				each = append(each, fmt.Sprintf("%s (%d %s)", v, r.podVersions[v], plural(r.podVersions[v], "pod", "pods")))
			}
			parts = append(parts, r.name+" "+strings.Join(each, " and "))
		}
	}
	if len(all) < 2 {
		return ""
	}
	return strings.Join(parts, ", ")
}

// specFields maps deployment-config fields to the KubeVirt spec fields
// that set them.
var specFields = map[string]string{
	"kubeVirtVersion": "spec.imageTag", "registry": "spec.imageRegistry", "imagePrefix": "spec.imagePrefix",
	"imageDigests": "image digests", "imagePullPolicy": "spec.imagePullPolicy", "imagePullSecrets": "spec.imagePullSecrets",
	"featureGates": "spec.configuration.developerConfiguration.featureGates", "infra": "spec.infra", "workloads": "spec.workloads",
	"customizeComponents": "spec.customizeComponents", "uninstallStrategy": "spec.uninstallStrategy",
	"monitoring": "spec.monitorNamespace/monitorAccount/serviceMonitorNamespace", "productName": "spec.productName",
	"productVersion": "spec.productVersion", "productComponent": "spec.productComponent",
}

// changedFields lists which top-level fields of two deployment configs
// (JSON, as the status records them) differ, named as the spec sets them.
func changedFields(observed, target string) []string {
	var a, b map[string]any
	if json.Unmarshal([]byte(observed), &a) != nil || json.Unmarshal([]byte(target), &b) != nil {
		return nil
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if k == "id" || reflect.DeepEqual(a[k], b[k]) {
			continue
		}
		name := specFields[k]
		if name == "" {
			name = k
		}
		if k == "kubeVirtVersion" {
			name += fmt.Sprintf(" %v → %v", a[k], b[k])
		}
		out = append(out, name)
	}
	return out
}

func short(id string) string {
	if len(id) > 10 {
		return id[:10]
	}
	return id
}

func roundAgo(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// whenAgo writes a time as "2026-10-01T11:55:00Z (5m0s ago)".
func (f *Facts) whenAgo(t time.Time) string {
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), roundAgo(f.Now.Sub(t)))
}

func (f *Facts) upgradeLine(u upgradeState) string {
	what := fmt.Sprintf("an update of deployment %s → %s (version %s unchanged)", short(u.fromID), short(u.toID), orNone(u.toVersion))
	if u.fromVersion != u.toVersion {
		what = fmt.Sprintf("an upgrade %s → %s (deployment %s → %s)", orNone(u.fromVersion), orNone(u.toVersion), short(u.fromID), short(u.toID))
	}
	var b strings.Builder
	b.WriteString(strings.ToUpper(what[:1]) + what[1:])
	if u.stuck != nil {
		fmt.Fprintf(&b, " is stuck at %s", u.stuck.name)
		if !u.since.IsZero() {
			b.WriteString(" since " + f.whenAgo(u.since))
		}
		b.WriteString(": " + u.stuckWhy)
	} else {
		b.WriteString(" is in progress")
		if !u.since.IsZero() {
			b.WriteString(" since " + f.whenAgo(u.since))
		}
		var states []string
		for _, r := range u.components {
			if !r.exists {
				continue
			}
			switch {
			case r.id == u.toID && r.complete:
				states = append(states, r.name+" done")
			case r.id == u.toID:
				states = append(states, fmt.Sprintf("%s rolling (%d of %d updated, %d available)", r.name, r.updated, r.want, r.available))
			default:
				states = append(states, r.name+" waiting")
			}
		}
		if len(states) > 0 {
			b.WriteString(": " + strings.Join(states, ", "))
		}
	}
	if len(u.changed) > 0 {
		b.WriteString("; changed: " + strings.Join(u.changed, ", "))
	}
	if u.skew != "" {
		b.WriteString("; versions now: " + u.skew)
	}
	b.WriteString(". " + u.rollback)
	return b.String()
}

// rollbackPath says how to go back to the observed deployment.
func (f *Facts) rollbackPath(u upgradeState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Roll back by restoring the KubeVirt resource's spec to what deployment %s was made from", short(u.fromID))
	if len(u.changed) > 0 {
		b.WriteString(" (" + strings.Join(u.changed, ", ") + ")")
	}
	if u.fromVersion != "" && u.fromVersion != u.toVersion {
		fmt.Fprintf(&b, `, for the version: %s`, f.kubectlNS(`patch kubevirts.kubevirt.io %s --type merge -p '{"spec":{"imageTag":"%s"}}'`, u.kv.Name, u.fromVersion))
	}
	if u.previous != "" {
		fmt.Fprintf(&b, "; the previous install strategy (ConfigMap %s) is still there, so the operator goes back to it without rendering anew", u.previous)
	} else {
		b.WriteString("; the previous install strategy is gone, so going back renders it anew")
	}
	if owners := f.kubeVirtOwners(); len(owners) > 0 {
		fmt.Fprintf(&b, "; the resource is owned by %s: revert the change in its source, or it undoes a patch", strings.Join(owners, " and "))
	}
	return b.String() + "."
}

func checkUpgrade(f *Facts) Check {
	c := Check{Name: CheckUpgrade, Group: GroupCluster}
	if f.Namespace == nil {
		return namespaceMissing(f, c)
	}
	for _, key := range []string{ReadDeployments, ReadDaemonSets, ReadKubeVirts} {
		if f.readErr(key) != nil && !f.absent(key) {
			return f.skipped(c, key, "list", " in "+f.Where.Namespace)
		}
	}
	u := f.upgrade()
	if u.kv == nil {
		c.Status = Skipped
		c.Evidence = "skipped: no KubeVirt resource in " + f.Where.Namespace + "."
		return c
	}
	switch {
	case u.stuck != nil:
		c.Status = Fail
		c.Evidence = u.line
		c.cause = u.line
		c.Hint = f.kubectlNS("describe %s %s", strings.ToLower(u.stuck.kind)+"s.apps", u.stuck.name)
	case u.inProgress:
		c.Status = OK
		c.Evidence = u.line
	case u.skew != "":
		c.Status = Warn
		c.Evidence = fmt.Sprintf("no update in progress (deployment %s), yet the components run different versions: %s. A rollout was interrupted, or something else changed them.", short(u.fromID), u.skew)
		c.Hint = f.kubectlNS("get deployments.apps,daemonsets.apps -l app.kubernetes.io/component=kubevirt -L app.kubernetes.io/version")
	case u.fromID == "":
		c.Status = OK
		c.Evidence = "no deployment observed yet: the first install is not finished (see the components)."
	default:
		var at []string
		for _, r := range u.components {
			if r.exists {
				at = append(at, r.name)
			}
		}
		sort.Strings(at)
		c.Status = OK
		c.Evidence = fmt.Sprintf("no update in progress: deployment %s, version %s on %s.", short(u.fromID), orNone(u.fromVersion), strings.Join(at, ", "))
	}
	return c
}
