package testenv

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MarkDeploymentReady writes the status a deployment controller would write
// once every replica of the current generation is up: observedGeneration =
// generation, replicas/updated/ready/available = spec.replicas (1 when
// unset), and the Available and Progressing conditions. It goes through the
// status subresource and retries on conflicts.
func MarkDeploymentReady(ctx context.Context, c client.Client, key types.NamespacedName) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		now := metav1.Now()
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration:  d.Generation,
			Replicas:            replicas,
			UpdatedReplicas:     replicas,
			ReadyReplicas:       replicas,
			AvailableReplicas:   replicas,
			UnavailableReplicas: 0,
			Conditions: []appsv1.DeploymentCondition{
				{
					Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
					Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.",
					LastUpdateTime: now, LastTransitionTime: now,
				},
				{
					Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
					Reason:         "NewReplicaSetAvailable",
					Message:        fmt.Sprintf("Deployment %q has successfully progressed.", d.Name),
					LastUpdateTime: now, LastTransitionTime: now,
				},
			},
		}
		return c.Status().Update(ctx, &d)
	})
	if err != nil {
		return fmt.Errorf("testenv: marking deployment %s ready: %w", key, err)
	}
	return nil
}

// MarkDaemonSetReady writes the status a daemon set controller would write
// with the current generation running on nodes nodes: observedGeneration =
// generation and desired/current/updated/ready/available = nodes. It goes
// through the status subresource and retries on conflicts.
func MarkDaemonSetReady(ctx context.Context, c client.Client, key types.NamespacedName, nodes int32) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ds appsv1.DaemonSet
		if err := c.Get(ctx, key, &ds); err != nil {
			return err
		}
		ds.Status = appsv1.DaemonSetStatus{
			ObservedGeneration:     ds.Generation,
			DesiredNumberScheduled: nodes,
			CurrentNumberScheduled: nodes,
			UpdatedNumberScheduled: nodes,
			NumberReady:            nodes,
			NumberAvailable:        nodes,
			NumberMisscheduled:     0,
			NumberUnavailable:      0,
		}
		return c.Status().Update(ctx, &ds)
	})
	if err != nil {
		return fmt.Errorf("testenv: marking daemonset %s ready: %w", key, err)
	}
	return nil
}
