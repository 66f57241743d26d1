package plan

import (
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// The staged virt-handler TLS rollout (upstream from v1.7,
// pkg/virt-operator/resource/apply/apps.go: supportsTLS, insertTLS,
// hasCertificateSecret, unattachCertificateSecret, processCanaryUpgrade).
//
// A release whose virt-handler DaemonSet carries the label
// kubevirt.io/supports-migration-cn-types: "true" runs virt-handler, once
// every node can, with --migration-cn-types migration: it then accepts
// migration connections only from peers presenting the migration client
// certificate (kubevirt-virt-handler-migration-client-certs), and the old
// shared client certificate (the volume kubevirt-virt-handler-certs) is no
// longer mounted. The release's strategy renders the DaemonSet as it must
// first roll out on a cluster whose virt-handlers do not validate yet: the
// new certificates mounted, the old one still there, no flag.
//
// Upstream's phases, keyed on the live DaemonSet:
//   - no DaemonSet yet (a fresh install): the final form at once (flag
//     added, old volume removed);
//   - the live one has the flag: the flag stays; the live one lacks the
//     old volume: it stays removed (a later upgrade keeps the final form);
//   - otherwise the release rolls out as rendered; once every pod is
//     updated and ready the flag is added; once that has rolled out, the
//     old volume is removed.
//
// virtop keys each step on the same facts of the live DaemonSet and calls
// a step rolled out when the DaemonSet controller has seen its generation
// and every scheduled pod is updated and available. (Upstream counts its
// pods carrying the target version instead, which the flag's rollout does
// not change, and reaches the last step only with the next change of the
// KubeVirt resource.)

// Facts of upstream's rollout.
const (
	// MigrationCNTypesFlag and its value make virt-handler validate them.
	MigrationCNTypesFlag  = "--migration-cn-types"
	MigrationCNTypesValue = "migration"
	// OldHandlerClientCertVolume is the shared client certificate the
	// validating virt-handlers no longer mount (its volume and Secret
	// share the name).
	OldHandlerClientCertVolume = vocab.VirtHandlerCertSecretName
)

// HandlerTLSStep is where the staged rollout stands.
type HandlerTLSStep string

const (
	// HandlerTLSNotStaged: the release's virt-handler does not validate
	// migration peers; the DaemonSet goes out as rendered.
	HandlerTLSNotStaged HandlerTLSStep = ""
	// HandlerTLSRollout: step 1, the release as rendered (new certificates
	// mounted, the old one still, no flag) rolls out on every node.
	HandlerTLSRollout HandlerTLSStep = "rollout"
	// HandlerTLSEnforce: step 2, the flag rolls out; the old certificate
	// is still mounted for the virt-handlers not yet restarted.
	HandlerTLSEnforce HandlerTLSStep = "enforce"
	// HandlerTLSFinal: the flag on, the old certificate gone (a fresh
	// install starts here).
	HandlerTLSFinal HandlerTLSStep = "final"
)

// HandlerTLS is the outcome for one plan.
type HandlerTLS struct {
	Step HandlerTLSStep
	// Settled: the step's DaemonSet is the live one and rolled out; the
	// rollout is done when the step is HandlerTLSFinal (or not staged)
	// and settled.
	Settled bool
}

// Done reports whether nothing of the staged rollout is left to wait for.
func (h HandlerTLS) Done() bool {
	return h.Settled && (h.Step == HandlerTLSFinal || h.Step == HandlerTLSNotStaged)
}

// StageHandlerTLS decides the step for the DaemonSet the strategy renders
// (ds, changed in place to the step's form) given the live DaemonSet (nil
// when there is none). It reads nothing else: a pure function of the two.
func StageHandlerTLS(ds, live *appsv1.DaemonSet) HandlerTLS {
	if ds.Labels[vocab.SupportsMigrationCNsLabel] != "true" {
		return HandlerTLS{Step: HandlerTLSNotStaged, Settled: live != nil && rolledOut(live, ds)}
	}
	step := HandlerTLSRollout
	switch {
	case live == nil:
		step = HandlerTLSFinal
	case hasFlag(live) && !hasOldCert(live):
		step = HandlerTLSFinal
	case hasFlag(live):
		// The flag is there with the old certificate: once that form of
		// this release has rolled out, the old certificate goes.
		step = HandlerTLSEnforce
		if enforcing := withFlag(ds.DeepCopy()); rolledOut(live, enforcing) {
			step = HandlerTLSFinal
		}
	default:
		if rolledOut(live, ds) {
			step = HandlerTLSEnforce
		}
	}
	switch step {
	case HandlerTLSEnforce:
		withFlag(ds)
	case HandlerTLSFinal:
		withoutOldCert(withFlag(ds))
	}
	return HandlerTLS{Step: step, Settled: live != nil && rolledOut(live, ds)}
}

// rolledOut reports whether live is the form want (the parts the staged
// rollout changes, at want's deployment) and the DaemonSet controller has
// rolled it out: its generation seen, every scheduled pod updated and
// available.
func rolledOut(live, want *appsv1.DaemonSet) bool {
	if hasFlag(live) != hasFlag(want) || hasOldCert(live) != hasOldCert(want) {
		return false
	}
	id := vocab.InstallStrategyIdentifierAnnotation
	if live.Spec.Template.Annotations[id] != want.Spec.Template.Annotations[id] {
		return false
	}
	st := live.Status
	return st.ObservedGeneration >= live.Generation &&
		st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberAvailable == st.DesiredNumberScheduled
}

func hasFlag(ds *appsv1.DaemonSet) bool {
	cs := ds.Spec.Template.Spec.Containers
	return len(cs) > 0 && slices.ContainsFunc(cs[0].Args, func(a string) bool { return strings.Contains(a, "migration-cn-types") })
}

func hasOldCert(ds *appsv1.DaemonSet) bool {
	return slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == OldHandlerClientCertVolume })
}

// withFlag appends the flag to virt-handler's arguments, as upstream
// (after its other arguments), unless it is there.
func withFlag(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	if !hasFlag(ds) && len(ds.Spec.Template.Spec.Containers) > 0 {
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Args = append(slices.Clip(c.Args), MigrationCNTypesFlag, MigrationCNTypesValue)
	}
	return ds
}

// withoutOldCert removes the old client certificate's volume and
// virt-handler's mount of it.
func withoutOldCert(ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	pod := &ds.Spec.Template.Spec
	pod.Volumes = slices.DeleteFunc(slices.Clone(pod.Volumes), func(v corev1.Volume) bool { return v.Name == OldHandlerClientCertVolume })
	if len(pod.Containers) > 0 {
		c := &pod.Containers[0]
		c.VolumeMounts = slices.DeleteFunc(slices.Clone(c.VolumeMounts), func(m corev1.VolumeMount) bool { return m.Name == OldHandlerClientCertVolume })
	}
	return ds
}
