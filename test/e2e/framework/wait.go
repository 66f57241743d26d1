package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/testing/poll"
)

// orDefault is timeout, or DefaultTimeout when timeout is 0.
func orDefault(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return DefaultTimeout
	}
	return timeout
}

// Namespace creates a namespace with a unique name, deleted when the test ends.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: UniqueName(prefix)}}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// WaitDeploymentAvailable waits until the Deployment has all its replicas
// available (status.availableReplicas == spec.replicas, observed generation
// current) and returns how long that took.
func (e *Env) WaitDeploymentAvailable(t testing.TB, ns, name string, timeout time.Duration) time.Duration {
	t.Helper()
	return poll.Eventually(t, fmt.Sprintf("Deployment %s/%s to be available", ns, name), orDefault(timeout), func(ctx context.Context) (bool, error) {
		d, err := e.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return DeploymentAvailable(d), fmt.Errorf("replicas %d, ready %d, available %d, generation %d observed %d",
			replicas(d.Spec.Replicas), d.Status.ReadyReplicas, d.Status.AvailableReplicas, d.Generation, d.Status.ObservedGeneration)
	})
}

// DeploymentAvailable reports whether every replica of d is available.
func DeploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation &&
		d.Status.UpdatedReplicas == replicas(d.Spec.Replicas) &&
		d.Status.AvailableReplicas == replicas(d.Spec.Replicas)
}

// WaitDaemonSetReady waits until the DaemonSet runs a ready pod on every
// node it should and returns how long that took.
func (e *Env) WaitDaemonSetReady(t testing.TB, ns, name string, timeout time.Duration) time.Duration {
	t.Helper()
	return poll.Eventually(t, fmt.Sprintf("DaemonSet %s/%s to be ready", ns, name), orDefault(timeout), func(ctx context.Context) (bool, error) {
		ds, err := e.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := ds.Status
		return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 && s.NumberReady == s.DesiredNumberScheduled,
			fmt.Errorf("desired %d, ready %d, available %d", s.DesiredNumberScheduled, s.NumberReady, s.NumberAvailable)
	})
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// PauseDeployment is a Deployment of n pause pods that fit the fake nodes.
func PauseDeployment(ns, name string, n int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: Ptr(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
}
