// Package adoptpreview reads a cluster and says what virtop's operator
// would do with the KubeVirt installation of a namespace if it ran now
// (`virtop adopt --dry-run`): whether it would take over an installation
// made by upstream's operator or refuse (and why), which objects it would
// take over in place, create, or leave to upstream, and which workloads
// would roll. It only reads: the decision and the plan come from the
// operator's own steps (controller.Reconciler.PreviewAdoption, on a client
// that refuses writes), never from a copy of their rules.
package adoptpreview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/capability"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/controller"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Options of Run.
type Options struct {
	Namespace string
	// Settings are the operator's settings that shape the strategy
	// (default version, runbook URL, passed-through environment); the
	// zero value is the release manifest's operator. Namespace is set
	// from Options.Namespace.
	Settings config.Settings
}

// ErrRefused: virtop's operator would not take the installation over now
// (a refusal, an invalid resource, nothing of upstream's to take over).
var ErrRefused = errors.New("adoption would not go ahead")

// Verdicts of a Report.
const (
	// Accepted: the operator would take the installation over.
	Accepted = "Accepted"
	// Refused: the adopt step refuses (Report.Reason).
	Refused = "Refused"
	// Invalid: the KubeVirt resource is refused before any adoption.
	Invalid = "Invalid"
	// NotUpstream: there is no installation of upstream's operator to
	// take over (none yet, virtop's own, or one already taken over).
	NotUpstream = "NotUpstream"
)

// Report is what the preview found. Every list is sorted and never nil,
// so the JSON form has a stable shape.
type Report struct {
	Namespace string `json:"namespace"`
	KubeVirt  string `json:"kubevirt"`
	Verdict   string `json:"verdict"`
	// Reason is the refusal's condition reason (Synchronized=False), or
	// the verdict's own for the others.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Upstream is upstream's deployment as the status shows it (what the
	// adoption would record); nil when the installation is not upstream's.
	Upstream *adopt.Record `json:"upstream,omitempty"`
	// Target is what virtop would install.
	Target *Target `json:"target,omitempty"`
	// TakeOver are the objects of the plan that exist: patched in place
	// (the fields upstream's field manager owns move to virtop's), then
	// applied.
	TakeOver []Object `json:"takeOver"`
	// Create are the objects of the plan that do not exist yet.
	Create []Object `json:"create"`
	// Left are upstream's objects virtop would not take over, each with
	// why; they keep upstream's label and are never pruned.
	Left []Left `json:"left"`
	// Rolls are the workloads whose pod template would change.
	Rolls []Roll `json:"rolls"`
	// Steady are the workloads whose pod template would stay as it is.
	Steady []Object `json:"steady"`
	// Kept are the workloads whose pod template would stay as upstream
	// wrote it although virtop renders it otherwise: nothing rolls at the
	// adoption; the changes listed roll with the next change of the
	// deployment (an upgrade, another image, placement or feature gate).
	Kept []Roll `json:"kept"`
}

// Target is the deployment virtop would install.
type Target struct {
	Version      string `json:"version"`
	Registry     string `json:"registry"`
	DeploymentID string `json:"deploymentID"`
}

// Object names an object.
type Object struct {
	Kind      string `json:"kind"`
	Group     string `json:"group,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func objectOf(k strategy.Key) Object {
	return Object{Kind: k.Kind, Group: k.Group, Namespace: k.Namespace, Name: k.Name}
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Left is an object of upstream's virtop would not take over.
type Left struct {
	Object
	Why string `json:"why"`
}

// Roll is a workload whose pod template would change, and how.
type Roll struct {
	Object
	Changes []Change `json:"changes"`
}

// Run previews the adoption of the namespace's KubeVirt installation. c is
// used for reads only (writes are refused before they reach the cluster);
// cs, when set, probes virt-api as the operator does (a GET through the
// API server's service proxy). The error wraps ErrRefused when the
// operator would not take the installation over; the report is filled as
// far as it goes either way.
func Run(ctx context.Context, c client.Client, cs kubernetes.Interface, o Options) (Report, error) {
	rep := Report{Namespace: o.Namespace, TakeOver: []Object{}, Create: []Object{}, Left: []Left{}, Rolls: []Roll{}, Steady: []Object{}, Kept: []Roll{}}
	var list kvv1.KubeVirtList
	if err := c.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return rep, fmt.Errorf("list KubeVirt resources in %s: %w", o.Namespace, err)
	}
	if len(list.Items) != 1 {
		rep.Verdict, rep.Reason = NotUpstream, NotUpstream
		rep.Message = fmt.Sprintf("%d KubeVirt resources in namespace %s, want one", len(list.Items), o.Namespace)
		return rep, fmt.Errorf("%w: %s", ErrRefused, rep.Message)
	}
	kv := &list.Items[0]
	rep.KubeVirt = kv.Name
	ro := readOnly{c}
	settings := o.Settings
	settings.Namespace = o.Namespace
	r := &controller.Reconciler{
		Client:    ro,
		APIReader: ro,
		Settings:  settings,
		Catalog:   release.Builtin(),
		Capabilities: &capability.Reader{
			Cache: ro, APIReader: ro, Clientset: cs, Clock: clock.RealClock{},
		},
		Clock: clock.RealClock{},
	}
	pv, err := r.PreviewAdoption(ctx, kv)
	if err != nil {
		return rep, err
	}
	switch {
	case pv.Invalid != nil:
		rep.Verdict, rep.Reason = Invalid, Invalid
		rep.Message = "The KubeVirt resource is refused before any adoption: " + pv.Invalid.Error()
	case pv.Refusal != nil:
		rep.Verdict, rep.Reason, rep.Message = Refused, pv.Refusal.Reason, pv.Refusal.Message
	case pv.Upstream:
		rep.Verdict, rep.Reason = Accepted, Accepted
		rep.Message = fmt.Sprintf("virtop's operator would take over the installation of upstream's operator at %s: every existing object of its plan in place (no object deleted or recreated), then apply its own form of each in the update order", pv.Record.Version)
	default:
		rep.Verdict, rep.Reason = NotUpstream, NotUpstream
		rep.Message = notUpstream(kv, pv)
	}
	if pv.Upstream {
		rec := pv.Record
		rep.Upstream = &rec
	}
	if pv.Config != nil {
		rep.Target = &Target{Version: pv.Config.Version, Registry: pv.Config.Registry, DeploymentID: pv.Config.ID}
	}
	if pv.Plan != nil {
		if err := compare(ctx, ro, pv.Plan, o.Namespace, &rep); err != nil {
			return rep, err
		}
	}
	if rep.Verdict != Accepted {
		return rep, fmt.Errorf("%w: %s: %s", ErrRefused, rep.Reason, rep.Message)
	}
	return rep, nil
}

func notUpstream(kv *kvv1.KubeVirt, pv controller.AdoptionPreview) string {
	switch {
	case pv.Adopted:
		return fmt.Sprintf("KubeVirt %s/%s was already taken over by virtop (annotation %s)", kv.Namespace, kv.Name, vocab.AdoptedFromAnnotation)
	case kv.Status.ObservedDeploymentID == "":
		return fmt.Sprintf("KubeVirt %s/%s has no deployment yet: virtop's operator would install, not adopt", kv.Namespace, kv.Name)
	case kv.Status.ObservedDeploymentID == pv.Config.ID:
		return fmt.Sprintf("KubeVirt %s/%s runs virtop's deployment %s already", kv.Namespace, kv.Name, pv.Config.ID)
	}
	return fmt.Sprintf("none of virt-api, virt-controller and virt-handler in %s carries upstream's label %s=%s: the installation is not upstream's operator's, and virtop's operator would apply its plan over it as over its own",
		kv.Namespace, vocab.ManagedByLabel, vocab.UpstreamManagedByValue)
}

// compare sorts the plan's objects by what the takeover would do with each
// (take over in place, create), finds upstream's objects it would leave,
// and compares each workload's planned pod template with the live one.
func compare(ctx context.Context, c client.Reader, p *plan.Plan, ns string, rep *Report) error {
	planned := map[strategy.Key]bool{}
	rendered := map[strategy.Key]client.Object{}
	for _, kt := range p.KeptTemplates {
		rendered[kt.Key] = kt.Rendered
	}
	for _, o := range p.Objects {
		k := strategy.KeyOf(o)
		planned[k] = true
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(o), live)
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			rep.Create = append(rep.Create, objectOf(k))
			continue
		case err != nil:
			return fmt.Errorf("read %s: %w", k, err)
		}
		rep.TakeOver = append(rep.TakeOver, objectOf(k))
		if k.Kind != "Deployment" && k.Kind != "DaemonSet" {
			continue
		}
		if r, ok := rendered[k]; ok {
			changes, err := templateChanges(r, live)
			if err != nil {
				return err
			}
			rep.Kept = append(rep.Kept, Roll{Object: objectOf(k), Changes: changes})
			continue
		}
		changes, err := templateChanges(o, live)
		if err != nil {
			return err
		}
		if len(changes) == 0 {
			rep.Steady = append(rep.Steady, objectOf(k))
		} else {
			rep.Rolls = append(rep.Rolls, Roll{Object: objectOf(k), Changes: changes})
		}
	}
	withheld := map[strategy.Key]string{}
	for _, cg := range p.Closed {
		withheld[cg.Object] = "virtop's plan withholds it until " + plan.DescribeGate(cg.Gate) + ": it stays as upstream left it meanwhile"
	}
	kinds, err := ownership.Get()
	if err != nil {
		return err
	}
	for _, gvk := range kinds.Managed {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, l, client.MatchingLabels{vocab.ManagedByLabel: vocab.UpstreamManagedByValue}); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			if n := obj.GetNamespace(); n != "" && n != ns {
				continue
			}
			k := strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
			if planned[k] {
				continue
			}
			why, ok := withheld[k]
			if !ok {
				why = "not in virtop's plan for this release: it keeps upstream's label and virtop never prunes it"
			}
			rep.Left = append(rep.Left, Left{Object: objectOf(k), Why: why})
		}
	}
	sortObjects(rep.TakeOver)
	sortObjects(rep.Create)
	sortObjects(rep.Steady)
	sort.Slice(rep.Left, func(i, j int) bool { return less(rep.Left[i].Object, rep.Left[j].Object) })
	sort.Slice(rep.Rolls, func(i, j int) bool { return less(rep.Rolls[i].Object, rep.Rolls[j].Object) })
	sort.Slice(rep.Kept, func(i, j int) bool { return less(rep.Kept[i].Object, rep.Kept[j].Object) })
	return nil
}

func sortObjects(l []Object) { sort.Slice(l, func(i, j int) bool { return less(l[i], l[j]) }) }

func less(a, b Object) bool {
	return strings.Join([]string{a.Kind, a.Group, a.Namespace, a.Name}, "\x00") < strings.Join([]string{b.Kind, b.Group, b.Namespace, b.Name}, "\x00")
}

// readOnly is a client whose writes fail before they reach the cluster:
// the preview runs the operator's steps, which must not write, and this
// makes sure of it.
type readOnly struct{ client.Client }

// errWrite is what a write through readOnly returns.
var errWrite = errors.New("adoptpreview: a dry run writes nothing")

func (readOnly) Create(context.Context, client.Object, ...client.CreateOption) error { return errWrite }
func (readOnly) Update(context.Context, client.Object, ...client.UpdateOption) error { return errWrite }
func (readOnly) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errWrite
}
func (readOnly) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errWrite
}
func (readOnly) Delete(context.Context, client.Object, ...client.DeleteOption) error { return errWrite }
func (readOnly) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errWrite
}
func (r readOnly) Status() client.SubResourceWriter { return readOnlyStatus{} }
func (r readOnly) SubResource(string) client.SubResourceClient {
	return readOnlySub{}
}

type readOnlyStatus struct{}

func (readOnlyStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errWrite
}
func (readOnlyStatus) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errWrite
}
func (readOnlyStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errWrite
}
func (readOnlyStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errWrite
}

type readOnlySub struct{ readOnlyStatus }

func (readOnlySub) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errWrite
}
