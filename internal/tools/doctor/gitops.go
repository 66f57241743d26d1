package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// The labels and annotations by which Flux and Argo CD mark what they
// apply (Flux's kustomize-controller and helm-controller, Argo CD's
// instance label and annotation tracking).
const (
	fluxKSName        = "kustomize.toolkit.fluxcd.io/name"
	fluxKSNamespace   = "kustomize.toolkit.fluxcd.io/namespace"
	fluxHRName        = "helm.toolkit.fluxcd.io/name"
	fluxHRNamespace   = "helm.toolkit.fluxcd.io/namespace"
	argoInstanceLabel = "argocd.argoproj.io/instance"
	argoTrackingID    = "argocd.argoproj.io/tracking-id"
)

// Kinds of GitOps owner.
const (
	KindKustomization = "Kustomization"
	KindHelmRelease   = "HelmRelease"
	KindApplication   = "Application"
)

// ownerAPIs are the served versions doctor reads each owner kind at,
// newest first.
var ownerAPIs = map[string][]schema.GroupVersionKind{
	KindKustomization: {
		{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: KindKustomization},
		{Group: "kustomize.toolkit.fluxcd.io", Version: "v1beta2", Kind: KindKustomization},
	},
	KindHelmRelease: {
		{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: KindHelmRelease},
		{Group: "helm.toolkit.fluxcd.io", Version: "v2beta2", Kind: KindHelmRelease},
		{Group: "helm.toolkit.fluxcd.io", Version: "v2beta1", Kind: KindHelmRelease},
	},
	KindApplication: {{Group: "argoproj.io", Version: "v1alpha1", Kind: KindApplication}},
}

// ownerResource is the fully qualified resource name of an owner kind,
// for hints.
var ownerResource = map[string]string{
	KindKustomization: "kustomizations.kustomize.toolkit.fluxcd.io",
	KindHelmRelease:   "helmreleases.helm.toolkit.fluxcd.io",
	KindApplication:   "applications.argoproj.io",
}

// fluxSourceVersions are the versions of source.toolkit.fluxcd.io tried
// for a Flux owner's source.
var fluxSourceVersions = []string{"v1", "v1beta2"}

// GitOpsFacts are the GitOps owners of the KubeVirt resource and of the
// operator's objects.
type GitOpsFacts struct {
	// Examined are the objects whose labels and annotations were read
	// ("KubeVirt kubevirt/kubevirt").
	Examined []string
	// Owners are the owners they name, each read.
	Owners []GitOpsOwner
}

// GitOpsOwner is a Flux Kustomization or HelmRelease, or an Argo CD
// Application, that applies some of the examined objects.
type GitOpsOwner struct {
	Kind            string
	Namespace, Name string
	// Objects are the examined objects it applies, and Via how they say
	// so (the label or annotation).
	Objects []string
	Via     string
	// Err is why it could not be read: ErrAbsent when its API is not
	// served, a NotFound when it does not exist.
	Err error

	// Ready is Flux's Ready condition status, or Argo CD's health status.
	Ready           string
	Reason, Message string
	// Since is when Ready last changed (Flux), or when the last sync
	// operation finished (Argo CD).
	Since     time.Time
	Stalled   string
	Suspended bool
	// Sync is Argo CD's sync status; Operation its last operation's phase
	// and message; Errors its error conditions.
	Sync      string
	Operation string
	Errors    []string
	// Source is what it builds from; SourceProblem says when that source
	// is not Ready itself (Flux).
	Source        string
	SourceProblem string
	// Revision is the last applied (Flux) or synced (Argo CD) revision.
	Revision string
}

// String names the owner: "Flux Kustomization flux-system/kubevirt".
func (o GitOpsOwner) String() string {
	tool := "Flux"
	if o.Kind == KindApplication {
		tool = "Argo CD"
	}
	return fmt.Sprintf("%s %s %s/%s", tool, o.Kind, o.Namespace, o.Name)
}

// ownerRef is one owner an object's labels or annotations name.
type ownerRef struct {
	kind, namespace, name, via string
	// anyNamespace: Argo CD's instance label names no namespace.
	anyNamespace bool
}

func (r ownerRef) key() string { return r.kind + " " + r.namespace + "/" + r.name }

// ownerRefs reads what an object's labels and annotations say applies it.
func ownerRefs(labels, annotations map[string]string) []ownerRef {
	var out []ownerRef
	if n := labels[fluxKSName]; n != "" {
		out = append(out, ownerRef{kind: KindKustomization, name: n, namespace: labels[fluxKSNamespace], via: "labels " + fluxKSName + ", " + fluxKSNamespace})
	}
	if n := labels[fluxHRName]; n != "" {
		out = append(out, ownerRef{kind: KindHelmRelease, name: n, namespace: labels[fluxHRNamespace], via: "labels " + fluxHRName + ", " + fluxHRNamespace})
	}
	argo := ""
	via := ""
	if id := annotations[argoTrackingID]; id != "" {
		// <app>:<group>/<kind>:<namespace>/<name>
		if i := strings.Index(id, ":"); i > 0 {
			argo, via = id[:i], "annotation "+argoTrackingID
		}
	}
	if argo == "" && labels[argoInstanceLabel] != "" {
		argo, via = labels[argoInstanceLabel], "label "+argoInstanceLabel
	}
	if argo != "" {
		r := ownerRef{kind: KindApplication, name: argo, via: via, anyNamespace: true}
		// Applications outside Argo CD's namespace are named <ns>_<name>.
		if i := strings.Index(argo, "_"); i > 0 {
			r.namespace, r.name, r.anyNamespace = argo[:i], argo[i+1:], false
		}
		out = append(out, r)
	}
	return out
}

// gatherGitOps finds the GitOps owners of the KubeVirt resources, the
// virt-operator Deployment, the install namespace and the KubeVirt CRD,
// and reads each owner and its source. Absent APIs mean no owner.
func (g *Gatherer) gatherGitOps(ctx context.Context, f *Facts) {
	type examined struct {
		name                string
		labels, annotations map[string]string
	}
	var objs []examined
	for _, kv := range f.kubeVirtsIn(f.Where.Namespace) {
		objs = append(objs, examined{"KubeVirt " + kv.Namespace + "/" + kv.Name, kv.Labels, kv.Annotations})
	}
	if d := f.deployment(vocab.VirtOperator); d != nil {
		objs = append(objs, examined{"Deployment " + d.Namespace + "/" + d.Name, d.Labels, d.Annotations})
	}
	if f.Namespace != nil && f.readErr(ReadNamespace) == nil {
		objs = append(objs, examined{"Namespace " + f.Namespace.Name, f.Namespace.Labels, f.Namespace.Annotations})
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	switch err := g.Client.Get(ctx, client.ObjectKey{Name: kubeVirtCRD}, crd); {
	case err == nil:
		objs = append(objs, examined{"CustomResourceDefinition " + kubeVirtCRD, crd.Labels, crd.Annotations})
	case apierrors.IsNotFound(err):
	default:
		f.Reads[ReadCRD] = classify(err)
	}

	byKey := map[string]*GitOpsOwner{}
	var order []string
	for _, o := range objs {
		f.GitOps.Examined = append(f.GitOps.Examined, o.name)
		for _, r := range ownerRefs(o.labels, o.annotations) {
			if r.namespace == "" && !r.anyNamespace {
				r.namespace = f.Where.Namespace
			}
			k := r.key()
			if byKey[k] == nil {
				byKey[k] = &GitOpsOwner{Kind: r.kind, Namespace: r.namespace, Name: r.name, Via: r.via}
				order = append(order, k)
				g.readOwner(ctx, byKey[k], r)
			}
			byKey[k].Objects = append(byKey[k].Objects, o.name)
		}
	}
	for _, k := range order {
		f.GitOps.Owners = append(f.GitOps.Owners, *byKey[k])
	}
}

// readOwner reads an owner at the first served version of its kind.
func (g *Gatherer) readOwner(ctx context.Context, o *GitOpsOwner, r ownerRef) {
	var obj *unstructured.Unstructured
	err := ErrAbsent
	for _, gvk := range ownerAPIs[r.kind] {
		if r.anyNamespace {
			obj, err = g.findApplication(ctx, gvk, r.name)
		} else {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			err = g.Client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: r.name}, u)
			obj = u
		}
		if err = classifyOwner(err); !errors.Is(err, ErrAbsent) {
			break
		}
	}
	if err != nil {
		o.Err = err
		return
	}
	o.Namespace = obj.GetNamespace()
	if r.kind == KindApplication {
		readApplication(o, obj)
		return
	}
	readFluxOwner(o, obj)
	g.readFluxSource(ctx, o, obj)
}

// findApplication finds an Argo CD Application by name in any namespace
// (Argo CD's instance label and tracking id name no namespace for
// Applications in its own).
func (g *Gatherer) findApplication(ctx context.Context, gvk schema.GroupVersionKind, name string) (*unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err := g.Client.List(ctx, l, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if apierrors.IsForbidden(err) {
		// Not allowed across namespaces: try Argo CD's usual one.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if gerr := g.Client.Get(ctx, client.ObjectKey{Namespace: "argocd", Name: name}, u); gerr == nil {
			return u, nil
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	switch len(l.Items) {
	case 0:
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: "applications"}, name)
	case 1:
		return &l.Items[0], nil
	}
	var where []string
	for _, it := range l.Items {
		where = append(where, it.GetNamespace())
	}
	return nil, fmt.Errorf("%d Applications named %s (namespaces %s): cannot tell which applies it", len(l.Items), name, strings.Join(where, ", "))
}

// classifyOwner maps a read error of an owner: ErrAbsent for an API not
// served, the error otherwise.
func classifyOwner(err error) error {
	if err == nil {
		return nil
	}
	if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && isNoResource(err) {
		return ErrAbsent
	}
	return err
}

func readFluxOwner(o *GitOpsOwner, u *unstructured.Unstructured) {
	o.Suspended, _, _ = unstructured.NestedBool(u.Object, "spec", "suspend")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch typ {
		case "Ready":
			o.Ready, o.Reason, o.Message = status, reason, oneLine(msg)
			if ts, _ := m["lastTransitionTime"].(string); ts != "" {
				o.Since, _ = time.Parse(time.RFC3339, ts)
			}
		case "Stalled":
			if status == "True" {
				o.Stalled = reason + ": " + oneLine(msg)
			}
		}
	}
	o.Revision, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
	if o.Revision == "" {
		o.Revision, _, _ = unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	}
	kind, name, ns := fluxSourceRef(o.Kind, u)
	if kind == "" {
		return
	}
	o.Source = fmt.Sprintf("%s %s/%s", kind, ns, name)
	if p, _, _ := unstructured.NestedString(u.Object, "spec", "path"); p != "" {
		o.Source += " path " + p
	}
	if ch, _, _ := unstructured.NestedString(u.Object, "spec", "chart", "spec", "chart"); ch != "" {
		o.Source += " chart " + ch
	}
}

// fluxSourceRef is what a Kustomization (spec.sourceRef) or HelmRelease
// (spec.chartRef, or spec.chart.spec.sourceRef) builds from; its namespace
// defaults to the owner's.
func fluxSourceRef(kind string, u *unstructured.Unstructured) (string, string, string) {
	paths := [][]string{{"spec", "sourceRef"}}
	if kind == KindHelmRelease {
		paths = [][]string{{"spec", "chartRef"}, {"spec", "chart", "spec", "sourceRef"}}
	}
	for _, p := range paths {
		ref, found, _ := unstructured.NestedStringMap(u.Object, p...)
		if !found || ref["kind"] == "" {
			continue
		}
		ns := ref["namespace"]
		if ns == "" {
			ns = u.GetNamespace()
		}
		return ref["kind"], ref["name"], ns
	}
	return "", "", ""
}

// readFluxSource reads the Ready condition of a Flux owner's source: a
// source that cannot fetch is often why the owner cannot build.
func (g *Gatherer) readFluxSource(ctx context.Context, o *GitOpsOwner, owner *unstructured.Unstructured) {
	kind, name, ns := fluxSourceRef(o.Kind, owner)
	if kind == "" {
		return
	}
	for _, v := range fluxSourceVersions {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: v, Kind: kind})
		err := g.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
		if errors.Is(classifyOwner(err), ErrAbsent) {
			continue
		}
		if err != nil {
			if apierrors.IsNotFound(err) {
				o.SourceProblem = fmt.Sprintf("its source %s %s/%s does not exist", kind, ns, name)
			}
			return
		}
		if url, _, _ := unstructured.NestedString(u.Object, "spec", "url"); url != "" {
			o.Source += " from " + url
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "False" {
				reason, _ := m["reason"].(string)
				msg, _ := m["message"].(string)
				o.SourceProblem = fmt.Sprintf("its source %s %s/%s is not Ready either (%s: %s)", kind, ns, name, reason, oneLine(msg))
			}
		}
		return
	}
}

func readApplication(o *GitOpsOwner, u *unstructured.Unstructured) {
	o.Ready, _, _ = unstructured.NestedString(u.Object, "status", "health", "status")
	o.Message, _, _ = unstructured.NestedString(u.Object, "status", "health", "message")
	o.Message = oneLine(o.Message)
	o.Sync, _, _ = unstructured.NestedString(u.Object, "status", "sync", "status")
	o.Revision, _, _ = unstructured.NestedString(u.Object, "status", "sync", "revision")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "phase")
	opMsg, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "message")
	if phase != "" {
		o.Operation = phase
		if opMsg != "" {
			o.Operation += ": " + oneLine(opMsg)
		}
	}
	if ts, _, _ := unstructured.NestedString(u.Object, "status", "operationState", "finishedAt"); ts != "" {
		o.Since, _ = time.Parse(time.RFC3339, ts)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		msg, _ := m["message"].(string)
		if strings.HasSuffix(typ, "Error") {
			o.Errors = append(o.Errors, typ+": "+oneLine(msg))
		}
	}
	sources, _, _ := unstructured.NestedSlice(u.Object, "spec", "sources")
	if src, found, _ := unstructured.NestedMap(u.Object, "spec", "source"); found {
		sources = append([]any{src}, sources...)
	}
	var descs []string
	for _, s := range sources {
		m, _ := s.(map[string]any)
		repo, _ := m["repoURL"].(string)
		d := repo
		if p, _ := m["path"].(string); p != "" {
			d += " path " + p
		}
		if ch, _ := m["chart"].(string); ch != "" {
			d += " chart " + ch
		}
		if rev, _ := m["targetRevision"].(string); rev != "" {
			d += " at " + rev
		}
		if d != "" {
			descs = append(descs, d)
		}
	}
	o.Source = strings.Join(descs, "; ")
}

// maxMessage bounds a GitOps tool's message in the evidence (kustomize
// build errors run long).
const maxMessage = 400

// oneLine collapses whitespace and bounds a message.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxMessage {
		s = s[:maxMessage] + "…"
	}
	return s
}

// judgement of one owner.
type ownerState int

const (
	ownerOK ownerState = iota
	ownerWarn
	ownerFailed
)

// judge says whether an owner is healthy, and describes it.
func (f *Facts) judge(o GitOpsOwner) (ownerState, string) {
	applies := strings.Join(o.Objects, ", ")
	switch {
	case errors.Is(o.Err, ErrAbsent):
		return ownerWarn, fmt.Sprintf("%s applies %s (by its %s), but the %s API is not served: nothing applies changes to it from its source any more", o, applies, o.Via, o.Kind)
	case apierrors.IsNotFound(o.Err):
		return ownerWarn, fmt.Sprintf("%s applies %s (by its %s), but does not exist: nothing applies changes to it from its source any more", o, applies, o.Via)
	case o.Err != nil:
		return ownerWarn, fmt.Sprintf("%s applies %s, but could not be read: %v", o, applies, o.Err)
	}
	src := ""
	if o.Source != "" {
		src = "; it builds from " + o.Source
		if o.Kind == KindApplication {
			src = "; its source: " + o.Source
		}
	}
	if o.SourceProblem != "" {
		src += "; " + o.SourceProblem
	}
	rev := ""
	if o.Revision != "" {
		rev = ", revision " + o.Revision
	}
	if o.Kind == KindApplication {
		return f.judgeApplication(o, applies, src, rev)
	}
	since := ""
	if !o.Since.IsZero() {
		since = " since " + f.whenAgo(o.Since)
	}
	switch {
	case o.Suspended:
		return ownerWarn, fmt.Sprintf("%s, which applies %s, is suspended: changes to its source are not applied%s", o, applies, src)
	case o.Ready == "False" || o.Stalled != "":
		why := o.Reason + ": " + o.Message
		if o.Stalled != "" && o.Ready != "False" {
			why = "Stalled " + o.Stalled
		}
		return ownerFailed, fmt.Sprintf("%s, which applies %s, is not Ready%s: %s; changes to it are not applied%s", o, applies, since, why, src)
	case o.Ready == "True":
		return ownerOK, fmt.Sprintf("%s applies %s: Ready%s%s", o, applies, rev, src)
	case o.Ready == "Unknown":
		return ownerOK, fmt.Sprintf("%s applies %s: reconciling (%s: %s)%s", o, applies, o.Reason, o.Message, src)
	}
	return ownerWarn, fmt.Sprintf("%s applies %s, but reports no Ready condition: its controller has not reconciled it%s", o, applies, src)
}

func (f *Facts) judgeApplication(o GitOpsOwner, applies, src, rev string) (ownerState, string) {
	state := fmt.Sprintf("health %s, sync %s", orUnknown(o.Ready), orUnknown(o.Sync))
	var why []string
	if o.Message != "" {
		why = append(why, o.Message)
	}
	if o.Operation != "" && !strings.HasPrefix(o.Operation, "Succeeded") && !strings.HasPrefix(o.Operation, "Running") {
		op := "last sync " + o.Operation
		if !o.Since.IsZero() {
			op += " (" + f.whenAgo(o.Since) + ")"
		}
		why = append(why, op)
	}
	why = append(why, o.Errors...)
	detail := ""
	if len(why) > 0 {
		detail = ": " + strings.Join(why, "; ")
	}
	failedOp := strings.HasPrefix(o.Operation, "Failed") || strings.HasPrefix(o.Operation, "Error")
	switch {
	case o.Ready == "Degraded" || o.Ready == "Missing" || failedOp || len(o.Errors) > 0:
		return ownerFailed, fmt.Sprintf("%s, which applies %s, is %s (%s)%s%s", o, applies, orUnknown(o.Ready), state, detail, src)
	case o.Ready == "Suspended" || o.Ready == "Unknown" || o.Ready == "" || o.Sync == "OutOfSync":
		return ownerWarn, fmt.Sprintf("%s, which applies %s: %s%s%s", o, applies, state, detail, src)
	}
	return ownerOK, fmt.Sprintf("%s applies %s: %s%s%s", o, applies, state, rev, src)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// gitopsHint is the next command for an owner.
func (f *Facts) gitopsHint(o GitOpsOwner) string {
	get := f.kubectl("-n %s get %s %s -o yaml", o.Namespace, ownerResource[o.Kind], o.Name)
	switch o.Kind {
	case KindKustomization:
		return get + "; then flux reconcile kustomization " + o.Name + " -n " + o.Namespace + " --with-source"
	case KindHelmRelease:
		return get + "; then flux reconcile helmrelease " + o.Name + " -n " + o.Namespace + " --with-source"
	}
	return get + "; or argocd app get " + o.Namespace + "/" + o.Name
}

// kubeVirtOwners names the owners that apply a KubeVirt resource.
func (f *Facts) kubeVirtOwners() []string {
	var out []string
	for _, o := range f.GitOps.Owners {
		for _, obj := range o.Objects {
			if strings.HasPrefix(obj, "KubeVirt ") && o.Err == nil {
				out = append(out, o.String())
				break
			}
		}
	}
	return out
}

func checkGitOps(f *Facts) Check {
	c := Check{Name: CheckGitOps, Group: GroupCluster}
	if len(f.GitOps.Owners) == 0 {
		c.Status = OK
		examined := f.GitOps.Examined
		if len(examined) == 0 {
			examined = []string{"nothing (no KubeVirt resource, operator Deployment, namespace or CRD read)"}
		}
		c.Evidence = "no GitOps owner: no Flux or Argo CD label or tracking annotation on " + strings.Join(examined, ", ") + "."
		if err := f.readErr(ReadCRD); err != nil {
			c.Evidence += fmt.Sprintf(" (CustomResourceDefinition %s not read: %v)", kubeVirtCRD, err)
		}
		return c
	}
	var failed, warned, fine []string
	var hint, goneHint string
	var cause []string
	// gone: only owners that no longer exist (labels left behind after a
	// migration); that informs, it degrades nothing.
	gone := true
	for _, o := range f.GitOps.Owners {
		st, desc := f.judge(o)
		switch st {
		case ownerFailed:
			failed = append(failed, desc)
			cause = append(cause, desc)
			if hint == "" {
				hint = f.gitopsHint(o)
			}
		case ownerWarn:
			warned = append(warned, desc)
			if o.Err == nil {
				gone = false
				if hint == "" {
					hint = f.gitopsHint(o)
				}
			} else if goneHint == "" {
				goneHint = f.kubectl("get %s -A", ownerResource[o.Kind])
			}
		default:
			fine = append(fine, desc)
		}
	}
	sort.Strings(fine)
	all := append(append(append([]string{}, failed...), warned...), fine...)
	c.Evidence = strings.Join(all, "; ") + "."
	switch {
	case len(failed) > 0:
		c.Status = Fail
		c.cause = strings.Join(cause, "; ")
		c.Hint = hint
	case len(warned) > 0:
		c.Status = Warn
		c.Hint = hint
		if gone {
			c.Group = GroupInfo
			c.Hint = goneHint
		}
	default:
		c.Status = OK
	}
	return c
}
