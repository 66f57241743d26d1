// Package adopt holds the decisions of taking over an installation made by
// upstream's virt-operator, and of handing it back: whether an installation
// is upstream's, whether it may be taken over (upstream's operator gone, its
// release in virtop's catalog, no upgrade the user did not ask for), the
// managed-fields rewrite that makes virtop's field manager own what
// upstream's owned, the record kept on the KubeVirt resource, and the
// metadata a hand back restores. It reads nothing but its arguments; the
// controller (internal/controller/adopt.go) and `virtop handback`
// (internal/cli) do the reads and writes.
package adopt

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// ByUpstream reports whether an object carries upstream's operator's
// managed-by label.
func ByUpstream(labels map[string]string) bool {
	return labels[vocab.ManagedByLabel] == vocab.UpstreamManagedByValue
}

// operatorImage reports whether an image is upstream's virt-operator
// (<registry>/virt-operator[:tag|@digest]).
func operatorImage(image string) bool {
	name := image
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name == vocab.VirtOperator || strings.HasSuffix(name, "/"+vocab.VirtOperator)
}

func runsOperator(spec corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		if operatorImage(c.Image) {
			return true
		}
	}
	return false
}

// RunningOperators names what still runs upstream's operator: Deployments
// whose pod template runs upstream's virt-operator image and that want or
// have replicas, and pods of that image that have not finished. Empty
// means upstream's operator is gone.
func RunningOperators(deps []appsv1.Deployment, pods []corev1.Pod) []string {
	var out []string
	for _, d := range deps {
		want := d.Spec.Replicas == nil || *d.Spec.Replicas > 0
		if runsOperator(d.Spec.Template.Spec) && (want || d.Status.Replicas > 0) {
			out = append(out, "Deployment "+d.Namespace+"/"+d.Name)
		}
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && runsOperator(p.Spec) {
			out = append(out, "Pod "+p.Namespace+"/"+p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// virtopImage reports whether an image is virtop's
// (<registry>/virtop[:tag|@digest]).
func virtopImage(image string) bool {
	if i := strings.LastIndex(image, "/"); i >= 0 {
		image = image[i+1:]
	}
	return image == "virtop" || strings.HasPrefix(image, "virtop:") || strings.HasPrefix(image, "virtop@")
}

// VirtopOperators names the Deployments that run virtop's image and want
// or have replicas: virtop's operator, which would take every object back
// from a hand back, and which must not run beside upstream's.
func VirtopOperators(deps []appsv1.Deployment) []string {
	var out []string
	for _, d := range deps {
		want := d.Spec.Replicas == nil || *d.Spec.Replicas > 0
		if !want && d.Status.Replicas == 0 {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if virtopImage(c.Image) {
				out = append(out, "Deployment "+d.Namespace+"/"+d.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// Refusal says why an upstream installation is not taken over; nothing is
// changed while it holds.
type Refusal struct {
	Reason, Message string
}

// Check decides whether an installation made by upstream's operator may be
// taken over for a target version: upstream's operator must be gone (two
// operators would fight over every object), the release upstream runs
// must be one virtop renders, and an unset spec.imageTag must not turn the
// takeover into an upgrade the user did not ask for. nil means adopt.
func Check(kv *kvv1.KubeVirt, target string, versions []string, running []string) *Refusal {
	if len(running) > 0 {
		return &Refusal{Reason: kvv1.ReasonUpstreamOperatorRunning, Message: fmt.Sprintf(
			"The KubeVirt installation was made by upstream's virt-operator, which still runs (%s); two operators would fight over every object. Scale it to zero (or replace it with virtop's operator Deployment) and virtop takes the installation over; nothing was changed",
			strings.Join(running, ", "))}
	}
	observed := kv.Status.ObservedKubeVirtVersion
	if observed == "" {
		observed = kv.Status.TargetKubeVirtVersion
	}
	if !slices.Contains(versions, observed) {
		return &Refusal{Reason: kvv1.ReasonAdoptionNotInCatalog, Message: fmt.Sprintf(
			"The KubeVirt installation was made by upstream's virt-operator at release %q, which this virtop cannot render (it renders %s); nothing was changed. Upgrade it with upstream's operator to one of those releases first",
			observed, strings.Join(versions, ", "))}
	}
	if kv.Spec.ImageTag == "" && target != observed {
		return &Refusal{Reason: kvv1.ReasonAdoptionWouldUpgrade, Message: fmt.Sprintf(
			"The KubeVirt installation was made by upstream's virt-operator at %s and spec.imageTag is unset, so virtop would install its default %s: set spec.imageTag to %s to take it over as it is (or to a newer release to upgrade as well); nothing was changed",
			observed, target, observed)}
	}
	return nil
}

// Record is what the KubeVirt resource keeps of upstream's deployment once
// taken over (the AdoptedFromAnnotation): a hand back at the same release
// restores it, so upstream's operator finds its own deployment ID.
type Record struct {
	Version      string `json:"version"`
	Registry     string `json:"registry"`
	DeploymentID string `json:"deploymentID"`
	// DeploymentConfig is upstream's status.observedDeploymentConfig.
	DeploymentConfig string `json:"deploymentConfig,omitempty"`
	// Virtop is virtop's deployment ID when it took over. While virtop's
	// deployment keeps that ID, the pod templates upstream wrote stay as
	// they are (KeepsTemplate); "" in records of virtop releases that
	// rewrote them at adoption.
	Virtop string `json:"virtopDeploymentID,omitempty"`
}

// RecordOf is the record of upstream's deployment as its status shows it.
func RecordOf(kv *kvv1.KubeVirt) Record {
	return Record{
		Version:          kv.Status.ObservedKubeVirtVersion,
		Registry:         kv.Status.ObservedKubeVirtRegistry,
		DeploymentID:     kv.Status.ObservedDeploymentID,
		DeploymentConfig: kv.Status.ObservedDeploymentConfig,
	}
}

// String is the annotation's value.
func (r Record) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}

// Adopted returns the record of a KubeVirt resource virtop took over; ok
// is false for one it did not.
func Adopted(kv *kvv1.KubeVirt) (Record, bool, error) {
	v, ok := kv.Annotations[vocab.AdoptedFromAnnotation]
	if !ok {
		return Record{}, false, nil
	}
	var r Record
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Record{}, true, fmt.Errorf("annotation %s of KubeVirt %s/%s: %w", vocab.AdoptedFromAnnotation, kv.Namespace, kv.Name, err)
	}
	return r, true, nil
}

// TakeOverPatch is the JSON patch that moves the fields upstream's
// operator owns (its Update entries in managedFields) to virtop's apply
// field manager, so that virtop's next server-side apply replaces them
// rather than merging with them: a field upstream set and virtop's object
// does not hold is removed by that apply. nil when upstream owns nothing.
// The patch carries the resourceVersion: a concurrent change conflicts.
//
// With keepTemplate (a workload whose pod template stays upstream's, see
// KeepsTemplate) the fields under spec.template stay with upstream's
// manager: virtop's apply then leaves the template out and it stays as
// upstream wrote it, where owning it would make an apply that leaves it
// out remove it.
func TakeOverPatch(live *unstructured.Unstructured, keepTemplate bool) ([]byte, error) {
	if !keepTemplate {
		return csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(vocab.UpstreamFieldManager), vocab.FieldManager)
	}
	var kept []metav1.ManagedFieldsEntry
	entries := make([]metav1.ManagedFieldsEntry, 0, len(live.GetManagedFields()))
	for _, e := range live.GetManagedFields() {
		if !upstreamEntry(e) {
			entries = append(entries, e)
			continue
		}
		tmpl, rest, err := splitTemplate(e)
		if err != nil {
			return nil, err
		}
		if tmpl.Empty() {
			entries = append(entries, e)
			continue
		}
		k := *e.DeepCopy()
		if err := setFields(&k, tmpl); err != nil {
			return nil, err
		}
		kept = append(kept, k)
		if rest.Empty() {
			continue
		}
		r := *e.DeepCopy()
		if err := setFields(&r, rest); err != nil {
			return nil, err
		}
		entries = append(entries, r)
	}
	moved := live.DeepCopy()
	moved.SetManagedFields(entries)
	if err := csaupgrade.UpgradeManagedFields(moved, sets.New(vocab.UpstreamFieldManager), vocab.FieldManager); err != nil {
		return nil, err
	}
	out := append(moved.GetManagedFields(), kept...)
	if equality.Semantic.DeepEqual(out, live.GetManagedFields()) {
		return nil, nil
	}
	return json.Marshal([]map[string]interface{}{
		{"op": "replace", "path": "/metadata/managedFields", "value": out},
		// As csaupgrade does: a concurrent change conflicts (409).
		{"op": "replace", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
	})
}

// templatePath is where a workload's pod template lives.
var templatePath = fieldpath.MakePathOrDie("spec", "template")

// upstreamEntry reports whether a managed-fields entry is upstream's
// operator's (an update of the main resource).
func upstreamEntry(e metav1.ManagedFieldsEntry) bool {
	return e.Manager == vocab.UpstreamFieldManager && e.Operation == metav1.ManagedFieldsOperationUpdate && e.Subresource == "" && e.FieldsV1 != nil
}

// splitTemplate splits an entry's fields into those under spec.template
// and the others.
func splitTemplate(e metav1.ManagedFieldsEntry) (tmpl, rest *fieldpath.Set, err error) {
	var all fieldpath.Set
	if err := all.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
		return nil, nil, fmt.Errorf("managed fields of %s: %w", e.Manager, err)
	}
	tmpl, rest = &fieldpath.Set{}, &fieldpath.Set{}
	all.Iterate(func(p fieldpath.Path) {
		if len(p) >= len(templatePath) && p[:len(templatePath)].Equals(templatePath) {
			tmpl.Insert(p)
		} else {
			rest.Insert(p)
		}
	})
	return tmpl, rest, nil
}

func setFields(e *metav1.ManagedFieldsEntry, s *fieldpath.Set) error {
	raw, err := s.ToJSON()
	if err != nil {
		return err
	}
	e.FieldsV1 = &metav1.FieldsV1{Raw: raw}
	return nil
}

// TemplateByUpstream reports whether upstream's operator still owns fields
// of a workload's pod template: the template is as upstream wrote it
// (virtop's takeover left it, see TakeOverPatch).
func TemplateByUpstream(live *unstructured.Unstructured) bool {
	for _, e := range live.GetManagedFields() {
		if !upstreamEntry(e) {
			continue
		}
		if tmpl, _, err := splitTemplate(e); err == nil && !tmpl.Empty() {
			return true
		}
	}
	return false
}

// KeepsTemplate reports whether a taken-over workload keeps the pod
// template upstream wrote: while virtop's deployment is the one it took
// over at (rec.Virtop is its ID) and upstream's manager still owns the
// template. A change of the deployment (an upgrade, another image or
// placement) renders virtop's template, which rolls the workload then.
func KeepsTemplate(rec Record, virtopID string, live *unstructured.Unstructured) bool {
	return live != nil && rec.Virtop != "" && rec.Virtop == virtopID && TemplateByUpstream(live)
}

// HandBackPatch is the merge patch that leaves a virtop-managed object for
// upstream's operator: upstream's managed-by label, none of virtop's own
// labels and annotations (virtop.dev/...), and, when rec is upstream's deployment at
// the release that runs, upstream's install-strategy identifier, so
// upstream's operator finds its objects as it left them. Pod templates
// are not touched (a change there would roll the workload). nil when the
// object is not virtop's or needs nothing.
//
// At that release the object also gets upstream's kubevirt.io/generation
// annotation back, the KubeVirt resource's generation (virtop's apply
// removed it): upstream's operator wants it on every object it manages
// (injectOperatorMetadata) and, finding it missing, rewrites every object
// in its first pass and reports Available=False meanwhile. The kinds
// upstream's customizer patches (CustomizedKind) get its
// kubevirt.io/customizer-identifier back too, customizer (see
// CustomizerIdentifier), which virtop's apply removed as well: missing on
// virt-handler's DaemonSet, upstream's operator (v1.8.4) takes it for a
// changed DaemonSet, starts a canary upgrade and ends its first pass
// unfinished, Available=False until the next.
func HandBackPatch(live *unstructured.Unstructured, rec *Record, generation int64, customizer string) ([]byte, error) {
	if live.GetLabels()[vocab.ManagedByLabel] != vocab.ManagedByValue {
		return nil, nil
	}
	ann := map[string]interface{}{}
	for k := range live.GetAnnotations() {
		if strings.HasPrefix(k, vocab.VirtopKeyPrefix) {
			ann[k] = nil
		}
	}
	a := live.GetAnnotations()
	// virtop's strategy ConfigMap keeps virtop's identifier: upstream's
	// operator loads the newest strategy ConfigMap whose identifier is its
	// deployment ID, which must be its own (it re-renders it when gone).
	_, strategyCM := live.GetLabels()[vocab.InstallStrategyLabel]
	if rec != nil && rec.DeploymentID != "" && a[vocab.InstallStrategyIdentifierAnnotation] != "" && !strategyCM &&
		a[vocab.InstallStrategyVersionAnnotation] == rec.Version {
		ann[vocab.InstallStrategyIdentifierAnnotation] = rec.DeploymentID
		ann[vocab.UpstreamGenerationAnnotation] = strconv.FormatInt(generation, 10)
		if customizer != "" && CustomizedKind(live.GetKind()) {
			ann[vocab.UpstreamCustomizerAnnotation] = customizer
		}
	}
	labels := map[string]interface{}{vocab.ManagedByLabel: vocab.UpstreamManagedByValue}
	for k := range live.GetLabels() {
		if strings.HasPrefix(k, vocab.VirtopKeyPrefix) {
			labels[k] = nil
		}
	}
	meta := map[string]interface{}{"labels": labels}
	if len(ann) > 0 {
		meta["annotations"] = ann
	}
	return json.Marshal(map[string]interface{}{"metadata": meta})
}

// HandBackStatus is the KubeVirt status upstream's operator should find:
// at the release upstream ran, its own deployment ID and config (it then
// sees its deployment in place and rolls nothing); after an upgrade under
// virtop, the status virtop wrote (upstream's operator computes a new ID
// and applies its strategy, as after any change).
func HandBackStatus(st kvv1.KubeVirtStatus, rec *Record) kvv1.KubeVirtStatus {
	out := *st.DeepCopy()
	if rec == nil || rec.DeploymentID == "" || rec.Version != st.ObservedKubeVirtVersion || rec.Registry != st.ObservedKubeVirtRegistry {
		return out
	}
	out.ObservedDeploymentID = rec.DeploymentID
	out.TargetDeploymentID = rec.DeploymentID
	if rec.DeploymentConfig != "" {
		out.ObservedDeploymentConfig = rec.DeploymentConfig
		out.TargetDeploymentConfig = rec.DeploymentConfig
	}
	return out
}

// CustomizedKind reports whether upstream's customizer patches objects of
// the kind, recording its identifier on each: Deployments, DaemonSets,
// Services, webhook configurations, APIServices and (certificate) Secrets.
func CustomizedKind(kind string) bool {
	switch kind {
	case "Deployment", "DaemonSet", "Service", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "APIService", "Secret":
		return true
	}
	return false
}

// CustomizerIdentifier is the identifier upstream's operator records in
// kubevirt.io/customizer-identifier for spec.customizeComponents: the
// hex SHA-1 of its JSON, the patches ordered (stably) by the length of
// their patch document. With no customization it is the SHA-1 of "{}".
func CustomizerIdentifier(cc kvv1.CustomizeComponents) (string, error) {
	cc = *cc.DeepCopy()
	sort.SliceStable(cc.Patches, func(i, j int) bool { return len(cc.Patches[i].Patch) < len(cc.Patches[j].Patch) })
	b, err := json.Marshal(cc)
	if err != nil {
		return "", fmt.Errorf("spec.customizeComponents: %w", err)
	}
	// #nosec G401 -- an identifier upstream's operator compares, not a secret.
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:]), nil
}
