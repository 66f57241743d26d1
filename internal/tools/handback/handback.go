// Package handback leaves an installation that virtop manages for
// upstream's virt-operator to take back (`virtop handback`): every object
// virtop manages gets upstream's managed-by label and loses virtop's own
// annotations, the KubeVirt resource loses the adoption record and virtop's
// inventory and, at the release upstream ran, gets upstream's deployment ID
// back. An object is virtop's only when the inventory (package inventory)
// holds it with its UID, as for prune: one labelled alike is left alone. It deletes
// nothing and touches no pod template, so nothing rolls. It refuses while
// virtop's operator runs: that operator would take every object back.
package handback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Options of Run.
type Options struct {
	Namespace string
	// DryRun lists what would change and writes nothing.
	DryRun bool
	// Now is the time the operator's lease is compared with (default
	// time.Now).
	Now func() time.Time
}

// ErrRefused: virtop's operator still runs, or there is no single KubeVirt
// resource; nothing was changed.
var ErrRefused = errors.New("hand back refused")

// Summary is what Run changed (or would change, under DryRun).
type Summary struct {
	Objects int
	// Status: the KubeVirt status got upstream's deployment ID back.
	Status bool
	// RecordLeft: the adoption record stays on the KubeVirt resource
	// because upstream's virt-operator-validator, which guards every
	// update of it, has no backend until upstream's operator runs; run
	// again then (it only removes the record).
	RecordLeft bool
	// Finished: an earlier run handed everything back and left the
	// record; this one removed it.
	Finished bool
}

// Run hands the installation of the namespace back. Progress goes to out.
func Run(ctx context.Context, c client.Client, out io.Writer, o Options) (Summary, error) {
	var sum Summary
	if o.Now == nil {
		o.Now = time.Now
	}
	if running, err := operatorRunning(ctx, c, o.Namespace, o.Now()); err != nil {
		return sum, err
	} else if running != "" {
		return sum, fmt.Errorf("%w: virtop's operator still runs (%s) and would take every object back; scale it to zero first (kubectl -n %s scale deployment/%s --replicas=0); nothing was changed",
			ErrRefused, running, o.Namespace, vocab.VirtOperator)
	}
	var list kvv1.KubeVirtList
	if err := c.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return sum, fmt.Errorf("list KubeVirt resources in %s: %w", o.Namespace, err)
	}
	if len(list.Items) != 1 {
		return sum, fmt.Errorf("%w: %d KubeVirt resources in namespace %s, want one; nothing was changed", ErrRefused, len(list.Items), o.Namespace)
	}
	kv := &list.Items[0]
	rec, adopted, err := adopt.Adopted(kv)
	if err != nil {
		return sum, err
	}
	var recp *adopt.Record
	if adopted {
		recp = &rec
	}
	if !inventory.Recorded(kv.Status.Generations) && adopted {
		back, err := handedBack(ctx, c, o.Namespace)
		if err != nil {
			return sum, err
		}
		if back {
			return finish(ctx, c, out, kv, o.DryRun)
		}
	}
	if !inventory.Recorded(kv.Status.Generations) {
		return sum, fmt.Errorf("%w: KubeVirt %s/%s records no inventory of what virtop created (made by a virtop before the inventory); start this version of virtop's operator once so it records one (docs/security.md), then stop it and hand back; nothing was changed",
			ErrRefused, kv.Namespace, kv.Name)
	}
	inv := inventory.FromStatus(kv.Status.Generations)
	kinds, err := ownership.Get()
	if err != nil {
		return sum, err
	}
	customizer, err := adopt.CustomizerIdentifier(kv.Spec.CustomizeComponents)
	if err != nil {
		return sum, err
	}
	verb := "Handed back"
	if o.DryRun {
		verb = "Would hand back"
	}
	for _, gvk := range kinds.Managed {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		opts := []client.ListOption{client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}}
		if err := c.List(ctx, l, opts...); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return sum, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for i := range l.Items {
			obj := &l.Items[i]
			if ns := obj.GetNamespace(); ns != "" && ns != o.Namespace && obj.GetLabels()[vocab.InstallNamespaceLabel] != o.Namespace {
				continue
			}
			if !inv.Owns(gvk.GroupKind(), obj) {
				// Labelled as virtop's, but not what virtop created: a
				// copy, or another product's object.
				fmt.Fprintf(out, "Left alone %s %s: labelled as virtop's, but not in its inventory\n", gvk.Kind, name(obj))
				continue
			}
			patch, err := adopt.HandBackPatch(obj, recp, kv.Generation, customizer)
			if err != nil || patch == nil {
				if err != nil {
					return sum, err
				}
				continue
			}
			if !o.DryRun {
				if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
					return sum, fmt.Errorf("hand back %s %s: %w", gvk.Kind, name(obj), err)
				}
			}
			sum.Objects++
		}
	}
	fmt.Fprintf(out, "%s %d objects: label %s=%s, virtop's annotations removed\n", verb, sum.Objects, vocab.ManagedByLabel, "virt-operator")

	st := adopt.HandBackStatus(kv.Status, recp)
	sum.Status = st.ObservedDeploymentID != kv.Status.ObservedDeploymentID
	// The inventory is virtop's record: upstream's operator keeps its own
	// entries of status.generations.
	st.Generations = inventory.Strip(st.Generations)
	if !o.DryRun {
		// The status first: its subresource is not what upstream's
		// virt-operator-validator guards, and the record it is computed
		// from stays until it is written.
		if sum.Status || !apiequality.Semantic.DeepEqual(st, kv.Status) {
			orig := kv.DeepCopy()
			kv.Status = st
			if err := c.Status().Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
				return sum, fmt.Errorf("KubeVirt %s status: %w", kv.Name, err)
			}
		}
		if adopted {
			left, err := removeRecord(ctx, c, kv)
			if err != nil {
				return sum, err
			}
			sum.RecordLeft = left
		}
	}
	switch {
	case sum.Status:
		fmt.Fprintf(out, "KubeVirt %s/%s: upstream's deployment %s of %s restored in the status\n", kv.Namespace, kv.Name, rec.DeploymentID, rec.Version)
	case adopted:
		fmt.Fprintf(out, "KubeVirt %s/%s: runs %s, not the %s virtop adopted; upstream's operator will apply its own strategy for %s\n", kv.Namespace, kv.Name, kv.Status.ObservedKubeVirtVersion, rec.Version, kv.Status.ObservedKubeVirtVersion)
	}
	fmt.Fprintf(out, "KubeVirt %s/%s %s; nothing was deleted\n", kv.Namespace, kv.Name, finalizerNote(kv.Finalizers))
	if sum.RecordLeft {
		fmt.Fprint(out, recordLeftNote(kv))
	}
	return sum, nil
}

// recordLeftNote says why the adoption record stayed and what finishes it.
func recordLeftNote(kv *kvv1.KubeVirt) string {
	return fmt.Sprintf("KubeVirt %s/%s keeps virtop's adoption record (annotation %s) for now: upstream's webhook %s (failurePolicy Fail) guards every update of the resource and has no backend while no operator runs. "+
		"Everything else is handed back. Install upstream's operator now; its pods serve that webhook as soon as they start. Then run virtop handback again: it removes the record and changes nothing else\n",
		kv.Namespace, kv.Name, vocab.AdoptedFromAnnotation, upstreamValidator)
}

// upstreamValidator is upstream's webhook configuration that guards the
// KubeVirt resource, served by the operator's pods.
const upstreamValidator = "virt-operator-validator"

// removeRecord removes the adoption record from the KubeVirt resource.
// left is true when upstream's validator could not be called (no
// operator serves it): the record stays, nothing else failed.
func removeRecord(ctx context.Context, c client.Client, kv *kvv1.KubeVirt) (left bool, err error) {
	orig := kv.DeepCopy()
	delete(kv.Annotations, vocab.AdoptedFromAnnotation)
	err = c.Patch(ctx, kv, client.MergeFrom(orig))
	if webhookUnreachable(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("KubeVirt %s: %w", kv.Name, err)
	}
	return false, nil
}

// webhookUnreachable: the API server could not call a fail-closed webhook
// (no endpoints, connection refused, TLS): an InternalError "failed
// calling webhook", not a webhook's answer.
func webhookUnreachable(err error) bool {
	return err != nil && apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

// handedBack reports whether an earlier run handed the installation back:
// the namespace has workloads labelled as upstream's and none labelled as
// virtop's (but virtop's operator Deployment, until upstream's manifest
// replaces it).
func handedBack(ctx context.Context, c client.Client, ns string) (bool, error) {
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return false, fmt.Errorf("list Deployments: %w", err)
	}
	var dss appsv1.DaemonSetList
	if err := c.List(ctx, &dss, client.InNamespace(ns)); err != nil {
		return false, fmt.Errorf("list DaemonSets: %w", err)
	}
	labels := make([]map[string]string, 0, len(deps.Items)+len(dss.Items))
	for _, d := range deps.Items {
		if d.Name != vocab.VirtOperator {
			labels = append(labels, d.Labels)
		}
	}
	for _, d := range dss.Items {
		labels = append(labels, d.Labels)
	}
	upstream := 0
	for _, l := range labels {
		switch {
		case l[vocab.ManagedByLabel] == vocab.ManagedByValue:
			return false, nil
		case adopt.ByUpstream(l):
			upstream++
		}
	}
	return upstream > 0, nil
}

// finish ends a hand back an earlier run did but for the adoption record.
func finish(ctx context.Context, c client.Client, out io.Writer, kv *kvv1.KubeVirt, dryRun bool) (Summary, error) {
	sum := Summary{Finished: true}
	if dryRun {
		fmt.Fprintf(out, "Would remove the adoption record from KubeVirt %s/%s: everything else was handed back by an earlier run\n", kv.Namespace, kv.Name)
		return sum, nil
	}
	left, err := removeRecord(ctx, c, kv)
	if err != nil {
		return sum, err
	}
	if left {
		sum.RecordLeft = true
		fmt.Fprint(out, recordLeftNote(kv))
		return sum, nil
	}
	fmt.Fprintf(out, "KubeVirt %s/%s: the adoption record removed; the hand back is complete\n", kv.Namespace, kv.Name)
	return sum, nil
}

func name(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// operatorRunning says what of virtop's operator still runs in the
// namespace: its leader lease held and renewed, or a Deployment that runs
// virtop's image with replicas. "" when nothing.
func operatorRunning(ctx context.Context, c client.Client, ns string, now time.Time) (string, error) {
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return "", fmt.Errorf("list Deployments: %w", err)
	}
	if running := adopt.VirtopOperators(deps.Items); len(running) > 0 {
		return running[0], nil
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{vocab.AppLabel: vocab.VirtOperator}); err != nil {
		return "", fmt.Errorf("list virt-operator pods: %w", err)
	}
	lease := &coordv1.Lease{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.OperatorLeaseName}, lease)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return "", fmt.Errorf("read the operator's lease: %w", err)
	case len(adopt.RunningOperators(deps.Items, pods.Items)) > 0:
		// Upstream's operator runs (after a first run, to serve its
		// webhook) and holds the lease of the same name.
	default:
		sp := lease.Spec
		if sp.HolderIdentity != nil && *sp.HolderIdentity != "" && sp.RenewTime != nil && sp.LeaseDurationSeconds != nil &&
			now.Before(sp.RenewTime.Add(time.Duration(*sp.LeaseDurationSeconds)*time.Second)) {
			return fmt.Sprintf("lease %s/%s held by %s", ns, lease.Name, *sp.HolderIdentity), nil
		}
	}
	return "", nil
}

// finalizerNote says which KubeVirt finalizer the resource keeps. virtop
// names it as upstream's operator of the release does
// (release.KubeVirtFinalizer): foregroundDeleteKubeVirt up to v1.8.4,
// kubevirt.io/foregroundDeleteKubeVirt from v1.9.0, whose operator also
// recognises, and replaces, the older name.
func finalizerNote(finalizers []string) string {
	var kept []string
	for _, f := range finalizers {
		if vocab.IsKubeVirtFinalizer(f) {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		return "has no KubeVirt finalizer (upstream's operator adds its own when it runs)"
	}
	return fmt.Sprintf("keeps its finalizer %s (upstream's operator names it %s up to v1.8.4 and %s from v1.9.0, which also recognises the older name)",
		strings.Join(kept, ", "), vocab.LegacyKubeVirtFinalizer, vocab.KubeVirtFinalizer)
}
