// Package diff compares two install strategies object by object: which
// objects one has and the other lacks, and for objects both have, which
// fields differ. PrometheusRules are compared alert by alert and recording
// rule by recording rule as well.
//
// An operand is a dump (a multi-document YAML stream or a JSON List), a
// strategy ConfigMap written by virtop or by upstream KubeVirt's operator,
// or version:<tag>, which is rendered in process.
package diff

import (
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// VersionPrefix marks an operand rendered in process: version:v1.5.3.
const VersionPrefix = "version:"

// RenderFunc renders the strategy of a KubeVirt version.
type RenderFunc func(version string) (*strategy.Strategy, error)

// Load reads one operand into its objects. A version:<tag> operand is
// rendered by render; any other operand names a file. A file holding exactly
// one ConfigMap labelled kubevirt.io/install-strategy (virtop's, or
// upstream's, gzip+base64-encoded or plain) gives the objects of the
// strategy it carries; any other file is read as a YAML stream or JSON List
// of objects, gzipped or not. Upstream's quirks (duplicate CA ConfigMaps,
// odd apiVersions) are undone while reading (strategy.DecodeManifests).
func Load(operand string, render RenderFunc) ([]client.Object, error) {
	return Loader{Render: render}.Load(operand)
}

// UpstreamFunc brings an install strategy written by upstream's operator,
// of a KubeVirt version, to what that operator applies
// (strategy.AsAppliedByUpstream for the rendering flags' config), so it
// compares with virtop's, which folds those steps into the strategy.
type UpstreamFunc func(version string, objs []client.Object) ([]client.Object, error)

// Loader loads operands: Render renders version: operands, Upstream (when
// set) treats upstream's strategies.
type Loader struct {
	Render   RenderFunc
	Upstream UpstreamFunc
}

// Load reads one operand, as the package function Load does; a strategy of
// upstream's operator is passed through Upstream.
func (l Loader) Load(operand string) ([]client.Object, error) {
	render := l.Render
	if v, ok := strings.CutPrefix(operand, VersionPrefix); ok {
		if v == "" {
			return nil, fmt.Errorf("operand %q names no version (want version:<tag>, for example version:v1.5.3)", operand)
		}
		if render == nil {
			return nil, fmt.Errorf("operand %q: cannot render versions here", operand)
		}
		s, err := render(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", operand, err)
		}
		return checkOperand(operand, s.Objects)
	}
	if operand == "" {
		return nil, fmt.Errorf("empty operand (want a file or version:<tag>)")
	}
	data, err := os.ReadFile(operand)
	if err != nil {
		return nil, err
	}
	objs, err := strategy.ReadManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", operand, err)
	}
	var cms []*corev1.ConfigMap
	for _, o := range objs {
		if cm, ok := o.(*corev1.ConfigMap); ok && isStrategyConfigMap(cm) {
			cms = append(cms, cm)
		}
	}
	switch {
	case len(cms) == 1 && len(objs) == 1:
		s, err := strategy.FromConfigMap(cms[0])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", operand, err)
		}
		return l.upstream(operand, s.Version, s.Objects)
	case len(cms) > 0:
		// A list of several strategy ConfigMaps (kubectl get -l ...), or one
		// mixed with other objects: which strategy was meant is a guess.
		return nil, fmt.Errorf("%s: holds %d install-strategy ConfigMaps among %d objects; give a file with exactly one ConfigMap, or a dump", operand, len(cms), len(objs))
	}
	return l.upstream(operand, "", objs)
}

// upstream checks an operand and, when upstream's operator wrote it and an
// UpstreamFunc is set, brings it to what that operator applies.
func (l Loader) upstream(operand, version string, objs []client.Object) ([]client.Object, error) {
	objs, err := checkOperand(operand, objs)
	if err != nil || l.Upstream == nil || !strategy.IsUpstream(objs) {
		return objs, err
	}
	if version == "" {
		version = strategy.UpstreamVersion(objs)
	}
	if version == "" {
		return nil, fmt.Errorf("%s: an upstream strategy without a virt-api image to tell its version", operand)
	}
	out, err := l.Upstream(version, objs)
	if err != nil {
		return nil, fmt.Errorf("%s (upstream's strategy of %s): %w", operand, version, err)
	}
	return out, nil
}

func isStrategyConfigMap(cm *corev1.ConfigMap) bool {
	_, ok := cm.Labels[vocab.InstallStrategyLabel]
	return ok
}

// checkOperand refuses operands that cannot be compared object by object:
// no objects at all (most often a failed redirect), or one key twice.
func checkOperand(operand string, objs []client.Object) ([]client.Object, error) {
	if len(objs) == 0 {
		return nil, fmt.Errorf("%s: holds no objects", operand)
	}
	seen := make(map[strategy.Key]bool, len(objs))
	for _, o := range objs {
		k := strategy.KeyOf(o)
		if seen[k] {
			return nil, fmt.Errorf("%s: %s appears twice", operand, k)
		}
		seen[k] = true
	}
	return objs, nil
}
