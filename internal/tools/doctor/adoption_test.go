package doctor

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// labelComponents sets the managed-by label of the fixture's component
// workloads (virt-operator excepted) to value.
func labelComponents(f *Facts, value string, names ...string) {
	set := func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[vocab.ManagedByLabel] = value
	}
	for i := range f.Deployments {
		if d := &f.Deployments[i]; d.Name != vocab.VirtOperator && (len(names) == 0 || slices.Contains(names, d.Name)) {
			set(&d.ObjectMeta)
		}
	}
	for i := range f.DaemonSets {
		if d := &f.DaemonSets[i]; len(names) == 0 || slices.Contains(names, d.Name) {
			set(&d.ObjectMeta)
		}
	}
}

// operatorImage makes the fixture's virt-operator Deployment (and its pod)
// run image, with replicas.
func operatorImage(f *Facts, image string, replicas int32) {
	d := f.deployment(vocab.VirtOperator)
	d.Spec.Replicas = ptr.To(replicas)
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: image}}
	for i := range f.Pods {
		if f.Pods[i].Labels[vocab.AppLabel] == vocab.VirtOperator {
			f.Pods[i].Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: image}}
		}
	}
	if replicas == 0 {
		removePods(f, vocab.VirtOperator)
	}
}

// upstreamFacts is an installation upstream's operator made and still runs.
func upstreamFacts() *Facts {
	f := healthyFacts()
	labelComponents(f, vocab.UpstreamManagedByValue)
	operatorImage(f, "quay.io/kubevirt/virt-operator:v1.5.3", 1)
	return f
}

func refuse(f *Facts, reason, message string) {
	f.KubeVirts[0].Status.Conditions = append(f.KubeVirts[0].Status.Conditions,
		kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionSynchronized, Status: corev1.ConditionFalse, Reason: reason, Message: message})
}

func adopted(f *Facts, rec adopt.Record) {
	f.KubeVirts[0].Annotations = map[string]string{vocab.AdoptedFromAnnotation: rec.String()}
}

var upstreamRecord = adopt.Record{Version: "v1.5.3", Registry: "quay.io/kubevirt", DeploymentID: "id-1"}

// TestAdoptionRefused: each refusal reason fails adoption/refused with its
// message and its remedy, as a likely cause; an adoption that goes ahead
// (Synchronized not False) passes.
func TestAdoptionRefused(t *testing.T) {
	for _, tc := range []struct {
		reason, message string
		hint            []string
	}{
		{kvv1.ReasonUpstreamOperatorRunning, "upstream's virt-operator still runs (Deployment kubevirt/virt-operator)",
			[]string{"scale deployment/virt-operator --replicas=0", "docs/migrate.md"}},
		{kvv1.ReasonAdoptionNotInCatalog, `release "v1.2.0", which this virtop cannot render`,
			[]string{"virtop version", `patch kv kubevirt --type merge -p '{"spec":{"imageTag":"<release>"}}'`}},
		{kvv1.ReasonAdoptionWouldUpgrade, "spec.imageTag is unset",
			[]string{`patch kv kubevirt --type merge -p '{"spec":{"imageTag":"v1.5.3"}}'`}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			f := upstreamFacts()
			if tc.reason != kvv1.ReasonUpstreamOperatorRunning {
				operatorImage(f, "quay.io/kubevirt/virt-operator:v1.5.3", 0)
			}
			refuse(f, tc.reason, tc.message)
			r := Run(f)
			c := findCheck(t, r, CheckAdoptionRefused)
			t.Logf("%s: %s\n  hint: %s", c.Status, c.Evidence, c.Hint)
			if c.Status != Fail || !strings.Contains(c.Evidence, tc.reason) || !strings.Contains(c.Evidence, tc.message) {
				t.Errorf("adoption/refused %s: %s", c.Status, c.Evidence)
			}
			for _, h := range tc.hint {
				if !strings.Contains(c.Hint, h) {
					t.Errorf("hint %q lacks %q", c.Hint, h)
				}
			}
			if r.Verdict != Degraded || !hasCause(r, CheckAdoptionRefused, tc.reason) {
				t.Errorf("verdict %s, causes %+v", r.Verdict, r.Causes)
			}
		})
	}
	t.Run("accepted", func(t *testing.T) {
		f := upstreamFacts()
		operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 1)
		adopted(f, upstreamRecord)
		f.KubeVirts[0].Status.Conditions = append(f.KubeVirts[0].Status.Conditions,
			kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionSynchronized, Status: corev1.ConditionTrue, Reason: "AllResourcesCreated"})
		c := findCheck(t, Run(f), CheckAdoptionRefused)
		t.Logf("%s: %s", c.Status, c.Evidence)
		if c.Status != OK || c.Evidence != "no adoption refused." {
			t.Errorf("adoption/refused on an accepted adoption: %s %s", c.Status, c.Evidence)
		}
	})
}

// TestAdoptionInProgress: an accepted adoption under way (the record on
// the resource, the status still upstream's deployment) is reported with
// how far it got; without any operator running it warns; done, it says
// so; a refused one has no record and reports none.
func TestAdoptionInProgress(t *testing.T) {
	f := upstreamFacts()
	operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 1)
	adopted(f, upstreamRecord)
	labelComponents(f, vocab.ManagedByValue, vocab.VirtHandler)
	f.KubeVirts[0].Status.TargetDeploymentID = "virtop-id"
	c := findCheck(t, Run(f), CheckAdoptionProgress)
	t.Logf("in progress: %s: %s", c.Status, c.Evidence)
	if c.Status != OK || !strings.Contains(c.Evidence, "adoption of upstream's v1.5.3 (deployment id-1) in progress: 1 of 3 components labelled virtop") ||
		!strings.Contains(c.Evidence, "still upstream's: Deployment virt-api, Deployment virt-controller") {
		t.Errorf("adoption/in-progress: %s %s", c.Status, c.Evidence)
	}

	operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 0)
	f.OperatorLease = nil
	r := Run(f)
	c = findCheck(t, r, CheckAdoptionProgress)
	t.Logf("stalled: %s: %s", c.Status, c.Evidence)
	if c.Status != Warn || !strings.Contains(c.Evidence, "no operator runs") || !strings.Contains(c.Hint, "scale deployment/virt-operator --replicas=1") {
		t.Errorf("adoption/in-progress with no operator: %s %s (hint %s)", c.Status, c.Evidence, c.Hint)
	}

	f = upstreamFacts()
	operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 1)
	adopted(f, upstreamRecord)
	labelComponents(f, vocab.ManagedByValue)
	f.KubeVirts[0].Status.ObservedDeploymentID = "virtop-id"
	if c = findCheck(t, Run(f), CheckAdoptionProgress); c.Status != OK || !strings.Contains(c.Evidence, "adopted from upstream's v1.5.3") {
		t.Errorf("adoption/in-progress when done: %s %s", c.Status, c.Evidence)
	}

	f = upstreamFacts()
	refuse(f, kvv1.ReasonUpstreamOperatorRunning, "still runs")
	if c = findCheck(t, Run(f), CheckAdoptionProgress); c.Status != OK || !strings.Contains(c.Evidence, "no adoption recorded") {
		t.Errorf("adoption/in-progress when refused: %s %s", c.Status, c.Evidence)
	}
}

// TestUpstreamOwner: an installation still upstream's is said so (info,
// with the dry run to run first); upstream's operator beside virtop's, or
// running over virtop's objects, fails; virtop's installation passes.
func TestUpstreamOwner(t *testing.T) {
	f := upstreamFacts()
	r := Run(f)
	c := findCheck(t, r, CheckUpstreamOwner)
	t.Logf("upstream's: %s: %s\n  hint: %s", c.Status, c.Evidence, c.Hint)
	if c.Status != Warn || !strings.Contains(c.Evidence, "still upstream's virt-operator's") || !strings.Contains(c.Evidence, "its operator runs (Deployment kubevirt/virt-operator, Pod kubevirt/virt-operator-aaaaa)") ||
		!strings.Contains(c.Hint, "virtop adopt --dry-run -n kubevirt") {
		t.Errorf("adoption/upstream-owner: %s %s (hint %s)", c.Status, c.Evidence, c.Hint)
	}
	if r.Verdict != Healthy {
		t.Errorf("an upstream installation is not virtop's problem: verdict %s (%s)", r.Verdict, r.Reason)
	}

	// virtop's operator Deployment beside upstream's.
	f = upstreamFacts()
	d := f.deployment(vocab.VirtOperator).DeepCopy()
	d.Name = "virtop-operator"
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "virtop", Image: "ghcr.io/virtop-dev/virtop:v0.9.0"}}
	f.Deployments = append(f.Deployments, *d)
	r = Run(f)
	c = findCheck(t, r, CheckUpstreamOwner)
	t.Logf("both: %s: %s", c.Status, c.Evidence)
	if c.Status != Fail || !strings.Contains(c.Evidence, "both run") || r.Verdict != Degraded || !hasCause(r, CheckUpstreamOwner, "both run") {
		t.Errorf("two operators: %s %s, verdict %s", c.Status, c.Evidence, r.Verdict)
	}

	// Upstream's operator started again over an adopted installation.
	f = upstreamFacts()
	labelComponents(f, vocab.ManagedByValue)
	adopted(f, upstreamRecord)
	if c = findCheck(t, Run(f), CheckUpstreamOwner); c.Status != Fail || !strings.Contains(c.Evidence, "while virtop's label is on") {
		t.Errorf("upstream's operator over virtop's objects: %s %s", c.Status, c.Evidence)
	}

	f = healthyFacts()
	labelComponents(f, vocab.ManagedByValue)
	operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 1)
	if c = findCheck(t, Run(f), CheckUpstreamOwner); c.Status != OK || !strings.Contains(c.Evidence, "virtop manages the installation") {
		t.Errorf("virtop's installation: %s %s", c.Status, c.Evidence)
	}
}

// TestHandbackHalfDone: virtop's operator stopped, components relabelled
// for upstream while the adoption record stays (or components of both
// owners) fail with the command that finishes it; a finished hand back
// and a running virtop installation pass.
func TestHandbackHalfDone(t *testing.T) {
	half := func() *Facts {
		f := healthyFacts()
		labelComponents(f, vocab.ManagedByValue)
		labelComponents(f, vocab.UpstreamManagedByValue, vocab.VirtHandler)
		operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 0)
		f.OperatorLease = nil
		adopted(f, upstreamRecord)
		f.KubeVirts[0].Status.ObservedDeploymentID = "virtop-id"
		return f
	}
	r := Run(half())
	c := findCheck(t, r, CheckHandback)
	t.Logf("half done: %s: %s\n  hint: %s", c.Status, c.Evidence, c.Hint)
	if c.Status != Fail || !strings.Contains(c.Evidence, "upstream's label is back on DaemonSet virt-handler, virtop's still on Deployment virt-api, Deployment virt-controller") ||
		!strings.Contains(c.Evidence, "still holds virtop's adoption record of v1.5.3") || !strings.Contains(c.Hint, "virtop handback -n kubevirt") ||
		!hasCause(r, CheckHandback, "half done") {
		t.Errorf("adoption/handback: %s %s (hint %s)", c.Status, c.Evidence, c.Hint)
	}

	// Every object relabelled, the record gone, the status not restored
	// by a stop in between: two owners.
	f := half()
	f.KubeVirts[0].Annotations = nil
	if c = findCheck(t, Run(f), CheckHandback); c.Status != Fail || !strings.Contains(c.Evidence, "two owners") {
		t.Errorf("two owners: %s %s", c.Status, c.Evidence)
	}

	// Finished: every component upstream's, no record.
	f = half()
	f.KubeVirts[0].Annotations = nil
	labelComponents(f, vocab.UpstreamManagedByValue)
	if c = findCheck(t, Run(f), CheckHandback); c.Status != OK {
		t.Errorf("finished hand back: %s %s", c.Status, c.Evidence)
	}

	// virtop's operator runs: an adoption, not a hand back.
	f = half()
	operatorImage(f, "ghcr.io/virtop-dev/virtop:v0.9.0", 1)
	if c = findCheck(t, Run(f), CheckHandback); c.Status != OK {
		t.Errorf("virtop's operator running: %s %s", c.Status, c.Evidence)
	}

	// A first run left only the record (upstream's validator had no
	// backend): every component upstream's, upstream's deployment in the
	// status, no inventory. Not "an adoption began".
	f = half()
	labelComponents(f, vocab.UpstreamManagedByValue)
	f.KubeVirts[0].Status.ObservedDeploymentID = upstreamRecord.DeploymentID
	f.KubeVirts[0].Status.Generations = nil
	r = Run(f)
	c = findCheck(t, r, CheckHandback)
	t.Logf("record left: %s: %s\n  hint: %s", c.Status, c.Evidence, c.Hint)
	if c.Status != Fail || !strings.Contains(c.Evidence, "done but for virtop's adoption record") || !strings.Contains(c.Hint, "install upstream's operator") {
		t.Errorf("record left: %s %s (hint %s)", c.Status, c.Evidence, c.Hint)
	}
	if p := findCheck(t, r, CheckAdoptionProgress); p.Status != OK || !strings.Contains(p.Evidence, "handed back") {
		t.Errorf("adoption/in-progress with the record left: %s %s", p.Status, p.Evidence)
	}
}
