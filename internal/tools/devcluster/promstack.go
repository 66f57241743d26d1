package devcluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/virtop-dev/virtop/internal/tools/crds"
	"github.com/virtop-dev/virtop/internal/tools/netns"
	"github.com/virtop-dev/virtop/internal/tools/proc"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// The monitoring stack of a cluster with a real node: the Prometheus
// resource `up --prometheus` creates is served for real.
//
//   - prometheus-operator (the tools cache, `make tools`) runs as a host
//     process against the cluster and generates, from the Prometheus
//     resource and every ServiceMonitor and PrometheusRule it selects
//     (virtop's among them), the configuration Secret
//     prometheus-<name> and the rule ConfigMaps
//     prometheus-<name>-rulefiles-<i>, as in any cluster. The StatefulSet it
//     also creates lands on a fake node (the resource's nodeSelector
//     type=kwok): no container of it runs.
//   - kube-state-metrics (the tools cache) runs as a host process, scraped
//     through the Prometheus resource's additionalScrapeConfigs with
//     honor_labels, as kube-prometheus-stack scrapes it (KubeVirt's and
//     virtop's control-plane alerts read its Deployment series).
//   - the sync process (`virtop prometheus-sync`, hidden) does what the
//     pod's prometheus-config-reloader and volumes do: it writes the
//     generated configuration and rule files to the state directory, with
//     the pod's paths replaced (LocalPrometheusConfig), and a token of the
//     Prometheus's ServiceAccount where the pod would mount one, and runs
//     Prometheus (Debian's package `prometheus`), reloading it (SIGHUP)
//     when a file changed.
//
// All of them run in the cluster's network namespace: Prometheus scrapes
// the real node's pods on their bridge there, and kube-state-metrics on
// the namespace's loopback. The machine reaches Prometheus at the same
// loopback address through a forwarder, like the API server.
//
// Everything lives in <state>/prometheus/: url (Prometheus's URL), the
// processes' logs and pidfiles, config/ (prometheus.yaml, rules/,
// serviceaccount/) and data/.

// PrometheusSyncCommand is the (hidden) virtop command of the sync process.
const PrometheusSyncCommand = "prometheus-sync"

// kubeStateMetricsSecret holds the scrape job of kube-state-metrics, named
// by the Prometheus resource's additionalScrapeConfigs.
const kubeStateMetricsSecret = "virtop-local-scrape-configs"

// LocalScrapeInterval is the scrape and evaluation interval of the local
// cluster's Prometheus (kube-prometheus-stack's default is 30s): a short
// one, so that an alert's state follows the cluster within seconds.
const LocalScrapeInterval = "10s"

// PrometheusDir holds the monitoring stack's files.
func (c *Cluster) PrometheusDir() string { return filepath.Join(c.StateDir, "prometheus") }

func (c *Cluster) promPath(p ...string) string {
	return filepath.Join(append([]string{c.PrometheusDir()}, p...)...)
}

// PrometheusURL is the URL of the cluster's running Prometheus (reachable
// from the machine and from inside the cluster's namespace), or "" when
// it has none.
func (c *Cluster) PrometheusURL() string {
	raw, err := os.ReadFile(c.promPath("url"))
	if err != nil {
		return ""
	}
	if pid, err := proc.ReadPID(c.promPath("sync.pid")); err != nil || !proc.Alive(pid) {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// promStack is what the Prometheus resource needs to know of the stack
// serving it.
type promStack struct {
	version string // the prometheus binary's, v2.42.0
	ksm     string // kube-state-metrics's metrics address
}

// promTools are the stack's binaries.
type promTools struct {
	operator, ksm, prometheus string
}

func findPromTools() (promTools, error) {
	var t promTools
	var missing []string
	var err error
	if t.operator, err = toolpaths.PrometheusOperator.Require(); err != nil {
		missing = append(missing, err.Error())
	}
	if t.ksm, err = toolpaths.KubeStateMetrics.Require(); err != nil {
		missing = append(missing, err.Error())
	}
	if t.prometheus, err = exec.LookPath("prometheus"); err != nil {
		missing = append(missing, "prometheus is not in PATH: install Debian's package prometheus")
	}
	if len(missing) > 0 {
		return t, errors.New(strings.Join(missing, "; "))
	}
	return t, nil
}

var promVersionRE = regexp.MustCompile(`version (\d+\.\d+\.\d+)`)

// prometheusVersion is the version the prometheus binary reports.
func prometheusVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", bin, err, out)
	}
	m := promVersionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s --version: no version in %q", bin, out)
	}
	return "v" + string(m[1]), nil
}

// startPrometheusStack starts what is not running of the stack and returns
// what the Prometheus resource must say of it; nil (and a note to out)
// when its tools are missing: the resource is then created alone, as
// without a real node. virtop is the virtop binary the sync process and
// the forwarder run from.
func (c *Cluster) startPrometheusStack(ctx context.Context, out io.Writer, cl *Clients, virtop string) (*promStack, error) {
	tools, err := findPromTools()
	if err != nil {
		fmt.Fprintf(out, "! No Prometheus runs for the Prometheus resource (only the resource is created): %v\n", err)
		return nil, nil
	}
	if virtop == "" {
		if virtop, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if strings.HasSuffix(filepath.Base(virtop), ".test") {
		return nil, fmt.Errorf("%s is a test binary, not virtop: pass a virtop binary to run Prometheus's sync process", virtop)
	}
	version, err := prometheusVersion(ctx, tools.prometheus)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.promPath("config"), 0o755); err != nil {
		return nil, err
	}
	// prometheus-operator enables a controller only for the CRDs it finds
	// at its start: the monitoring CRDs first, and the Probe CRD, which
	// its Prometheus controller waits for and test/crds/monitoring does
	// not hold (its own release's).
	if _, err := applyFS(ctx, cl, crds.FS, crds.Monitoring()); err != nil {
		return nil, err
	}
	probe, err := ProbeCRD()
	if err != nil {
		return nil, err
	}
	if err := apply(ctx, cl, probe, ""); err != nil {
		return nil, err
	}
	t0 := time.Now()
	ns := c.Netns()
	if _, ok := c.promPID("prometheus-operator"); !ok {
		web, err := FreeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		if err := c.startPromProcess("prometheus-operator", ns.Command(tools.operator, "--web.listen-address="+web, "--log-level=info"),
			"KUBECONFIG="+c.Kubeconfig()); err != nil {
			return nil, err
		}
	}
	ksm, err := c.readOrPick("kube-state-metrics.addr")
	if err != nil {
		return nil, err
	}
	if _, ok := c.promPID("kube-state-metrics"); !ok {
		host, port, _ := net.SplitHostPort(ksm)
		tel, err := FreeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		_, telPort, _ := net.SplitHostPort(tel)
		if err := c.startPromProcess("kube-state-metrics", ns.Command(tools.ksm, "--kubeconfig="+c.Kubeconfig(),
			"--host="+host, "--port="+port, "--telemetry-host="+host, "--telemetry-port="+telPort,
			"--resources=deployments,daemonsets,pods,nodes,replicasets,statefulsets")); err != nil {
			return nil, err
		}
	}
	addr, err := c.readOrPick("prometheus.addr")
	if err != nil {
		return nil, err
	}
	if _, ok := c.promPID("sync"); !ok {
		cmd := ns.Command(virtop, PrometheusSyncCommand, "--cluster-state", c.StateDir, "--listen", addr, "--prometheus", tools.prometheus)
		if err := c.startPromProcess("sync", cmd); err != nil {
			return nil, err
		}
	}
	if !ns.Inside() {
		if _, ok := c.promPID("forward"); !ok {
			logf, err := os.OpenFile(c.promPath("forward.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, err
			}
			defer logf.Close()
			cmd := ns.Command(virtop, ForwardCommand, "--to", addr, "--cluster-state", c.StateDir)
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := netns.StartForwarder(cmd, addr); err != nil {
				return nil, fmt.Errorf("forwarding the machine's %s to Prometheus in network namespace %s: %w", addr, ns.Name, err)
			}
			go func() { _ = cmd.Wait() }()
			if err := os.WriteFile(c.promPath("forward.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
				return nil, err
			}
		}
	}
	url := "http://" + addr
	if err := os.WriteFile(c.promPath("url"), []byte(url+"\n"), 0o644); err != nil {
		return nil, err
	}
	// A process that exits at once says why in its log.
	time.Sleep(500 * time.Millisecond)
	for _, p := range []string{"prometheus-operator", "kube-state-metrics", "sync"} {
		if _, ok := c.promPID(p); !ok {
			return nil, fmt.Errorf("the local Prometheus stack's %s exited at once; the end of %s:\n%s", p, c.promPath(p+".log"), proc.Tail(c.promPath(p+".log"), 20))
		}
	}
	fmt.Fprintf(out, "• Prometheus %s runs for the Prometheus resource at %s (prometheus-operator %s, kube-state-metrics %s; logs in %s) in %s\n",
		version, url, toolpaths.PrometheusOperatorVersion, toolpaths.KubeStateMetricsVersion, c.PrometheusDir(), since(t0))
	return &promStack{version: version, ksm: ksm}, nil
}

// readOrPick reads an address the stack chose before (kept across `up`s
// of a running stack) or picks a free loopback one and records it.
func (c *Cluster) readOrPick(file string) (string, error) {
	if raw, err := os.ReadFile(c.promPath(file)); err == nil {
		return strings.TrimSpace(string(raw)), nil
	}
	addr, err := FreeLoopbackAddr()
	if err != nil {
		return "", err
	}
	return addr, os.WriteFile(c.promPath(file), []byte(addr+"\n"), 0o644)
}

// promPID is the PID of the stack's process name, if it is alive and is
// the cluster's (against PID reuse: it runs in PrometheusDir, or its
// command line names the state directory).
func (c *Cluster) promPID(name string) (int, bool) {
	pid, err := proc.ReadPID(c.promPath(name + ".pid"))
	if err != nil || !proc.Alive(pid) {
		return 0, false
	}
	cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if !within(cwd, c.StateDir) && !refersTo(procDesc(pid), c.StateDir) {
		return 0, false
	}
	return pid, true
}

// startPromProcess starts cmd detached (its own session), logging to
// <name>.log, its PID in <name>.pid, with only PATH and env in its
// environment. Every command names the state directory (`down` finds
// leftovers by it).
func (c *Cluster) startPromProcess(name string, cmd *exec.Cmd, env ...string) error {
	logf, err := os.OpenFile(c.promPath(name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Dir = c.PrometheusDir()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.PrometheusDir()}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the local Prometheus stack's %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(c.promPath(name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
}

// stopPrometheusStack stops the stack's processes (the sync process stops
// its Prometheus) and removes its directory.
func (c *Cluster) stopPrometheusStack(ctx context.Context) error {
	var errs []error
	for _, p := range []string{"forward", "sync", "prometheus", "kube-state-metrics", "prometheus-operator"} {
		if pid, ok := c.promPID(p); ok {
			if err := proc.Terminate(ctx, pid, 10*time.Second); err != nil {
				errs = append(errs, fmt.Errorf("stopping the local Prometheus stack's %s: %w", p, err))
			}
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.RemoveAll(c.PrometheusDir()))
	}
	return errors.Join(errs...)
}

// StopPrometheusStack stops the local Prometheus stack, if it runs, and
// removes its files; the Prometheus resource stays.
func (c *Cluster) StopPrometheusStack(ctx context.Context) error { return c.stopPrometheusStack(ctx) }

// realPrometheusSpec adds to the Prometheus resource what a stack serving
// it needs: the version it runs (prometheus-operator writes a configuration
// that version accepts), the local scrape interval, a fake node for the
// StatefulSet's pod, and kube-state-metrics's scrape job. It returns the
// Secret holding that job.
func realPrometheusSpec(prom *unstructured.Unstructured, s *promStack) *unstructured.Unstructured {
	spec, _, _ := unstructured.NestedMap(prom.Object, "spec")
	spec["version"] = s.version
	spec["scrapeInterval"] = LocalScrapeInterval
	spec["evaluationInterval"] = LocalScrapeInterval
	spec["nodeSelector"] = map[string]any{"type": "kwok"}
	spec["additionalScrapeConfigs"] = map[string]any{"name": kubeStateMetricsSecret, "key": "scrape-configs.yaml"}
	_ = unstructured.SetNestedMap(prom.Object, spec, "spec")
	job := fmt.Sprintf("- job_name: kube-state-metrics\n  honor_labels: true\n  static_configs:\n  - targets: [%q]\n", s.ksm)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": kubeStateMetricsSecret, "namespace": MonitoringNamespace},
		"stringData": map[string]any{"scrape-configs.yaml": job},
	}}
}

// RunPrometheusSync is the sync process (`virtop prometheus-sync`): until
// ctx ends, it keeps Prometheus's files in step with what
// prometheus-operator generated for the cluster's Prometheus resource, and
// Prometheus (bin, listening on listen) running on them. Progress and
// errors go to logw.
func (c *Cluster) RunPrometheusSync(ctx context.Context, logw io.Writer, bin, listen string) error {
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "%s %s\n", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	apiServer, err := c.APIServerAddr()
	if err != nil {
		return err
	}
	dir := c.promPath("config")
	paths := LocalPaths{
		ServiceAccountDir: filepath.Join(dir, "serviceaccount"),
		RulesDir:          filepath.Join(dir, "rules"),
		APIServer:         "https://" + apiServer,
		PodName:           "prometheus-" + PrometheusName + "-0",
		SDDir:             filepath.Join(dir, "sd"),
	}
	// What Prometheus may scrape: the real node's pods, and loopback.
	var reachable []*net.IPNet
	for _, cidr := range []string{c.NodePodCIDR(), "127.0.0.0/8"} {
		_, r, err := net.ParseCIDR(cidr)
		if err != nil {
			return err
		}
		reachable = append(reachable, r)
	}
	for _, d := range []string{paths.ServiceAccountDir, paths.RulesDir, paths.SDDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var prom *exec.Cmd
	exited := make(chan struct{})
	start := func() error {
		prom = exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yaml"),
			"--storage.tsdb.path="+c.promPath("data"), "--storage.tsdb.retention.time=1d",
			"--web.listen-address="+listen, "--log.level=info")
		logfile, err := os.OpenFile(c.promPath("prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer logfile.Close()
		prom.Stdout, prom.Stderr = logfile, logfile
		prom.Dir = c.PrometheusDir()
		if err := prom.Start(); err != nil {
			return err
		}
		exited = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(prom, exited)
		logf("started prometheus (pid %d) on %s", prom.Process.Pid, listen)
		return os.WriteFile(c.promPath("prometheus.pid"), []byte(strconv.Itoa(prom.Process.Pid)+"\n"), 0o644)
	}
	defer func() {
		if prom != nil && prom.Process != nil {
			_ = prom.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = prom.Process.Kill()
			}
		}
	}()
	// The Kubernetes discoveries running, by target file.
	type running struct {
		config string
		cancel context.CancelFunc
	}
	discoveries := map[string]running{}
	defer func() {
		for _, r := range discoveries {
			r.cancel()
		}
	}()
	runDiscoveries := func(sds []KubernetesSD) {
		want := map[string]bool{}
		for _, sd := range sds {
			want[sd.File] = true
			if r, ok := discoveries[sd.File]; ok && r.config == string(sd.Config) {
				continue
			} else if ok {
				r.cancel()
			}
			dctx, cancel := context.WithCancel(ctx)
			discoveries[sd.File] = running{config: string(sd.Config), cancel: cancel}
			go func(sd KubernetesSD) {
				if err := RunKubernetesSD(dctx, sd, reachable, logf); err != nil {
					logf("%v", err)
				}
			}(sd)
		}
		for file, r := range discoveries {
			if !want[file] {
				r.cancel()
				delete(discoveries, file)
				_ = removeFile(file)
			}
		}
	}
	var tokenAt time.Time
	lastErr := ""
	for {
		changed, sds, err := c.syncPrometheusFiles(ctx, cl, paths, &tokenAt)
		if err == nil {
			runDiscoveries(sds)
		}
		switch {
		case err != nil:
			if err.Error() != lastErr {
				logf("%v", err)
			}
			lastErr = err.Error()
		case prom == nil || isClosed(exited):
			lastErr = ""
			if prom != nil {
				logf("prometheus exited; starting it again (its log: %s)", c.promPath("prometheus.log"))
			}
			if err := start(); err != nil {
				logf("starting prometheus: %v", err)
			}
		case changed:
			lastErr = ""
			logf("configuration or rules changed: reloading prometheus")
			_ = prom.Process.Signal(syscall.SIGHUP)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// syncPrometheusFiles writes what the Prometheus pod would mount: the
// generated configuration (made local), the rule files, and the
// ServiceAccount's token (renewed every 30 minutes, valid for an hour), CA
// and namespace. It reports whether the configuration or a rule file
// changed.
func (c *Cluster) syncPrometheusFiles(ctx context.Context, cl *Clients, p LocalPaths, tokenAt *time.Time) (bool, []KubernetesSD, error) {
	if time.Since(*tokenAt) > 30*time.Minute {
		tr, err := cl.Kube.CoreV1().ServiceAccounts(MonitoringNamespace).CreateToken(ctx, PrometheusName, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600))},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, nil, fmt.Errorf("a token of ServiceAccount %s/%s: %w", MonitoringNamespace, PrometheusName, err)
		}
		ca, err := os.ReadFile(c.pki("ca.crt"))
		if err != nil {
			return false, nil, err
		}
		for name, content := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(MonitoringNamespace)} {
			if _, err := writeIfChanged(filepath.Join(p.ServiceAccountDir, name), content); err != nil {
				return false, nil, err
			}
		}
		*tokenAt = time.Now()
	}
	sec, err := cl.Kube.CoreV1().Secrets(MonitoringNamespace).Get(ctx, "prometheus-"+PrometheusName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil, fmt.Errorf("waiting for prometheus-operator's configuration (Secret %s/prometheus-%s)", MonitoringNamespace, PrometheusName)
	}
	if err != nil {
		return false, nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(sec.Data["prometheus.yaml.gz"]))
	if err != nil {
		return false, nil, fmt.Errorf("Secret %s/%s: prometheus.yaml.gz: %w", sec.Namespace, sec.Name, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return false, nil, err
	}
	cfg, sds, err := LocalPrometheusConfig(raw, p)
	if err != nil {
		return false, nil, err
	}
	cms, err := cl.Kube.CoreV1().ConfigMaps(MonitoringNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, nil, err
	}
	data := map[string]map[string]string{}
	for _, cm := range cms.Items {
		data[cm.Name] = cm.Data
	}
	files := RuleFiles(PrometheusName, data)
	changed := false
	for rel, content := range files {
		ch, err := writeIfChanged(filepath.Join(p.RulesDir, rel), []byte(content))
		if err != nil {
			return false, nil, err
		}
		changed = changed || ch
	}
	// Rule files no longer generated go.
	var stale []string
	_ = filepath.WalkDir(p.RulesDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if rel, _ := filepath.Rel(p.RulesDir, path); files[filepath.ToSlash(rel)] == "" {
				stale = append(stale, path)
			}
		}
		return nil
	})
	sort.Strings(stale)
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return false, nil, err
		}
		changed = true
	}
	ch, err := writeIfChanged(filepath.Join(filepath.Dir(p.RulesDir), "prometheus.yaml"), cfg)
	if err != nil {
		return false, nil, err
	}
	return changed || ch, sds, nil
}

// writeIfChanged writes content to path (through a temporary file renamed
// into place) unless it holds it already; it reports whether it wrote.
func writeIfChanged(path string, content []byte) (bool, error) {
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, content) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, path)
}

func ptrTo[T any](v T) *T { return &v }
