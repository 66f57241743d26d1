package monitoring

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus"
	commonconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// virtopJob is the job virtop's control plane is scraped under: upstream's
// ServiceMonitor sets no jobLabel, so prometheus-operator takes the job
// from the Service's name.
const virtopJob = vocab.PrometheusServiceName

// TestPrometheusOperatorScrapesVirtop runs prometheus-operator (built from
// the Go module proxy, `make tools`) as a host process against the suite's
// cluster with a kube-prometheus-stack-shaped Prometheus, and virtop's
// operator to an Available KubeVirt. It reads what prometheus-operator
// generated for that Prometheus: its configuration (Secret
// prometheus-<name>, prometheus.yaml.gz) must hold a scrape job for
// virtop's ServiceMonitor that, run through Prometheus's own Kubernetes
// discovery against the cluster and its own relabelling, yields exactly the
// metrics endpoints of Service kubevirt-prometheus-metrics under job
// kubevirt-prometheus-metrics; its rule files must hold virtop's rule
// groups. A second Prometheus whose selectors match nothing of virtop's
// gets neither.
func TestPrometheusOperatorScrapesVirtop(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	opBin, err := toolpaths.PrometheusOperator.Require()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := env.Client(t)

	// The monitoring CRDs virtop is tested with (generated from
	// pkg/apis/monitoring v0.95.2), and the Probe CRD, which
	// prometheus-operator's Prometheus controller waits for and
	// internal/tools/crds/monitoring does not hold: v0.85.0's own.
	n, err := devcluster.ApplyDir(ctx, env.Clients, filepath.Join(env.Repo, devcluster.MonitoringCRDDir))
	if err != nil {
		t.Fatal(err)
	}
	probe, err := devcluster.ProbeCRD()
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(ctx, env.Clients, probe); err != nil {
		t.Fatal(err)
	}
	t.Logf("applied %d CRDs from %s and prometheus-operator %s's Probe CRD", n, devcluster.MonitoringCRDDir, toolpaths.PrometheusOperatorVersion)

	// A kube-prometheus-stack-shaped Prometheus (what `virtop up
	// --prometheus` installs): ServiceAccount kube-prometheus-stack-prometheus,
	// selectors release=kube-prometheus-stack.
	for _, o := range devcluster.PrometheusObjects() {
		if err := devcluster.Apply(ctx, env.Clients, o); err != nil {
			t.Fatal(err)
		}
	}
	promKey := client.ObjectKey{Namespace: devcluster.MonitoringNamespace, Name: devcluster.PrometheusName}

	poStart := time.Now()
	startPrometheusOperator(t, env, opBin)

	// The operator serves its metrics (authenticated) on a loopback port.
	metricsAddr, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	op := env.Operator(t, append(framework.HostOperatorArgs(t), "--metrics-bind-address", metricsAddr)...).Start()
	kv := framework.NewKubeVirt(t, "v1.5.3")
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	framework.WaitKubeVirt(t, c, "Available with MonitoringReady", 3*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := kvtest.RolledOut(kv)
		mr := kv.Status.Condition("MonitoringReady")
		return ok && mr.Status == corev1.ConditionTrue, fmt.Sprintf("%s; MonitoringReady %s (%s): %s", why, mr.Status, mr.Reason, mr.Message)
	})

	sm, rule := virtopMonitoringObjects(t, c)
	t.Logf("virtop's ServiceMonitor %s/%s (labels %v), PrometheusRule %s/%s (labels %v, %d groups)",
		sm.Namespace, sm.Name, sm.Labels, rule.Namespace, rule.Name, rule.Labels, len(rule.Spec.Groups))

	// The configuration prometheus-operator generated for the Prometheus.
	var cfg *promConfig
	poll.Eventually(t, "prometheus-operator's configuration for "+promKey.String()+" to scrape virtop's ServiceMonitor", 3*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		cfg, err = generatedConfig(ctx, c, promKey)
		if err != nil {
			return false, err
		}
		if virtopScrapeConfig(cfg, sm) == nil {
			return false, fmt.Errorf("no scrape job for ServiceMonitor %s/%s among %v", sm.Namespace, sm.Name, jobNames(cfg))
		}
		return true, nil
	})
	t.Logf("MEASURE virtop's ServiceMonitor created -> prometheus-operator's configuration scrapes it: %s (API timestamp, 1 s resolution; prometheus-operator started %s before)",
		time.Since(sm.CreationTimestamp.Time).Round(100*time.Millisecond), time.Since(poStart).Round(100*time.Millisecond))
	sc := virtopScrapeConfig(cfg, sm)
	checkScrapeConfig(t, sc, sm)

	// What Prometheus would really scrape: its Kubernetes discovery, run
	// against the cluster with the job's own discovery configuration, and
	// the job's relabelling.
	want := metricsEndpoints(t, c)
	poll.Eventually(t, "the job's targets to be the metrics endpoints of "+virtopJob, time.Minute, func(ctx context.Context) (bool, error) {
		got, dropped, err := discoverTargets(ctx, env.Cluster.Kubeconfig(), sc)
		if err != nil {
			return false, err
		}
		var addrs []string
		for _, tg := range got {
			if j := tg.Get(model.JobLabel); j != virtopJob {
				return false, fmt.Errorf("target %s has job %q, want %q", tg.Get(model.AddressLabel), j, virtopJob)
			}
			addrs = append(addrs, tg.Get(model.AddressLabel))
		}
		sort.Strings(addrs)
		if len(addrs) == 0 || !slices.Equal(addrs, want) {
			return false, fmt.Errorf("kept targets %v, want the metrics endpoints %v; dropped: %v", addrs, want, dropped)
		}
		t.Logf("the job keeps %d targets, all job=%s: %v; the first after relabelling: %v; it drops %d other discovered targets: %v",
			len(got), virtopJob, addrs, withoutMeta(got[0]), len(dropped), dropped)
		for _, tg := range got {
			if tg.Get("namespace") != devcluster.InstallNamespace || tg.Get("service") != virtopJob || tg.Get("endpoint") != "metrics" || tg.Get(model.SchemeLabel) != "https" {
				t.Errorf("target %v: want namespace=%s service=%s endpoint=metrics __scheme__=https", tg, devcluster.InstallNamespace, virtopJob)
			}
		}
		return true, nil
	})

	// virtop's rule groups in the Prometheus's rule files.
	var groups []rulefmt.RuleGroup
	poll.Eventually(t, "virtop's rule groups in prometheus-operator's rule files for "+promKey.String(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		groups, err = generatedRuleGroups(ctx, c, promKey, rule)
		if err != nil {
			return false, err
		}
		return groups != nil, fmt.Errorf("no rule file of PrometheusRule %s/%s", rule.Namespace, rule.Name)
	})
	compareRuleGroups(t, rule, groups)

	checkOperatorScraped(t, env, c, sc, metricsAddr)

	// The negative: a Prometheus whose selectors match nothing of virtop's.
	// Created after virtop placed its objects, so virtop keeps choosing
	// the first Prometheus (by creation time).
	other := &monitoringv1.Prometheus{
		ObjectMeta: metav1.ObjectMeta{Namespace: devcluster.MonitoringNamespace, Name: "other-release"},
		Spec: monitoringv1.PrometheusSpec{CommonPrometheusFields: monitoringv1.CommonPrometheusFields{
			ServiceAccountName:              devcluster.PrometheusName,
			ServiceMonitorSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"release": "other-release"}},
			ServiceMonitorNamespaceSelector: &metav1.LabelSelector{},
		},
			RuleSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"release": "other-release"}},
			RuleNamespaceSelector: &metav1.LabelSelector{},
		},
	}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	otherKey := client.ObjectKeyFromObject(other)
	var otherCfg *promConfig
	poll.Eventually(t, "prometheus-operator's configuration for "+otherKey.String(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		otherCfg, err = generatedConfig(ctx, c, otherKey)
		return err == nil, err
	})
	if sc := virtopScrapeConfig(otherCfg, sm); sc != nil {
		t.Errorf("Prometheus %s, whose selectors match nothing of virtop's, got a scrape job for its ServiceMonitor: %s", otherKey, sc.JobName)
	}
	t.Logf("Prometheus %s (selector release=other-release) got scrape jobs %v", otherKey, jobNames(otherCfg))
	// prometheus-operator writes a Prometheus's rule ConfigMaps before its
	// configuration Secret, so they are final by now.
	otherGroups, err := generatedRuleGroups(ctx, c, otherKey, rule)
	if err != nil {
		t.Fatal(err)
	}
	if otherGroups != nil {
		t.Errorf("Prometheus %s, whose selectors match nothing of virtop's, got virtop's rule groups", otherKey)
	}
	// The first Prometheus still has both (the second changed nothing).
	if cfg, err := generatedConfig(ctx, c, promKey); err != nil || virtopScrapeConfig(cfg, sm) == nil {
		t.Errorf("after the second Prometheus, %s lost virtop's scrape job (%v)", promKey, err)
	}

	if exited, codes := op.EverExited(); exited {
		t.Errorf("virtop's operator exited during the test: %v", codes)
	}
	framework.DeleteKubeVirt(t, c, 3*time.Minute)
}

// startPrometheusOperator runs prometheus-operator's operator as a host
// process with the cluster's kubeconfig (it reads KUBECONFIG), its web
// server on a free loopback port, every namespace watched and no kubelet
// Service (nothing needs one: kwok's nodes have no kubelet). The
// config-reloader image it puts in the StatefulSet does not matter: kwok
// runs no container.
func startPrometheusOperator(t *testing.T, env *framework.Env, bin string) *framework.Process {
	t.Helper()
	web, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := env.Virtop(t, "--web.listen-address="+web, "--log-level=info")
	p.Name, p.Bin = "prometheus-operator", bin
	p.LogPath = filepath.Join(env.LogDir(), fmt.Sprintf("%s.prometheus-operator.%d.log", t.Name(), time.Now().UnixNano()))
	p.Env = []string{"KUBECONFIG=" + env.Cluster.Kubeconfig()}
	p.Start()
	t.Logf("started prometheus-operator %s (pid %d), log %s", toolpaths.PrometheusOperatorVersion, p.PID(), p.LogPath)
	return p
}

// virtopMonitoringObjects waits for virtop's ServiceMonitor and
// PrometheusRule.
func virtopMonitoringObjects(t *testing.T, c client.Client) (*monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule) {
	t.Helper()
	var sm *monitoringv1.ServiceMonitor
	var rule *monitoringv1.PrometheusRule
	poll.Eventually(t, "virtop's ServiceMonitor and PrometheusRule", 2*time.Minute, func(ctx context.Context) (bool, error) {
		byVirtop := client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}
		sms := &monitoringv1.ServiceMonitorList{}
		if err := c.List(ctx, sms, byVirtop); err != nil {
			return false, err
		}
		rules := &monitoringv1.PrometheusRuleList{}
		if err := c.List(ctx, rules, byVirtop); err != nil {
			return false, err
		}
		if len(sms.Items) != 1 || len(rules.Items) != 1 {
			return false, fmt.Errorf("%d ServiceMonitors and %d PrometheusRules of virtop's, want one each", len(sms.Items), len(rules.Items))
		}
		sm, rule = &sms.Items[0], &rules.Items[0]
		return true, nil
	})
	return sm, rule
}

// generatedConfig reads and loads the configuration prometheus-operator
// generated for the Prometheus key: Secret prometheus-<name>, key
// prometheus.yaml.gz.
func generatedConfig(ctx context.Context, c client.Client, key client.ObjectKey) (*promConfig, error) {
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: "prometheus-" + key.Name}, sec); err != nil {
		return nil, err
	}
	gz, ok := sec.Data["prometheus.yaml.gz"]
	if !ok {
		return nil, fmt.Errorf("Secret %s/%s has no prometheus.yaml.gz", sec.Namespace, sec.Name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	// In the pod, prometheus-config-reloader writes the file Prometheus
	// reads with the $(VAR) references expanded from its environment: the
	// shard (the sharding relabelling keeps targets whose hash is
	// $(SHARD)) and the pod's name (external label prometheus_replica).
	// Replica 0 of shard 0:
	vars := map[string]string{"SHARD": "0", "POD_NAME": "prometheus-" + key.Name + "-0"}
	var unknown []string
	expanded := envRef.ReplaceAllStringFunc(string(raw), func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		unknown = append(unknown, ref)
		return ref
	})
	if len(unknown) > 0 {
		return nil, fmt.Errorf("the generated configuration references %v, which the test cannot expand", unknown)
	}
	cfg, err := loadPromConfig([]byte(expanded))
	if err != nil {
		return nil, fmt.Errorf("the generated configuration: %w\n%s", err, raw)
	}
	return cfg, nil
}

// promConfig is the part of a Prometheus configuration this test reads,
// decoded from plain YAML: the scrape jobs, each with its Kubernetes
// discovery and relabelling decoded by Prometheus's own types (their
// YAML decoders default and check them as the server's loader does).
// Prometheus's whole configuration package is not used: it links the
// cloud providers' SDKs (remote-write authentication), some thirty modules
// go.mod would list for this one test.
type promConfig struct {
	ScrapeConfigs []*scrapeConfig `yaml:"scrape_configs"`
}

type scrapeConfig struct {
	JobName     string `yaml:"job_name"`
	Scheme      string `yaml:"scheme"`
	MetricsPath string `yaml:"metrics_path"`
	TLSConfig   struct {
		InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	} `yaml:"tls_config"`
	// The bearer token Prometheus sends, as prometheus-operator writes a
	// ServiceMonitor's bearerTokenFile (authorization.credentials_file;
	// bearer_token_file in older releases).
	BearerTokenFile string `yaml:"bearer_token_file"`
	Authorization   struct {
		Type            string `yaml:"type"`
		CredentialsFile string `yaml:"credentials_file"`
	} `yaml:"authorization"`
	KubernetesSDConfigs []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
	RelabelConfigs      []*relabel.Config      `yaml:"relabel_configs"`
	// discoveryKeys are the job's *_sd_configs and static_configs keys
	// with their number of entries, whatever the kind.
	discoveryKeys map[string]int
}

// loadPromConfig decodes the scrape jobs, applies the defaults Prometheus
// applies (scheme http, path /metrics) and checks every relabelling as the
// server does (UTF-8 label names, Prometheus 3's default).
func loadPromConfig(raw []byte) (*promConfig, error) {
	var cfg promConfig
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	var rawJobs struct {
		ScrapeConfigs []map[string]any `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &rawJobs); err != nil {
		return nil, err
	}
	for i, sc := range cfg.ScrapeConfigs {
		if sc.JobName == "" {
			return nil, fmt.Errorf("scrape job %d has no job_name", i)
		}
		if sc.Scheme == "" {
			sc.Scheme = "http"
		}
		if sc.MetricsPath == "" {
			sc.MetricsPath = "/metrics"
		}
		for _, r := range sc.RelabelConfigs {
			if err := r.Validate(model.UTF8Validation); err != nil {
				return nil, fmt.Errorf("job %s: relabelling %+v: %w", sc.JobName, r, err)
			}
		}
		sc.discoveryKeys = map[string]int{}
		for k, v := range rawJobs.ScrapeConfigs[i] {
			if strings.HasSuffix(k, "_sd_configs") || k == "static_configs" {
				list, _ := v.([]any)
				sc.discoveryKeys[k] = len(list)
			}
		}
	}
	return &cfg, nil
}

// envRef is a $(VAR) reference prometheus-config-reloader expands.
var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// virtopScrapeConfig is the scrape job prometheus-operator generates for
// the first endpoint of virtop's ServiceMonitor
// (serviceMonitor/<namespace>/<name>/0), nil if there is none.
func virtopScrapeConfig(cfg *promConfig, sm *monitoringv1.ServiceMonitor) *scrapeConfig {
	name := fmt.Sprintf("serviceMonitor/%s/%s/0", sm.Namespace, sm.Name)
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == name {
			return sc
		}
	}
	return nil
}

func jobNames(cfg *promConfig) []string {
	var out []string
	for _, sc := range cfg.ScrapeConfigs {
		out = append(out, sc.JobName)
	}
	return out
}

// kubernetesSD is the job's one Kubernetes discovery configuration.
func kubernetesSD(t testing.TB, sc *scrapeConfig) *kubernetes.SDConfig {
	t.Helper()
	total := 0
	for _, n := range sc.discoveryKeys {
		total += n
	}
	if len(sc.KubernetesSDConfigs) != 1 || total != 1 {
		t.Fatalf("job %s: discovery configurations %v; want exactly one Kubernetes one", sc.JobName, sc.discoveryKeys)
	}
	return sc.KubernetesSDConfigs[0]
}

// checkScrapeConfig checks what makes the job scrape virtop's metrics
// endpoints: discovery of endpoints in the install namespace only, a keep
// on the Service label prometheus.kubevirt.io=true, a keep on the port
// named metrics, the job taken from the Service's name, https.
func checkScrapeConfig(t *testing.T, sc *scrapeConfig, sm *monitoringv1.ServiceMonitor) {
	t.Helper()
	k := kubernetesSD(t, sc)
	if k.Role != kubernetes.RoleEndpoint && k.Role != kubernetes.RoleEndpointSlice {
		t.Errorf("job %s discovers role %s, want endpoints or endpointslice", sc.JobName, k.Role)
	}
	if got := k.NamespaceDiscovery.Names; !slices.Equal(got, []string{devcluster.InstallNamespace}) {
		t.Errorf("job %s discovers namespaces %v, want [%s]", sc.JobName, got, devcluster.InstallNamespace)
	}
	if sc.Scheme != "https" {
		t.Errorf("job %s scheme %q, want https", sc.JobName, sc.Scheme)
	}
	if !sc.TLSConfig.InsecureSkipVerify {
		t.Errorf("job %s verifies the components' certificates (signed by KubeVirt's own CA)", sc.JobName)
	}
	// The operator's metrics need an authenticated, authorized caller:
	// Prometheus sends its own ServiceAccount token.
	if tokenFile := cmp.Or(sc.Authorization.CredentialsFile, sc.BearerTokenFile); tokenFile != vocab.ServiceAccountTokenFile ||
		(sc.Authorization.Type != "" && sc.Authorization.Type != "Bearer") {
		t.Errorf("job %s sends token file %q (authorization type %q), want %s as a bearer token", sc.JobName, tokenFile, sc.Authorization.Type, vocab.ServiceAccountTokenFile)
	}
	portLabel := "__meta_kubernetes_endpoint_port_name"
	if k.Role == kubernetes.RoleEndpointSlice {
		portLabel = "__meta_kubernetes_endpointslice_port_name"
	}
	svcLabel := "__meta_kubernetes_service_label_" + strings.NewReplacer(".", "_", "/", "_", "-", "_").Replace(vocab.PrometheusLabel)
	var keepSvc, keepPort, jobFromSvc bool
	for _, r := range sc.RelabelConfigs {
		src := make([]string, len(r.SourceLabels))
		for i, l := range r.SourceLabels {
			src[i] = string(l)
		}
		switch {
		case r.Action == relabel.Keep && len(src) > 0 && src[0] == svcLabel && r.Regex.MatchString(vocab.PrometheusLabelValue+";true"):
			keepSvc = true
		case r.Action == relabel.Keep && slices.Equal(src, []string{portLabel}) && r.Regex.MatchString("metrics") && !r.Regex.MatchString("webhooks"):
			keepPort = true
		case r.Action == relabel.Replace && r.TargetLabel == model.JobLabel && slices.Equal(src, []string{"__meta_kubernetes_service_name"}):
			jobFromSvc = true
		}
	}
	if !keepSvc || !keepPort || !jobFromSvc {
		t.Errorf("job %s: keep on %s=%s: %t, keep on %s=metrics: %t, job from the Service's name: %t; relabelling: %v",
			sc.JobName, svcLabel, vocab.PrometheusLabelValue, keepSvc, portLabel, keepPort, jobFromSvc, sc.RelabelConfigs)
	}
	if sm.Spec.JobLabel != "" {
		t.Errorf("virtop's ServiceMonitor sets jobLabel %q: the job would not be %s", sm.Spec.JobLabel, virtopJob)
	}
}

// metricsEndpoints are the ip:port of every endpoint of Service
// kubevirt-prometheus-metrics's port metrics, sorted.
func metricsEndpoints(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	poll.Eventually(t, "endpoints of Service "+virtopJob, time.Minute, func(ctx context.Context) (bool, error) {
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(devcluster.InstallNamespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: virtopJob}); err != nil {
			return false, err
		}
		out = nil
		for _, s := range slices.Items {
			for _, p := range s.Ports {
				if p.Name == nil || *p.Name != "metrics" || p.Port == nil {
					continue
				}
				for _, e := range s.Endpoints {
					for _, a := range e.Addresses {
						out = append(out, fmt.Sprintf("%s:%d", a, *p.Port))
					}
				}
			}
		}
		sort.Strings(out)
		return len(out) > 0, fmt.Errorf("%d EndpointSlices, no metrics endpoint", len(slices.Items))
	})
	return out
}

// discoverTargets runs Prometheus's Kubernetes discovery with the job's
// discovery configuration against the cluster (through its kubeconfig
// instead of in-cluster credentials) until it has delivered the initial
// target groups, and applies the job's relabelling to every discovered
// target as Prometheus's scrape manager does (scrape.PopulateLabels): the
// targets kept, with their final labels, and the dropped ones (address,
// Service, port, pod).
func discoverTargets(ctx context.Context, kubeconfig string, sc *scrapeConfig) ([]labels.Labels, []string, error) {
	var k *kubernetes.SDConfig
	for _, kk := range sc.KubernetesSDConfigs {
		cp := *kk
		k = &cp
	}
	if k == nil {
		return nil, nil, fmt.Errorf("job %s has no Kubernetes discovery", sc.JobName)
	}
	k.KubeConfig = kubeconfig
	k.HTTPClientConfig = commonconfig.DefaultHTTPClientConfig
	reg := prometheus.NewRegistry()
	metrics := k.NewDiscovererMetrics(reg, discovery.NewRefreshMetrics(reg))
	if err := metrics.Register(); err != nil {
		return nil, nil, err
	}
	defer metrics.Unregister()
	d, err := k.NewDiscoverer(discovery.DiscovererOptions{Logger: slog.New(slog.DiscardHandler), Metrics: metrics})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch := make(chan []*targetgroup.Group)
	go d.Run(ctx, ch)
	// The discoverer sends the groups of its synced informers, then
	// updates; collect until the stream is quiet for a second.
	groups := map[string]*targetgroup.Group{}
	quiet := time.NewTimer(5 * time.Second)
	defer quiet.Stop()
collect:
	for {
		select {
		case tgs := <-ch:
			for _, g := range tgs {
				if g != nil {
					groups[g.Source] = g
				}
			}
			quiet.Reset(time.Second)
		case <-quiet.C:
			break collect
		case <-ctx.Done():
			break collect
		}
	}
	var kept []labels.Labels
	var dropped []string
	lb := labels.NewBuilder(labels.EmptyLabels())
	for _, g := range groups {
		for _, tl := range g.Targets {
			lb.Reset(labels.EmptyLabels())
			for n, v := range tl {
				lb.Set(string(n), string(v))
			}
			for n, v := range g.Labels {
				if _, ok := tl[n]; !ok {
					lb.Set(string(n), string(v))
				}
			}
			for n, v := range map[string]string{model.JobLabel: sc.JobName, model.SchemeLabel: sc.Scheme, model.MetricsPathLabel: sc.MetricsPath} {
				if lb.Get(n) == "" {
					lb.Set(n, v)
				}
			}
			before := lb.Labels()
			if !relabel.ProcessBuilder(lb, sc.RelabelConfigs...) {
				dropped = append(dropped, fmt.Sprintf("%s (service %q port %q pod %q phase %q)", before.Get(model.AddressLabel),
					before.Get("__meta_kubernetes_service_name"), before.Get("__meta_kubernetes_endpoint_port_name")+before.Get("__meta_kubernetes_endpointslice_port_name"),
					before.Get("__meta_kubernetes_pod_name"), before.Get("__meta_kubernetes_pod_phase")))
				continue
			}
			kept = append(kept, lb.Labels())
		}
	}
	return kept, dropped, nil
}

// generatedRuleGroups returns the rule groups of PrometheusRule rule in the
// rule files prometheus-operator generated for the Prometheus key
// (ConfigMaps prometheus-<name>-rulefiles-<i>, one key per
// PrometheusRule, <namespace>-<name>-<uid>.yaml), parsed and validated by
// Prometheus's rule parser; nil if no rule file is the PrometheusRule's.
func generatedRuleGroups(ctx context.Context, c client.Client, key client.ObjectKey, rule *monitoringv1.PrometheusRule) ([]rulefmt.RuleGroup, error) {
	cms := &corev1.ConfigMapList{}
	if err := c.List(ctx, cms, client.InNamespace(key.Namespace)); err != nil {
		return nil, err
	}
	prefix := "prometheus-" + key.Name + "-rulefiles-"
	file := fmt.Sprintf("%s-%s-%s.yaml", rule.Namespace, rule.Name, rule.UID)
	for _, cm := range cms.Items {
		if !strings.HasPrefix(cm.Name, prefix) {
			continue
		}
		content, ok := cm.Data[file]
		if !ok {
			continue
		}
		rgs, errs := rulefmt.Parse([]byte(content), false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			return nil, fmt.Errorf("ConfigMap %s key %s: Prometheus refuses the rule file: %v", cm.Name, file, errs)
		}
		return rgs.Groups, nil
	}
	return nil, nil
}

// compareRuleGroups checks that the generated rule file holds virtop's
// groups, in order, with the same alerts and recording rules.
func compareRuleGroups(t *testing.T, rule *monitoringv1.PrometheusRule, got []rulefmt.RuleGroup) {
	t.Helper()
	names := func(rs []string) string { return strings.Join(rs, ",") }
	var wantGroups, gotGroups []string
	for _, g := range rule.Spec.Groups {
		wantGroups = append(wantGroups, g.Name)
	}
	for _, g := range got {
		gotGroups = append(gotGroups, g.Name)
	}
	if !slices.Equal(gotGroups, wantGroups) || len(wantGroups) == 0 {
		t.Fatalf("rule groups in the generated rule file %v, virtop's PrometheusRule has %v", gotGroups, wantGroups)
	}
	total := 0
	for i, g := range rule.Spec.Groups {
		var want, have []string
		for _, r := range g.Rules {
			want = append(want, r.Alert+r.Record)
		}
		for _, r := range got[i].Rules {
			have = append(have, r.Alert+r.Record)
		}
		if names(want) != names(have) {
			t.Errorf("group %s: generated rules %v, virtop's %v", g.Name, have, want)
		}
		total += len(want)
	}
	t.Logf("the generated rule file holds virtop's %d groups (%d rules): %v", len(wantGroups), total, wantGroups)
}

// withoutMeta drops the discovery's __meta_ labels (relabelling input only).
func withoutMeta(ls labels.Labels) labels.Labels {
	b := labels.NewBuilder(ls)
	ls.Range(func(l labels.Label) {
		if strings.HasPrefix(l.Name, model.MetaLabelPrefix) {
			b.Del(l.Name)
		}
	})
	return b.Labels()
}

// checkOperatorScraped runs a real Prometheus (Debian's package) that
// scrapes the host operator's metrics endpoint as the generated job does
// (https, certificate unverified) with the token of the Prometheus's
// ServiceAccount in the file the job names: the token a pod of that
// Prometheus would send. It is let in only through the ClusterRoleBinding
// virtop-metrics-reader the operator made for that account: up is 1 and
// virtop's metrics are stored. The same scrape without a token is refused
// (up 0).
func checkOperatorScraped(t *testing.T, env *framework.Env, c client.Client, sc *scrapeConfig, metricsAddr string) {
	t.Helper()
	ctx := context.Background()
	account := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: devcluster.MonitoringNamespace, Name: devcluster.PrometheusName}
	crb := &rbacv1.ClusterRoleBinding{}
	poll.Eventually(t, "ClusterRoleBinding "+vocab.MetricsReaderName+" to name the Prometheus's account", time.Minute, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: vocab.MetricsReaderName}, crb); err != nil {
			return false, err
		}
		return slices.Contains(crb.Subjects, account), fmt.Errorf("subjects %v, want %v", crb.Subjects, account)
	})
	tr, err := env.Kube.CoreV1().ServiceAccounts(account.Namespace).CreateToken(ctx, account.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s/%s (the Prometheus pods' account): %v", account.Namespace, account.Name, err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	job := func(name, auth string) string {
		return fmt.Sprintf("- job_name: %s\n  scheme: %s\n  tls_config:\n    insecure_skip_verify: %t\n%s  static_configs:\n  - targets: [%q]\n",
			name, sc.Scheme, sc.TLSConfig.InsecureSkipVerify, auth, metricsAddr)
	}
	prom := env.StartPrometheusWith(t, "", nil, framework.PrometheusOptions{
		ScrapeConfigs: job("virt-operator", fmt.Sprintf("  authorization:\n    credentials_file: %s\n", tokenFile)) + job("anonymous", ""),
	})
	poll.Eventually(t, "Prometheus to scrape the operator with the account's token, and be refused without one", 2*time.Minute, func(ctx context.Context) (bool, error) {
		up, err := prom.Query(ctx, "up", "job")
		if err != nil {
			return false, err
		}
		stored, err := prom.Query(ctx, `count(virtop_api_requests_total{job="virt-operator"})`, "")
		if err != nil {
			return false, err
		}
		v, seenWith := up["virt-operator"]
		w, seenWithout := up["anonymous"]
		ok := seenWith && seenWithout && v == 1 && w == 0 && stored[""] > 0
		return ok, fmt.Errorf("up with the token %v (seen %t), without %v (seen %t); virtop_api_requests_total series stored: %v", v, seenWith, w, seenWithout, stored[""])
	})
	t.Logf("a real Prometheus scrapes the operator with %s/%s's token (bound by %s), and is refused without a token", account.Namespace, account.Name, vocab.MetricsReaderName)
}
