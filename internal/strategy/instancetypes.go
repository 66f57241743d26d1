package strategy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
)

// The common instancetypes and preferences are published data of the
// kubevirt/common-instancetypes project, which KubeVirt embeds in its
// operator (pkg/virt-operator/resource/generate/components/data/). virtop
// embeds the same bundles (internal/release/data/instancetypes/<version>/),
// and each release names the one it ships.

// Kinds and API version of the bundles' objects. There are no Go types for
// them in virtop's dependencies, so they are rendered unstructured.
const (
	InstancetypeAPIVersion       = "instancetype.kubevirt.io/v1beta1"
	ClusterInstancetypeKind      = "VirtualMachineClusterInstancetype"
	ClusterPreferenceKind        = "VirtualMachineClusterPreference"
	clusterInstancetypesBundleFN = "common-clusterinstancetypes-bundle.yaml"
	clusterPreferencesBundleFN   = "common-clusterpreferences-bundle.yaml"
)

// renderInstancetypes renders the common cluster instancetypes and
// preferences of the release, sorted by kind and name, in stage
// instancetypes. Nothing is rendered when the KubeVirt resource disables
// commonInstancetypesDeployment; the plan then prunes what an earlier
// strategy applied, as upstream deletes them.
func renderInstancetypes(c *config.DeploymentConfig, r *release.Release) ([]client.Object, error) {
	if !c.CommonInstancetypes {
		return nil, nil
	}
	b, err := commonBundle(r.Version)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(b.instancetypes)+len(b.preferences))
	for _, list := range [][]*unstructured.Unstructured{b.instancetypes, b.preferences} {
		for _, u := range list {
			obj := u.DeepCopy()
			stage.Set(obj, stage.Instancetypes)
			out = append(out, obj)
		}
	}
	return out, nil
}

// parsedBundle is one common-instancetypes release, parsed once.
type parsedBundle struct {
	once          sync.Once
	instancetypes []*unstructured.Unstructured
	preferences   []*unstructured.Unstructured
	err           error
}

var (
	bundlesMu sync.Mutex
	bundles   = map[string]*parsedBundle{}
)

// commonBundle returns the parsed bundle of a KubeVirt release. The shared
// objects must not be modified; callers copy them.
func commonBundle(kubevirtVersion string) (*parsedBundle, error) {
	rel, ok := release.Lookup(kubevirtVersion)
	if !ok {
		return nil, fmt.Errorf("no common instancetypes bundle for KubeVirt %s", kubevirtVersion)
	}
	ciVersion := rel.CommonInstancetypes
	bundlesMu.Lock()
	b, ok := bundles[ciVersion]
	if !ok {
		b = &parsedBundle{}
		bundles[ciVersion] = b
	}
	bundlesMu.Unlock()
	b.once.Do(func() {
		b.instancetypes, b.err = parseEmbeddedBundle(ciVersion, clusterInstancetypesBundleFN, ClusterInstancetypeKind)
		if b.err != nil {
			return
		}
		b.preferences, b.err = parseEmbeddedBundle(ciVersion, clusterPreferencesBundleFN, ClusterPreferenceKind)
	})
	if b.err != nil {
		return nil, fmt.Errorf("common instancetypes %s: %w", ciVersion, b.err)
	}
	return b, nil
}

func parseEmbeddedBundle(version, path, kind string) ([]*unstructured.Unstructured, error) {
	raw, err := release.InstancetypeBundle(version, path)
	if err != nil {
		return nil, err
	}
	objs, err := parseBundle(raw, kind)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// parseBundle decodes a multi-document YAML bundle whose every object must be
// a cluster-scoped object of the given kind in instancetype.kubevirt.io/v1beta1
// with a unique name. Empty documents are skipped. The result is sorted by
// name.
func parseBundle(raw []byte, kind string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	seen := map[string]bool{}
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		// UnmarshalJSON keeps integers as int64, so DeepCopy is safe.
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		switch {
		case u.GetAPIVersion() != InstancetypeAPIVersion || u.GetKind() != kind:
			return nil, fmt.Errorf("document %d: got %s %s, want %s %s", i, u.GetAPIVersion(), u.GetKind(), InstancetypeAPIVersion, kind)
		case u.GetName() == "":
			return nil, fmt.Errorf("document %d: %s has no name", i, kind)
		case u.GetNamespace() != "":
			return nil, fmt.Errorf("document %d: %s %s is cluster-scoped but has namespace %q", i, kind, u.GetName(), u.GetNamespace())
		case seen[u.GetName()]:
			return nil, fmt.Errorf("document %d: %s %s appears twice", i, kind, u.GetName())
		}
		seen[u.GetName()] = true
		spec, ok := u.Object["spec"].(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("document %d: %s %s has no spec", i, kind, u.GetName())
		}
		if err := canonicalQuantities(spec); err != nil {
			return nil, fmt.Errorf("document %d: %s %s: %w", i, kind, u.GetName(), err)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s objects", kind)
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// canonicalQuantities writes memory sizes ("guest") in the canonical form
// upstream's objects carry: upstream decodes the bundle into its Go types,
// whose resource.Quantity re-encodes 1.5Gi as 1536Mi. The API server keeps a
// custom resource's spelling, so it must be right here.
func canonicalQuantities(m map[string]interface{}) error {
	for k, v := range m {
		switch t := v.(type) {
		case map[string]interface{}:
			if err := canonicalQuantities(t); err != nil {
				return err
			}
		case string:
			if k != "guest" {
				continue
			}
			q, err := resource.ParseQuantity(t)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			m[k] = q.String()
		}
	}
	return nil
}
