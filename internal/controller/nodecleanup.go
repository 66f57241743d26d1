package controller

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// DefaultNodeCleanupTimeout bounds one node's cleanup when
// Reconciler.NodeCleanupTimeout is zero: a Job that has not finished by then
// (no Job controller, an image that cannot be pulled) is given up, said in
// an event, and the uninstall goes on.
const DefaultNodeCleanupTimeout = 3 * time.Minute

// nodeCleanupRecheck is how soon a pass looks again while cleanup Jobs run
// (their status is not watched).
const nodeCleanupRecheck = 3 * time.Second

// cleanNodes removes what virt-handler left on each node it ran on, once
// the control plane is gone (remove): a Job per node, from virt-handler's
// image, and then the node's heartbeat annotation, the mark of a node that
// needs it. A node that is not Ready cannot run one: it is said in an
// event and left. A node whose Job failed or did not finish in time is
// said too; the uninstall never waits on a node for ever.
func (r *Reconciler) cleanNodes(ctx context.Context, s *scope) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	var nodes corev1.NodeList
	if err := r.APIReader.List(ctx, &nodes); err != nil {
		return false, fmt.Errorf("listing nodes to clean: %w", err)
	}
	var marked []*corev1.Node
	for i := range nodes.Items {
		if uninstall.NeedsCleanup(&nodes.Items[i]) {
			marked = append(marked, &nodes.Items[i])
		}
	}
	if len(marked) == 0 {
		return true, r.deleteCleanupJobs(ctx, s.kv.Namespace)
	}
	cfg := cleanupConfig(s)
	var handlers corev1.PodList
	if err := r.APIReader.List(ctx, &handlers, client.InNamespace(s.kv.Namespace), client.MatchingLabels{vocab.AppLabel: vocab.VirtHandler}); err != nil {
		return false, fmt.Errorf("listing virt-handler pods: %w", err)
	}
	handlerOn := map[string]*corev1.Pod{}
	for i, p := range handlers.Items {
		handlerOn[p.Spec.NodeName] = &handlers.Items[i]
	}
	waiting := 0
	for _, n := range marked {
		left, err := r.cleanNode(ctx, s, cfg, n, handlerOn[n.Name])
		if err != nil {
			return false, err
		}
		if left {
			waiting++
		}
	}
	if waiting > 0 {
		log.V(1).Info("Waiting for the nodes virt-handler ran on to be cleaned", "nodes", waiting)
		s.requeueAfter = nodeCleanupRecheck
		return false, nil
	}
	return true, r.deleteCleanupJobs(ctx, s.kv.Namespace)
}

// cleanNode moves one node's cleanup on; it reports whether it is still
// under way. handler is virt-handler's pod on the node, if one is left.
func (r *Reconciler) cleanNode(ctx context.Context, s *scope, cfg *config.DeploymentConfig, n *corev1.Node, handler *corev1.Pod) (bool, error) {
	if cfg == nil {
		r.nodeEvent(s, corev1.EventTypeWarning, "NodeNotCleaned", n.Name, "no deployment config of the installation was recorded, so virt-handler's image is unknown")
		return false, r.unmarkNode(ctx, n)
	}
	if !nodeReady(n) {
		r.nodeEvent(s, corev1.EventTypeWarning, "NodeNotCleaned", n.Name, "the node is not Ready; virt-handler's files stay on it")
		return false, r.unmarkNode(ctx, n)
	}
	if handler != nil {
		// Its pod still terminates there: the files are still its own.
		// A pod's deletionTimestamp is the end of its grace period.
		if d := handler.DeletionTimestamp; d != nil && r.now().Sub(d.Time) > r.nodeCleanupTimeout() {
			r.nodeEvent(s, corev1.EventTypeWarning, "NodeNotCleaned", n.Name, fmt.Sprintf("virt-handler's pod %s is still terminating %s after its grace period; its files stay on the node", handler.Name, r.nodeCleanupTimeout()))
			return false, r.unmarkNode(ctx, n)
		}
		return true, nil
	}
	job := &batchv1.Job{}
	key := types.NamespacedName{Namespace: s.kv.Namespace, Name: uninstall.NodeCleanupJobName(n.Name)}
	switch err := r.APIReader.Get(ctx, key, job); {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, uninstall.NodeCleanupJob(cfg, n.Name)); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating the cleanup Job of node %s: %w", n.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("Cleaning a node virt-handler ran on", "node", n.Name, "job", key.Name)
		return true, nil
	case err != nil:
		return false, err
	}
	if job.DeletionTimestamp != nil {
		return true, nil
	}
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return false, err
	}
	done, ok, said := uninstall.NodeCleanupOutcome(job, pods.Items)
	switch {
	case done && ok:
		r.nodeEvent(s, corev1.EventTypeNormal, "NodeCleaned", n.Name, said)
	case done:
		r.nodeEvent(s, corev1.EventTypeWarning, "NodeNotCleaned", n.Name, said)
	case r.now().Sub(job.CreationTimestamp.Time) > r.nodeCleanupTimeout():
		r.nodeEvent(s, corev1.EventTypeWarning, "NodeNotCleaned", n.Name, fmt.Sprintf("its cleanup Job %s did not finish in %s", job.Name, r.nodeCleanupTimeout()))
	default:
		return true, nil
	}
	return false, r.unmarkNode(ctx, n)
}

// cleanupConfig is the deployment config the installation last rolled
// out, which names virt-handler's image; nil when none is recorded.
func cleanupConfig(s *scope) *config.DeploymentConfig {
	if s.kv.Status.ObservedDeploymentConfig == "" {
		return nil
	}
	cfg, err := config.Parse([]byte(s.kv.Status.ObservedDeploymentConfig))
	if err != nil {
		return nil
	}
	cfg.Namespace = s.kv.Namespace
	return cfg
}

// unmarkNode removes virt-handler's heartbeat annotation: the node needs no
// more cleanup.
func (r *Reconciler) unmarkNode(ctx context.Context, n *corev1.Node) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, uninstall.HeartbeatAnnotation))
	if err := r.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing %s from node %s: %w", uninstall.HeartbeatAnnotation, n.Name, err)
	}
	return nil
}

// deleteCleanupJobs deletes the cleanup Jobs and their pods.
func (r *Reconciler) deleteCleanupJobs(ctx context.Context, namespace string) error {
	var jobs batchv1.JobList
	if err := r.APIReader.List(ctx, &jobs, client.InNamespace(namespace),
		client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.AppComponentLabel: uninstall.NodeCleanupComponent}); err != nil {
		return fmt.Errorf("listing the node cleanup Jobs: %w", err)
	}
	for i := range jobs.Items {
		if err := r.Client.Delete(ctx, &jobs.Items[i], client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the node cleanup Job %s: %w", jobs.Items[i].Name, err)
		}
	}
	return nil
}

// nodeEvent says a node's outcome on the KubeVirt resource, the node as
// the related object: the recorder folds events of one key (type, reason,
// action, regarding and related objects) into a series that keeps the
// first note, so without it the second node's outcome was lost.
func (r *Reconciler) nodeEvent(s *scope, kind, reason, node, message string) {
	if r.Recorder != nil {
		related := &corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node}
		r.Recorder.Eventf(s.kv, related, kind, reason, "CleanNode", "Node %s: %s", node, message)
	}
}

func (r *Reconciler) nodeCleanupTimeout() time.Duration {
	if r.NodeCleanupTimeout > 0 {
		return r.NodeCleanupTimeout
	}
	return DefaultNodeCleanupTimeout
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
