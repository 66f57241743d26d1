// Package testenv runs a real kube-apiserver and etcd (controller-runtime's
// envtest) for the tests of any virtop package, using the binaries that
// `make tools` builds into the cache (internal/tools/toolpaths). There is no
// controller-manager: nothing reconciles Deployments, DaemonSets or
// namespaces, so tests write workload status themselves (MarkDeploymentReady,
// MarkDaemonSetReady) and deleted namespaces stay Terminating.
//
// Typical use, one control plane per test binary:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{Monitoring: true})) }
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Get(t) // skips under -short
//		ns := env.Namespace(t)
//		... env.Client ...
//	}
//
// Start and Stop are there for callers that need their own lifecycle.
package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Defaults chosen for a loaded 2-core machine.
const (
	DefaultStartTimeout = 2 * time.Minute
	DefaultStopTimeout  = time.Minute
	crdInstallTimeout   = time.Minute
	// OwnCRDDir holds virtop's CRDs, relative to the repository root;
	// installed when it exists.
	OwnCRDDir = "config/crd/bases"
	// MonitoringCRDDir holds the monitoring.coreos.com CRDs, relative to the
	// repository root; installed when Options.Monitoring is set.
	MonitoringCRDDir = "internal/tools/crds/monitoring"
)

// ErrSkipped is returned by Start under `go test -short`: the control plane
// is not started.
var ErrSkipped = errors.New("envtest tests need `make tools` and a real kube-apiserver; skipped under -short")

// Options configure Start.
type Options struct {
	// CRDPaths are extra CRD files or directories to install, absolute or
	// relative to the repository root. Each must exist.
	CRDPaths []string
	// SkipVirtopCRDs leaves out virtop's own CRDs (config/crd/bases), for
	// tests that do not need them.
	SkipVirtopCRDs bool
	// Monitoring installs the monitoring.coreos.com CRDs (ServiceMonitor,
	// PodMonitor, PrometheusRule, Prometheus) from internal/tools/crds/monitoring.
	Monitoring bool
	// Scheme, when set, is used for the client after client-go's types,
	// apiextensions/v1 and apiregistration/v1 are added to it; register your
	// own types in it. When nil a fresh scheme with those types is used.
	Scheme *k8sruntime.Scheme
	// StartTimeout bounds the start of etcd and of kube-apiserver each
	// (default DefaultStartTimeout).
	StartTimeout time.Duration
	// APIServerArgs are extra kube-apiserver flags, name without dashes.
	APIServerArgs map[string]string
	// Logger becomes controller-runtime's global logger. Start sets it, to
	// logr.Discard() when unset, so envtest stays quiet.
	Logger logr.Logger
}

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client config for the API server.
	Config *rest.Config
	// Client is a controller-runtime client over Scheme (no cache).
	Client client.Client
	// Scheme knows client-go's types, apiextensions/v1 and apiregistration/v1
	// plus whatever Options.Scheme held.
	Scheme *k8sruntime.Scheme
	// KubeConfig is a kubeconfig for Config, for tools run as processes.
	KubeConfig []byte
	// CRDs are the CRDs that Start installed.
	CRDs []*apiextensionsv1.CustomResourceDefinition

	env    *envtest.Environment
	output *tailBuffer
	once   sync.Once
}

// Start starts etcd and kube-apiserver from the tools cache and installs the
// CRDs. A missing binary is an error naming `make tools`; under -short Start
// returns ErrSkipped. Call it from TestMain (it parses the test flags if
// that has not happened yet).
func Start(opts Options) (*Env, error) {
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		return nil, ErrSkipped
	}
	apiServer, err := toolpaths.KubeAPIServer.Require()
	if err != nil {
		return nil, err
	}
	etcd, err := toolpaths.Etcd.Require()
	if err != nil {
		return nil, err
	}
	kubectl, err := toolpaths.Kubectl.Require()
	if err != nil {
		return nil, err
	}

	if opts.Logger.GetSink() != nil {
		ctrllog.SetLogger(opts.Logger)
	} else {
		ctrllog.SetLogger(logr.Discard())
	}

	scheme := opts.Scheme
	if scheme == nil {
		scheme = k8sruntime.NewScheme()
	}
	for _, add := range []func(*k8sruntime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, apiregistrationv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("testenv: building the scheme: %w", err)
		}
	}

	crdPaths, err := crdPaths(opts)
	if err != nil {
		return nil, err
	}

	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}

	// A start can fail on a loaded machine in ways a second try does not
	// (envtest waits only 5 s for the default namespace): try twice. A CRD
	// the API server rejects fails the same way again: no retry.
	var lastErr error
	for attempt := 1; attempt <= 2; attempt++ {
		e, err := start(opts, scheme, crdPaths, timeout, apiServer, etcd, kubectl)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if errors.Is(err, errCRDs) {
			break
		}
	}
	return nil, lastErr
}

// errCRDs marks a failure to install the CRDs.
var errCRDs = errors.New("installing CRDs")

func start(opts Options, scheme *k8sruntime.Scheme, crdPaths []string, timeout time.Duration,
	apiServerPath, etcdPath, kubectlPath string) (*Env, error) {
	out := &tailBuffer{max: 16 << 10}
	never := false
	te := &envtest.Environment{
		Scheme:                   scheme,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		UseExistingCluster:       &never, // ignore USE_EXISTING_CLUSTER: never touch a real cluster
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  DefaultStopTimeout,
		CRDInstallOptions: envtest.CRDInstallOptions{
			MaxTime:      crdInstallTimeout,
			PollInterval: 100 * time.Millisecond,
		},
	}
	te.ControlPlane.Etcd = &envtest.Etcd{Path: etcdPath, Out: out, Err: out}
	api := te.ControlPlane.GetAPIServer()
	api.Path = apiServerPath
	api.Out, api.Err = out, out
	te.ControlPlane.KubectlPath = kubectlPath
	// Sealed (Main), the namespace has no route the API server could take
	// its address from: it advertises loopback, which the endpoint
	// reconciler refuses to publish, so the kubernetes Service gets no
	// endpoints (nothing here reaches the API server through it).
	api.Configure().Set("advertise-address", "127.0.0.1")
	api.Configure().Set("endpoint-reconciler-type", "none")
	for k, v := range opts.APIServerArgs {
		api.Configure().Set(k, v)
	}

	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		if strings.Contains(err.Error(), "unable to install CRDs") {
			return nil, fmt.Errorf("testenv: %w from %s: %w", errCRDs, strings.Join(crdPaths, ", "), err)
		}
		return nil, fmt.Errorf("testenv: starting kube-apiserver %s and etcd %s: %w%s",
			toolpaths.KubernetesVersion, toolpaths.EtcdVersion, err, out.describe())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = te.Stop()
		return nil, fmt.Errorf("testenv: creating the client: %w", err)
	}
	return &Env{
		Config:     cfg,
		Client:     c,
		Scheme:     scheme,
		KubeConfig: te.KubeConfig,
		CRDs:       te.CRDs,
		env:        te,
		output:     out,
	}, nil
}

// Stop stops the control plane. It is safe to call more than once and on a
// nil Env.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	var err error
	e.once.Do(func() { err = e.env.Stop() })
	return err
}

// crdPaths resolves the CRD files and directories to install.
func crdPaths(opts Options) ([]string, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	var paths []string
	if fi, err := os.Stat(filepath.Join(root, OwnCRDDir)); err == nil && fi.IsDir() && !opts.SkipVirtopCRDs {
		paths = append(paths, filepath.Join(root, OwnCRDDir))
	}
	if opts.Monitoring {
		p := filepath.Join(root, MonitoringCRDDir)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("testenv: monitoring CRDs: %w (run `make monitoring-crds`)", err)
		}
		paths = append(paths, p)
	}
	for _, p := range opts.CRDPaths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("testenv: CRD path: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// RepoRoot finds the checkout root: the nearest directory above the working
// directory (or, failing that, above this source file) whose go.mod declares
// the virtop module.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		for {
			if toolpaths.IsVirtopModule(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("testenv: no go.mod of %s above the working directory", toolpaths.ModulePath)
}

// Namespace creates a namespace unique to this test and deletes it when the
// test ends (without waiting: with no controller-manager it stays
// Terminating).
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(t.Name()),
		Labels:       map[string]string{vocab.VirtopKeyPrefix + "test": "true"},
	}}
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("testenv: creating a namespace for %s: %v", t.Name(), err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		del := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := e.Client.Delete(ctx, del); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testenv: deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// namespacePrefix turns a test name into a DNS-1123 label prefix that leaves
// room for the 5 random characters the API server appends.
func namespacePrefix(testName string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(testName) {
		ok := (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" {
		s = "test"
	}
	return s + "-"
}

// tailBuffer keeps the last max bytes written to it, so a failed start can
// show what the control plane printed.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) describe() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return ""
	}
	return "\ncontrol plane output (last lines):\n" + string(b.buf)
}
