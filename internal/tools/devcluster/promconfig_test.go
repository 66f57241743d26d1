package devcluster

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"sigs.k8s.io/yaml"
)

// generated is the shape of what prometheus-operator v0.85.0 writes for a
// Prometheus selecting one ServiceMonitor with a bearer token file and one
// PrometheusRule (trimmed to what LocalPrometheusConfig touches).
const generated = `global:
  evaluation_interval: 10s
  scrape_interval: 10s
  external_labels:
    prometheus: monitoring/kube-prometheus-stack-prometheus
    prometheus_replica: $(POD_NAME)
rule_files:
- /etc/prometheus/rules/prometheus-kube-prometheus-stack-prometheus-rulefiles-0/*.yaml
scrape_configs:
- job_name: serviceMonitor/monitoring/kubevirt/0
  kubernetes_sd_configs:
  - role: endpoints
    namespaces:
      names:
      - kubevirt
  scheme: https
  tls_config:
    insecure_skip_verify: true
  authorization:
    type: Bearer
    credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token
  relabel_configs:
  - source_labels: [__tmp_hash]
    regex: $(SHARD)
    action: keep
- job_name: kube-state-metrics
  static_configs:
  - targets: ["127.0.0.1:8080"]
`

var localPaths = LocalPaths{
	ServiceAccountDir: "/state/prometheus/config/serviceaccount",
	RulesDir:          "/state/prometheus/config/rules",
	APIServer:         "https://127.0.0.1:32001",
	PodName:           "prometheus-kube-prometheus-stack-prometheus-0",
	SDDir:             "/state/prometheus/config/sd",
}

func TestLocalPrometheusConfig(t *testing.T) {
	out, sds, err := LocalPrometheusConfig([]byte(generated), localPaths)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, gone := range []string{"$(", "/var/run/secrets", "/etc/prometheus"} {
		if strings.Contains(s, gone) {
			t.Errorf("the local configuration still holds %q:\n%s", gone, s)
		}
	}
	var cfg struct {
		Global struct {
			ExternalLabels map[string]string `json:"external_labels"`
		} `json:"global"`
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `json:"job_name"`
			Authorization struct {
				CredentialsFile string `json:"credentials_file"`
			} `json:"authorization"`
			KubernetesSDConfigs []map[string]any `json:"kubernetes_sd_configs"`
			FileSDConfigs       []struct {
				Files []string `json:"files"`
			} `json:"file_sd_configs"`
			RelabelConfigs []struct {
				Regex string `json:"regex"`
			} `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Global.ExternalLabels["prometheus_replica"]; got != localPaths.PodName {
		t.Errorf("prometheus_replica %q, want %q", got, localPaths.PodName)
	}
	if want := "/state/prometheus/config/rules/prometheus-kube-prometheus-stack-prometheus-rulefiles-0/*.yaml"; len(cfg.RuleFiles) != 1 || cfg.RuleFiles[0] != want {
		t.Errorf("rule_files %v, want [%s]", cfg.RuleFiles, want)
	}
	if len(cfg.ScrapeConfigs) != 2 {
		t.Fatalf("%d scrape jobs, want 2", len(cfg.ScrapeConfigs))
	}
	sm := cfg.ScrapeConfigs[0]
	if sm.Authorization.CredentialsFile != "/state/prometheus/config/serviceaccount/token" {
		t.Errorf("the job's token file is %s", sm.Authorization.CredentialsFile)
	}
	if sm.RelabelConfigs[0].Regex != "0" {
		t.Errorf("$(SHARD) expanded to %q, want 0", sm.RelabelConfigs[0].Regex)
	}
	// The discovery moved out: the job reads the file it writes.
	if len(sds) != 1 || sds[0].Job != sm.JobName {
		t.Fatalf("discoveries %+v, want the one of job %s", sds, sm.JobName)
	}
	if sm.KubernetesSDConfigs != nil || len(sm.FileSDConfigs) != 1 || len(sm.FileSDConfigs[0].Files) != 1 || sm.FileSDConfigs[0].Files[0] != sds[0].File {
		t.Errorf("job %s: kubernetes_sd_configs %v, file_sd_configs %v; want only the file %s", sm.JobName, sm.KubernetesSDConfigs, sm.FileSDConfigs, sds[0].File)
	}
	if want := "/state/prometheus/config/sd/0-0-serviceMonitor_monitoring_kubevirt_0.json"; sds[0].File != want {
		t.Errorf("target file %s, want %s", sds[0].File, want)
	}
	sd := map[string]any{}
	if err := yaml.Unmarshal(sds[0].Config, &sd); err != nil {
		t.Fatal(err)
	}
	if sd["role"] != "endpoints" || sd["api_server"] != localPaths.APIServer {
		t.Errorf("the discovery's role %v, api_server %v; want endpoints, %s", sd["role"], sd["api_server"], localPaths.APIServer)
	}
	auth, _ := sd["authorization"].(map[string]any)
	tls, _ := sd["tls_config"].(map[string]any)
	if auth["credentials_file"] != "/state/prometheus/config/serviceaccount/token" || tls["ca_file"] != "/state/prometheus/config/serviceaccount/ca.crt" {
		t.Errorf("the discovery does not authenticate as the ServiceAccount: %v", sd)
	}
	if cfg.ScrapeConfigs[1].FileSDConfigs != nil {
		t.Errorf("a static job got a file discovery: %v", cfg.ScrapeConfigs[1].FileSDConfigs)
	}
}

func TestLocalPrometheusConfigRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"an environment variable only the pod has": {
			in: "global:\n  external_labels:\n    zone: $(ZONE)\n", want: "$(ZONE)",
		},
		"a Secret mounted in the pod": {
			in:   "scrape_configs:\n- job_name: x\n  tls_config:\n    cert_file: /etc/prometheus/secrets/client/tls.crt\n",
			want: "/etc/prometheus/secrets/client/tls.crt",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := LocalPrometheusConfig([]byte(tc.in), localPaths)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestRuleFiles(t *testing.T) {
	got := RuleFiles("p", map[string]map[string]string{
		"prometheus-p-rulefiles-0": {"kubevirt-rules.yaml": "groups: []"},
		"prometheus-q-rulefiles-0": {"other.yaml": "groups: []"},
		"kube-root-ca.crt":         {"ca.crt": "x"},
	})
	if len(got) != 1 || got["prometheus-p-rulefiles-0/kubevirt-rules.yaml"] != "groups: []" {
		t.Errorf("RuleFiles = %v", got)
	}
}

func TestFileSDLeavesOutUnreachable(t *testing.T) {
	_, bridge, _ := net.ParseCIDR("10.140.212.0/24")
	groups := map[string]*targetgroup.Group{"endpoints/kubevirt/kubevirt-prometheus-metrics": {
		Source: "endpoints/kubevirt/kubevirt-prometheus-metrics",
		Labels: model.LabelSet{"__meta_kubernetes_namespace": "kubevirt"},
		Targets: []model.LabelSet{
			{model.AddressLabel: "10.140.212.7:8443", "__meta_kubernetes_pod_name": "virt-api-1"},
			{model.AddressLabel: "10.150.3.9:8443", "__meta_kubernetes_pod_name": "virt-handler-x"},
		},
	}}
	raw, n, dropped, err := fileSD(groups, []*net.IPNet{bridge})
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if n != 1 || len(got) != 1 || got[0].Targets[0] != "10.140.212.7:8443" ||
		got[0].Labels["__meta_kubernetes_pod_name"] != "virt-api-1" || got[0].Labels["__meta_kubernetes_namespace"] != "kubevirt" {
		t.Errorf("file_sd %s, want only virt-api-1 with its group's and its own labels", raw)
	}
	if len(dropped) != 1 || dropped[0] != "10.150.3.9:8443" {
		t.Errorf("left out %v, want the fake pod's address", dropped)
	}
}
