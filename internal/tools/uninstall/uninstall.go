// Package uninstall deletes the KubeVirt resources of a namespace and waits
// until the operator has removed the control plane and let them go: what
// the Helm chart's pre-delete hook runs (`virtop uninstall`) before the
// operator itself is removed, so that the resources are never stranded on
// their finalizer. It deletes only KubeVirt resources.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// Options of Run.
type Options struct {
	Namespace string
	// Timeout bounds the wait for the resources to be gone.
	Timeout time.Duration
	// Every is how often the wait reports (default 10 s).
	Every time.Duration
}

// ErrRefused is returned when the API server refuses the deletion (for
// example virtop's webhook while workloads exist): nothing was deleted.
var ErrRefused = errors.New("deletion refused")

// ErrTimeout is returned when a resource is still there after the timeout.
var ErrTimeout = errors.New("not gone in time")

// Run deletes every KubeVirt resource in the namespace and waits until none
// is left. Progress goes to out.
func Run(ctx context.Context, c client.Client, out io.Writer, o Options) error {
	if o.Every <= 0 {
		o.Every = 10 * time.Second
	}
	var list kvv1.KubeVirtList
	if err := c.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			fmt.Fprintf(out, "No KubeVirt CRD on this cluster: nothing to delete\n")
			return nil
		}
		return fmt.Errorf("list KubeVirt resources in %s: %w", o.Namespace, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(out, "No KubeVirt resource in namespace %s: nothing to delete\n", o.Namespace)
		return nil
	}
	for i := range list.Items {
		kv := &list.Items[i]
		if kv.DeletionTimestamp != nil {
			fmt.Fprintf(out, "KubeVirt %s/%s is already being deleted\n", kv.Namespace, kv.Name)
			continue
		}
		err := c.Delete(ctx, kv, client.PropagationPolicy(metav1.DeletePropagationBackground))
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("%w: KubeVirt %s/%s: %v", ErrRefused, kv.Namespace, kv.Name, err)
		}
		fmt.Fprintf(out, "Deleted KubeVirt %s/%s; waiting up to %s for the operator to remove the control plane\n", kv.Namespace, kv.Name, o.Timeout)
	}
	return wait(ctx, c, out, o)
}

func wait(ctx context.Context, c client.Client, out io.Writer, o Options) error {
	start := time.Now()
	deadline := start.Add(o.Timeout)
	lastReport := start
	for {
		var list kvv1.KubeVirtList
		if err := c.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
			return fmt.Errorf("list KubeVirt resources in %s: %w", o.Namespace, err)
		}
		if len(list.Items) == 0 {
			fmt.Fprintf(out, "No KubeVirt resource is left in %s (%s)\n", o.Namespace, time.Since(start).Round(time.Second))
			return nil
		}
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("%w: after %s: %s; is the operator (Deployment virt-operator) running? Its log says why", ErrTimeout, o.Timeout, describe(list.Items))
		}
		if now.Sub(lastReport) >= o.Every {
			fmt.Fprintf(out, "  [%ds] %s\n", int(now.Sub(start).Seconds()), describe(list.Items))
			lastReport = now
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// describe says where each remaining resource stands: phase, finalizers and
// the message of a condition that explains a wait.
func describe(items []kvv1.KubeVirt) string {
	var parts []string
	for _, kv := range items {
		s := fmt.Sprintf("KubeVirt %s/%s phase %q finalizers %v", kv.Namespace, kv.Name, kv.Status.Phase, kv.Finalizers)
		for _, cond := range kv.Status.Conditions {
			if cond.Message != "" && (cond.Type == kvv1.KubeVirtConditionSynchronized || cond.Type == kvv1.KubeVirtConditionDegraded || cond.Type == kvv1.KubeVirtConditionProgressing) {
				s += fmt.Sprintf("; %s=%s %s: %s", cond.Type, cond.Status, cond.Reason, cond.Message)
			}
		}
		parts = append(parts, s)
	}
	sort.Strings(parts)
	return strings.Join(parts, " | ")
}
