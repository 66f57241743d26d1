package devcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// ProbeCRD is prometheus-operator's Probe CRD at the version the tools
// cache runs (toolpaths.PrometheusOperatorVersion), read from its module
// in the Go module cache, where `make tools` left it when it built
// prometheus-operator. prometheus-operator's Prometheus controller waits
// for it, and test/crds/monitoring does not hold it.
func ProbeCRD() (*unstructured.Unstructured, error) {
	modcache := os.Getenv("GOMODCACHE")
	if modcache == "" {
		cmd := exec.Command("go", "env", "GOMODCACHE")
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		if out, err := cmd.Output(); err == nil {
			modcache = strings.TrimSpace(string(out))
		}
	}
	if modcache == "" {
		return nil, fmt.Errorf("cannot find the Go module cache (go env GOMODCACHE), which holds prometheus-operator's Probe CRD")
	}
	mod := "github.com/prometheus-operator/prometheus-operator@" + toolpaths.PrometheusOperatorVersion
	p := filepath.Join(modcache, filepath.FromSlash(mod), "example", "prometheus-operator-crd", "monitoring.coreos.com_probes.yaml")
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("prometheus-operator's Probe CRD: %w (`make tools` builds prometheus-operator from %s and leaves it in the module cache)", err, mod)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(bytes.TrimPrefix(raw, []byte("---\n")), &obj.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return obj, nil
}
