package devcluster

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// LocalPaths say where a Prometheus run as a process of the local cluster,
// rather than in its pod, finds what the pod would have mounted.
type LocalPaths struct {
	// ServiceAccountDir replaces /var/run/secrets/kubernetes.io/serviceaccount:
	// the Prometheus's ServiceAccount token, ca.crt and namespace.
	ServiceAccountDir string
	// RulesDir replaces /etc/prometheus/rules: one directory per rule
	// ConfigMap, as the pod mounts them.
	RulesDir string
	// APIServer is the API server's URL, which in a pod the in-cluster
	// configuration finds from KUBERNETES_SERVICE_HOST.
	APIServer string
	// PodName is what $(POD_NAME) expands to (replica 0 of shard 0).
	PodName string
	// SDDir holds the target files of the Kubernetes discoveries
	// (KubernetesSD), one per discovery.
	SDDir string
}

// KubernetesSD is one Kubernetes discovery of the generated configuration,
// run by the sync process (RunKubernetesSD) instead of Prometheus, which
// reads its targets from File (file_sd_configs): Debian's prometheus
// package is built without the Kubernetes discovery.
type KubernetesSD struct {
	// Job is the scrape job's name.
	Job string
	// File is where the discovery writes its targets.
	File string
	// Config is the discovery's configuration as the job states it (YAML),
	// with the API server and the ServiceAccount's credentials added.
	Config []byte
}

const (
	podServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	podRulesDir          = "/etc/prometheus/rules"
)

// envReference is a $(VAR) reference that prometheus-config-reloader
// expands from the pod's environment.
var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// LocalPrometheusConfig turns the configuration prometheus-operator
// generated for a Prometheus (its Secret's prometheus.yaml.gz, unzipped)
// into one a Prometheus process of the local cluster runs unchanged but
// for what only a pod provides: the $(SHARD) and $(POD_NAME) references
// prometheus-config-reloader expands, the paths of the ServiceAccount's
// files and of the rule files (p), and the API server of each Kubernetes
// discovery without one (in a pod: the in-cluster configuration, which
// reads fixed paths and the pod's environment). Any other file of the pod
// the configuration names (a Secret or ConfigMap mounted under
// /etc/prometheus) is an error naming it: nothing provides it here.
//
// Each Kubernetes discovery is then moved out of the configuration: the job
// reads its targets from a file (file_sd_configs) that the discovery,
// returned as a KubernetesSD, writes.
func LocalPrometheusConfig(raw []byte, p LocalPaths) ([]byte, []KubernetesSD, error) {
	vars := map[string]string{"SHARD": "0", "POD_NAME": p.PodName}
	var unknown []string
	s := envReference.ReplaceAllStringFunc(string(raw), func(ref string) string {
		if v, ok := vars[envReference.FindStringSubmatch(ref)[1]]; ok {
			return v
		}
		unknown = append(unknown, ref)
		return ref
	})
	if len(unknown) > 0 {
		return nil, nil, fmt.Errorf("the generated configuration references %v, which only a pod's environment provides", unknown)
	}
	s = strings.ReplaceAll(s, podServiceAccountDir+"/", strings.TrimSuffix(p.ServiceAccountDir, "/")+"/")
	s = strings.ReplaceAll(s, podRulesDir+"/", strings.TrimSuffix(p.RulesDir, "/")+"/")
	if i := strings.Index(s, "/etc/prometheus/"); i >= 0 {
		end := strings.IndexAny(s[i:], " \n\"'")
		if end < 0 {
			end = len(s) - i
		}
		return nil, nil, fmt.Errorf("the generated configuration names %s, a file of the Prometheus pod that the local cluster's Prometheus does not have", s[i:i+end])
	}
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
		return nil, nil, fmt.Errorf("the generated configuration: %w", err)
	}
	var out []KubernetesSD
	jobs, _ := cfg["scrape_configs"].([]any)
	for i, j := range jobs {
		job, _ := j.(map[string]any)
		sds, _ := job["kubernetes_sd_configs"].([]any)
		if len(sds) == 0 {
			continue
		}
		name := fmt.Sprint(job["job_name"])
		var files []any
		for n, sd := range sds {
			k, _ := sd.(map[string]any)
			if k == nil {
				continue
			}
			if k["api_server"] == nil && k["kubeconfig_file"] == nil {
				if k["authorization"] != nil || k["bearer_token_file"] != nil || k["tls_config"] != nil {
					return nil, nil, fmt.Errorf("job %s: its Kubernetes discovery has credentials of its own but no API server", name)
				}
				k["api_server"] = p.APIServer
				k["authorization"] = map[string]any{"credentials_file": p.ServiceAccountDir + "/token"}
				k["tls_config"] = map[string]any{"ca_file": p.ServiceAccountDir + "/ca.crt"}
			}
			raw, err := yaml.Marshal(k)
			if err != nil {
				return nil, nil, err
			}
			file := fmt.Sprintf("%s/%d-%d-%s.json", strings.TrimSuffix(p.SDDir, "/"), i, n, unsafeFileChars.ReplaceAllString(name, "_"))
			out = append(out, KubernetesSD{Job: name, File: file, Config: raw})
			files = append(files, file)
		}
		delete(job, "kubernetes_sd_configs")
		job["file_sd_configs"] = []any{map[string]any{"files": files}}
	}
	local, err := yaml.Marshal(cfg)
	return local, out, err
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// RuleFiles are the rule files prometheus-operator generated for a
// Prometheus: its ConfigMaps prometheus-<name>-rulefiles-<i> (every key a
// file), by the path (relative to RulesDir) where the pod mounts each.
func RuleFiles(prometheus string, configMaps map[string]map[string]string) map[string]string {
	out := map[string]string{}
	prefix := "prometheus-" + prometheus + "-rulefiles-"
	names := make([]string, 0, len(configMaps))
	for n := range configMaps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasPrefix(n, prefix) {
			continue
		}
		for key, content := range configMaps[n] {
			out[n+"/"+key] = content
		}
	}
	return out
}
