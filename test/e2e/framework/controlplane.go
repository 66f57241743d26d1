package framework

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// StopComponent stops one process of the cluster (devcluster.ComponentKubeAPIServer,
// devcluster.ComponentEtcd, …): SIGTERM, SIGKILL after 10 s. Stopping the
// API server waits until it no longer answers.
func (e *Env) StopComponent(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	if err := e.Cluster.StopComponent(ctx, name, 10*time.Second); err != nil {
		t.Fatalf("stopping %s: %v", name, err)
	}
	if name == devcluster.ComponentKubeAPIServer {
		poll.Eventually(t, "the API server to stop answering", DefaultTimeout, func(ctx context.Context) (bool, error) {
			return !e.APIAnswers(ctx), nil
		})
	}
}

// KillComponent sends SIGKILL to one process of the cluster.
func (e *Env) KillComponent(t testing.TB, name string) {
	t.Helper()
	if err := e.Cluster.KillComponent(name); err != nil {
		t.Fatalf("killing %s: %v", name, err)
	}
}

// StartComponent starts a stopped process of the cluster again with the
// command line kwokctl recorded; starting the API server or etcd waits
// until the API server is ready again. The component is restarted at the
// end of the test if it is still stopped, so that one test cannot break the
// next ones.
func (e *Env) StartComponent(t testing.TB, name string) {
	t.Helper()
	if _, err := e.Cluster.StartComponent(name); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	if name == devcluster.ComponentKubeAPIServer || name == devcluster.ComponentEtcd {
		if _, ok := e.componentPID(devcluster.ComponentKubeAPIServer); ok {
			poll.Eventually(t, "the API server to be ready", DefaultTimeout, func(ctx context.Context) (bool, error) {
				return e.APIReady(ctx), nil
			})
		}
	}
}

// StopAPIServer stops kube-apiserver and restarts it when the test ends if
// the test did not.
func (e *Env) StopAPIServer(t testing.TB) { e.stopAndGuard(t, devcluster.ComponentKubeAPIServer) }

// StartAPIServer starts kube-apiserver and waits until it is ready.
func (e *Env) StartAPIServer(t testing.TB) { e.StartComponent(t, devcluster.ComponentKubeAPIServer) }

// StopEtcd stops etcd and restarts it when the test ends if the test did not.
func (e *Env) StopEtcd(t testing.TB) { e.stopAndGuard(t, devcluster.ComponentEtcd) }

// StartEtcd starts etcd and waits until the API server is ready again.
func (e *Env) StartEtcd(t testing.TB) { e.StartComponent(t, devcluster.ComponentEtcd) }

func (e *Env) stopAndGuard(t testing.TB, name string) {
	t.Helper()
	e.StopComponent(t, name)
	t.Cleanup(func() {
		if _, ok := e.componentPID(name); !ok {
			t.Logf("restarting %s, which the test left stopped", name)
			if _, err := e.Cluster.StartComponent(name); err != nil {
				t.Errorf("restarting %s: %v", name, err)
			}
			if err := e.Cluster.WaitAPI(context.Background(), DefaultTimeout); err != nil {
				t.Errorf("after restarting %s: %v", name, err)
			}
		}
	})
}

// ComponentPID returns the PID of a cluster process and whether it is alive.
func (e *Env) ComponentPID(t testing.TB, name string) (int, bool) {
	t.Helper()
	comp, err := e.Cluster.Component(name)
	if err != nil {
		t.Fatal(err)
	}
	pid, ok := comp.PID()
	return pid, ok
}

func (e *Env) componentPID(name string) (int, bool) {
	comp, err := e.Cluster.Component(name)
	if err != nil {
		return 0, false
	}
	return comp.PID()
}

// APIAnswers reports whether the API server answers at all (/livez).
func (e *Env) APIAnswers(ctx context.Context) bool {
	_, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/livez").DoRaw(ctx)
	return err == nil || !isConnError(err)
}

// APIReady reports whether the API server is ready (/readyz, which includes
// its etcd check).
func (e *Env) APIReady(ctx context.Context) bool {
	_, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

func isConnError(err error) bool {
	s := err.Error()
	for _, sub := range []string{"connection refused", "connection reset", "EOF", "i/o timeout", "no such host"} {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// ClusterStepTimeout bounds `kwokctl stop cluster` and `kwokctl start
// cluster` with its wait for the API server.
const ClusterStepTimeout = 5 * time.Minute

// StopCluster stops every component (kwokctl stop cluster); StartCluster
// starts them again and waits for the API server.
func (e *Env) StopCluster(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ClusterStepTimeout)
	defer cancel()
	if err := e.Cluster.StopAll(ctx); err != nil {
		t.Fatalf("kwokctl stop cluster (within %s): %v", ClusterStepTimeout, err)
	}
}

// StartCluster runs kwokctl start cluster and waits for the API server.
func (e *Env) StartCluster(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ClusterStepTimeout)
	defer cancel()
	if err := e.Cluster.StartAll(ctx); err != nil {
		t.Fatalf("kwokctl start cluster and the API server ready (within %s): %v", ClusterStepTimeout, err)
	}
}

// CheckComponents fails the test if a process of the cluster is not
// running (for example a controller that exited while the API server was
// away), naming it and where its log is.
func (e *Env) CheckComponents(t testing.TB) {
	t.Helper()
	comps, err := e.Cluster.Components()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comps {
		if _, ok := c.PID(); !ok {
			t.Errorf("cluster component %s is not running; its log: %s", c.Name, c.LogPath())
		}
	}
}
