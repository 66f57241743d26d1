// Package framework runs virtop's end-to-end suite on a local cluster: one
// kwok cluster per test binary (created in TestMain through
// internal/tools/devcluster), the virtop binary built for the suite and run as a
// child process, waits with generous bounds, and helpers that stop and start
// the cluster's API server and etcd.
package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// DefaultTimeout bounds waits: generous, because how long things take is
// measured by benchmarks, not asserted.
const DefaultTimeout = 60 * time.Second

// ClusterCreateTimeout bounds the creation of the suite's cluster (kwokctl,
// the nodes, the base, the real node and its images); ClusterDeleteTimeout
// its deletion.
const (
	ClusterCreateTimeout = 20 * time.Minute
	ClusterDeleteTimeout = 5 * time.Minute
)

// Env is the suite's environment.
type Env struct {
	// Repo is the checkout's root.
	Repo string
	// Dir is the suite's temporary directory (state, logs, the binary);
	// it is kept when the suite fails.
	Dir string
	// VirtopBin is the virtop binary built for the suite.
	VirtopBin string
	// Cluster is the suite's local cluster.
	Cluster *devcluster.Cluster
	// Nodes is the number of fake nodes.
	Nodes int
	// RealNode says whether the cluster has the real node.
	RealNode bool
	// Kube is a client of the cluster.
	Kube kubernetes.Interface
	// Clients holds the other clients.
	Clients *devcluster.Clients
	// Timings are the cluster's creation measurements.
	Timings devcluster.Timings

	// metricsToken is MetricsToken's, made once per cluster.
	metricsMu    sync.Mutex
	metricsToken string
}

var global *Env

// Main sets the suite up, runs it and tears it down; call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
//
// Under -short it runs the tests without a cluster (they skip). If the tool
// binaries are missing, the suite fails at once with a message naming them.
func Main(m *testing.M) int { return MainWith(m, Options{}) }

// Options shape a suite's cluster.
type Options struct {
	// Nodes is the number of fake nodes (default 3).
	Nodes int
	// RealNode adds the real node (devcluster.ClusterOptions.RealNode),
	// with the images of the default release loaded.
	RealNode bool
	// VMs runs virt-handler on the real node too, with emulation, so that
	// VMs boot there (devcluster.ClusterOptions.VMs; implies RealNode).
	VMs bool
	// NoBase leaves virtop's base (CRDs, namespace, PriorityClass) off
	// the cluster (devcluster.ClusterOptions.NoBase): a cluster upstream's
	// operator installs.
	NoBase bool
	// AllReleasesOnly makes no cluster under VIRTOP_TEST_RELEASES=default
	// (make test): the suite's tests run make test-all's cases only, and
	// skip there (testreleases.All) without paying for a cluster.
	AllReleasesOnly bool
}

var options Options

// MainWith is Main for a suite whose cluster differs from the default.
func MainWith(m *testing.M, o Options) int {
	options = o
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: -short given: end-to-end tests skip")
		return m.Run()
	}
	if o.AllReleasesOnly && os.Getenv(testreleases.Env) == "default" {
		fmt.Printf("e2e: %s=default: this suite runs in make test-all only; no cluster, its tests skip\n", testreleases.Env)
		return m.Run()
	}
	code, err := sealed(m)
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ne2e: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// The suite runs sealed: the test binary runs itself again inside its
// cluster's network namespace (devcluster's, loopback only), so that every
// process it starts — the cluster's components, the operator, Prometheus,
// the tests' own clients — shares that loopback and no dial to a fake pod
// or Service address can leave the machine. These variables carry the
// suite's directory and cluster name from the first run to the second.
const (
	dirEnv     = "VIRTOP_E2E_DIR"
	clusterEnv = "VIRTOP_E2E_CLUSTER"
)

func sealed(m *testing.M) (int, error) {
	if _, err := devcluster.FindTools(); err != nil {
		return 1, fmt.Errorf("FAIL: cannot run the end-to-end suite: %w", err)
	}
	dir, name := os.Getenv(dirEnv), os.Getenv(clusterEnv)
	if dir != "" && name != "" {
		return run(m, dir, name)
	}
	dir, err := os.MkdirTemp("", "virtop-e2e-")
	if err != nil {
		return 1, err
	}
	name = UniqueName("e2e")
	cluster, err := devcluster.NewAt(name, filepath.Join(dir, "state"))
	if err != nil {
		return 1, err
	}
	ns := cluster.Netns()
	if err := ns.Ensure(); err != nil {
		return 1, fmt.Errorf("sealing the suite: %w", err)
	}
	defer func() { _ = ns.Delete() }()
	code, done, err := ns.Reexec(dirEnv+"="+dir, clusterEnv+"="+name)
	if err != nil || !done {
		if err == nil {
			err = fmt.Errorf("the suite already runs inside %s without %s set", ns.Name, dirEnv)
		}
		return 1, err
	}
	// The sealed run removes the directory when it passes and names it when
	// it fails; killed by a signal, it could do neither.
	if _, serr := os.Stat(dir); serr == nil && code >= 128 {
		fmt.Fprintf(os.Stderr, "e2e: the suite was killed (exit %d); kept %s (logs, state) for inspection\n", code, dir)
	}
	return code, nil
}

func run(m *testing.M, dir, name string) (code int, err error) {
	suiteStart := time.Now()
	env := &Env{Nodes: 3, Dir: dir, RealNode: options.RealNode || options.VMs}
	if options.Nodes > 0 {
		env.Nodes = options.Nodes
	}
	env.Repo = devcluster.FindRepoRoot("")
	if env.Repo == "" {
		return 1, fmt.Errorf("cannot find the virtop checkout from the working directory")
	}
	defer func() {
		if code == 0 && err == nil {
			_ = os.RemoveAll(env.Dir)
		} else {
			fmt.Fprintf(os.Stderr, "e2e: kept %s (logs, state) for inspection\n", KeepArtifacts(env.Dir))
		}
	}()

	t0 := time.Now()
	env.VirtopBin = filepath.Join(env.Dir, "bin", "virtop")
	how, err := BuildVirtop(env.Repo, env.VirtopBin)
	if err != nil {
		return 1, fmt.Errorf("building virtop: %w", err)
	}
	fmt.Printf("e2e: virtop %s: %s in %s\n", how, env.VirtopBin, time.Since(t0).Round(100*time.Millisecond))

	env.Cluster, err = devcluster.NewAt(name, filepath.Join(env.Dir, "state"))
	if err != nil {
		return 1, err
	}
	defer func() {
		if code != 0 || err != nil {
			// Delete removes the components' logs with the cluster: keep a copy.
			keep := filepath.Join(env.Dir, "cluster-logs")
			if cerr := os.CopyFS(keep, os.DirFS(filepath.Join(env.Cluster.KwokClusterDir(), "logs"))); cerr == nil {
				fmt.Fprintf(os.Stderr, "e2e: the cluster's component logs are in %s\n", keep)
			}
			if env.RealNode {
				keepNode := filepath.Join(env.Dir, "node-logs")
				if cerr := os.CopyFS(keepNode, os.DirFS(filepath.Join(env.Cluster.NodeDir(), "logs"))); cerr == nil {
					fmt.Fprintf(os.Stderr, "e2e: the real node's logs (containerd, kubelet, kube-proxy, pods/) are in %s\n", keepNode)
				}
			}
		}
		fmt.Printf("e2e: deleting cluster %s\n", env.Cluster.Name)
		ctx, cancel := context.WithTimeout(context.Background(), ClusterDeleteTimeout)
		defer cancel()
		if _, derr := env.Cluster.Delete(ctx, os.Stdout, 10*time.Second); derr != nil && err == nil {
			err = fmt.Errorf("deleting the suite's cluster (within %s): %w", ClusterDeleteTimeout, derr)
		}
		if procs, perr := env.Cluster.Processes(); perr == nil && len(procs) > 0 && err == nil {
			err = fmt.Errorf("processes of the suite's cluster survived its deletion: %v", procs)
		}
		fmt.Printf("e2e: whole suite took %s\n", time.Since(suiteStart).Round(100*time.Millisecond))
	}()
	// The base `virtop up` installs: the release manifest's CRDs,
	// namespace and PriorityClass (unless NoBase).
	ctx, cancel := context.WithTimeout(context.Background(), ClusterCreateTimeout)
	defer cancel()
	env.Timings, err = env.Cluster.Ensure(ctx, os.Stdout, devcluster.ClusterOptions{Nodes: env.Nodes, RealNode: env.RealNode, VMs: options.VMs, NoBase: options.NoBase})
	if err != nil {
		return 1, fmt.Errorf("creating the suite's cluster (within %s): %w", ClusterCreateTimeout, err)
	}
	fmt.Printf("e2e: cluster %s ready: kwokctl create cluster %s, API ready after %s, nodes Ready in %s\n",
		env.Cluster.Name, env.Timings.KwokctlCreate.Round(100*time.Millisecond),
		env.Timings.APIReady.Round(100*time.Millisecond), env.Timings.NodesReady.Round(100*time.Millisecond))
	env.Clients, err = env.Cluster.Clients()
	if err != nil {
		return 1, err
	}
	env.Kube = env.Clients.Kube
	global = env
	return m.Run(), nil
}

// Require returns the suite's environment; it skips the test under -short.
func Require(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	if global == nil {
		t.Fatal("the end-to-end environment is not set up: call framework.Main from TestMain")
	}
	return global
}

// UniqueName returns prefix-<8 hex digits>, a valid cluster or object name.
func UniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// LogDir is where process logs of the suite are kept.
func (e *Env) LogDir() string { return filepath.Join(e.Dir, "logs") }
