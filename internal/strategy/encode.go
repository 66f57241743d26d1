package strategy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"

	yamlv2 "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// maxDecodedManifestLen bounds what a strategy ConfigMap may inflate to.
const maxDecodedManifestLen = 16 << 20 // 16 MiB: four times the largest release (v1.9.0, 4.2 MB)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func newOfSameType(o client.Object) (client.Object, error) {
	t := reflect.TypeOf(o)
	if t.Kind() != reflect.Pointer {
		return nil, fmt.Errorf("object %T is not a pointer", o)
	}
	return reflect.New(t.Elem()).Interface().(client.Object), nil
}

// EncodeObject writes one object as YAML without status or the
// server-written creationTimestamp, which a desired object never carries.
func EncodeObject(o client.Object) ([]byte, error) {
	var buf bytes.Buffer
	y := getYAMLWriter()
	defer putYAMLWriter(y)
	if err := writeObject(&buf, y, o); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// objectDocument is what EncodeObject writes for o: its unstructured form
// without status and metadata.creationTimestamp.
func objectDocument(o client.Object) (map[string]interface{}, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", KeyOf(o), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	return m, nil
}

// writeObject writes o's document (see EncodeObject) to w.
func writeObject(w io.Writer, y *yamlWriter, o client.Object) error {
	m, err := objectDocument(o)
	if err != nil {
		return err
	}
	_, err = writeYAMLDocument(w, y, m)
	return err
}

// writeYAMLDocument writes v as yamlv2.Marshal(v) would: the map holds only
// JSON-compatible values, so yaml.v2 writes it directly (keys sorted), as
// sigs.k8s.io/yaml would after a slower JSON round trip. The streaming
// writer (yamlwriter.go) gives those bytes with far fewer allocations; for
// the values it cannot reproduce exactly (it says so before writing
// anything) yaml.v2 itself writes the document, and usedYAMLv2 says so.
func writeYAMLDocument(w io.Writer, y *yamlWriter, v interface{}) (usedYAMLv2 bool, err error) {
	err = y.writeDocument(w, v)
	if !errors.Is(err, errYAMLUnsupported) {
		return false, err
	}
	b, err := yamlv2.Marshal(v)
	if err != nil {
		return true, err
	}
	_, err = w.Write(b)
	return true, err
}

// Manifests encodes every object as one multi-document YAML stream, each
// document starting with "---".
func (s *Strategy) Manifests() ([]byte, error) {
	return Print(s.Objects, "yaml")
}

// ConfigMapName is the deterministic name of a strategy's ConfigMap.
func ConfigMapName(id string) string {
	if len(id) > 10 {
		id = id[:10]
	}
	return vocab.InstallStrategyConfigMapPrefix + id
}

// ConfigMap encodes the strategy into its ConfigMap in namespace: the
// manifests gzipped, then base64-encoded, under data key "manifests".
func (s *Strategy) ConfigMap(namespace string) (*corev1.ConfigMap, error) {
	data, err := s.manifestsData()
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ConfigMapName(s.ID),
			Namespace: namespace,
			Labels: map[string]string{
				vocab.InstallStrategyLabel: "",
				vocab.ManagedByLabel:       vocab.ManagedByValue,
			},
			Annotations: map[string]string{
				vocab.InstallStrategyVersionAnnotation:    s.Version,
				vocab.InstallStrategyRegistryAnnotation:   s.Registry,
				vocab.InstallStrategyIdentifierAnnotation: s.ID,
				vocab.InstallStrategyEncodingAnnotation:   vocab.InstallStrategyEncodingGzipBase64,
			},
		},
		Data: map[string]string{vocab.ManifestsKey: data},
	}, nil
}

// writeStream writes objs as one multi-document YAML stream, each
// document after "---\n" (Print's "yaml" and the ConfigMap's data).
func writeStream(w io.Writer, objs []client.Object) error {
	y := getYAMLWriter()
	defer putYAMLWriter(y)
	for _, o := range objs {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if err := writeObject(w, y, o); err != nil {
			return err
		}
	}
	return nil
}

// manifestsDataPerObject sizes the ConfigMap data up front: the catalog's
// strategies take 2.3 KiB (v1.9.0: 250 objects, 585 kB) to 2.9 KiB (v1.5.0:
// 161 objects, 476 kB) of gzipped, base64-encoded YAML per object, so none
// outgrows the estimate and v1.9.0's leaves a quarter of it unused.
const manifestsDataPerObject = 3 << 10

// gzipWriters keeps gzip writers for reuse: each holds some 800 KB of
// compression state, more than the ConfigMap data itself.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	if err != nil {
		panic(err) // DefaultCompression is a valid level
	}
	return w
}}

// manifestsData is the ConfigMap's "manifests" value: the stream Manifests
// gives (each object's document after "---\n"), gzipped at the default
// level and base64-encoded, written as it is produced rather than built
// in full first.
func (s *Strategy) manifestsData() (string, error) {
	var out strings.Builder
	out.Grow(manifestsDataPerObject * (len(s.Objects) + 1))
	b64 := base64.NewEncoder(base64.StdEncoding, &out)
	gz := gzipWriters.Get().(*gzip.Writer)
	defer func() {
		gz.Reset(io.Discard) // not to keep the data alive in the pool
		gzipWriters.Put(gz)
	}()
	gz.Reset(b64)
	bw := bufio.NewWriterSize(gz, 32<<10)
	if err := writeStream(bw, s.Objects); err != nil {
		return "", err
	}
	if err := bw.Flush(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	if err := b64.Close(); err != nil {
		return "", err
	}
	return out.String(), nil
}

// FromConfigMap reads a strategy ConfigMap written by virtop or by upstream
// KubeVirt's operator. Corrupt, truncated or foreign data gives an error,
// never a panic.
func FromConfigMap(cm *corev1.ConfigMap) (*Strategy, error) {
	if _, ok := cm.Labels[vocab.InstallStrategyLabel]; !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s is not an install strategy (no %s label)", cm.Namespace, cm.Name, vocab.InstallStrategyLabel)
	}
	data, ok := cm.Data[vocab.ManifestsKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no %q key", cm.Namespace, cm.Name, vocab.ManifestsKey)
	}
	raw := []byte(data)
	if _, encoded := cm.Annotations[vocab.InstallStrategyEncodingAnnotation]; encoded {
		// Upstream decodes whenever the annotation is present, whatever its
		// value; so do we.
		var err error
		raw, err = decodeGzipBase64(data)
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	objs, err := DecodeManifests(raw)
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	return &Strategy{
		Version:  cm.Annotations[vocab.InstallStrategyVersionAnnotation],
		Registry: cm.Annotations[vocab.InstallStrategyRegistryAnnotation],
		ID:       cm.Annotations[vocab.InstallStrategyIdentifierAnnotation],
		Objects:  objs,
	}, nil
}

func decodeGzipBase64(data string) ([]byte, error) {
	gz, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
	if err != nil {
		return nil, fmt.Errorf("manifests are not valid base64: %w", err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("manifests are not gzip data: %w", err)
	}
	defer r.Close()
	raw, err := io.ReadAll(io.LimitReader(r, maxDecodedManifestLen+1))
	if err != nil {
		return nil, fmt.Errorf("manifests are truncated or corrupt: %w", err)
	}
	if len(raw) > maxDecodedManifestLen {
		return nil, fmt.Errorf("manifests inflate to more than %d bytes", maxDecodedManifestLen)
	}
	return raw, nil
}

// upstreamAPIVersions are the apiVersions upstream's operator writes wrong
// into its strategies (it serializes objects whose TypeMeta it set by
// hand): the ServiceMonitor's group without a version, the admission
// policies' bare "v1".
var upstreamAPIVersions = map[string]struct{ wrong, right string }{
	"ServiceMonitor":                   {"monitoring.coreos.com", "monitoring.coreos.com/v1"},
	"ValidatingAdmissionPolicy":        {"v1", "admissionregistration.k8s.io/v1"},
	"ValidatingAdmissionPolicyBinding": {"v1", "admissionregistration.k8s.io/v1"},
}

func fixUpstreamAPIVersion(m map[string]interface{}) {
	kind, _ := m["kind"].(string)
	if q, ok := upstreamAPIVersions[kind]; ok && m["apiVersion"] == q.wrong {
		m["apiVersion"] = q.right
	}
}

// ReadManifests reads objects from a file's content: a YAML stream or JSON
// List, gzipped or not (upstream's strategies are often kept gzipped).
func ReadManifests(raw []byte) ([]client.Object, error) {
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		r, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("not gzip data: %w", err)
		}
		defer r.Close()
		raw, err = io.ReadAll(io.LimitReader(r, maxDecodedManifestLen+1))
		if err != nil {
			return nil, fmt.Errorf("truncated or corrupt gzip data: %w", err)
		}
		if len(raw) > maxDecodedManifestLen {
			return nil, fmt.Errorf("inflates to more than %d bytes", maxDecodedManifestLen)
		}
	}
	return DecodeManifests(raw)
}

// DecodeManifests reads a multi-document YAML stream (or a JSON List) of
// objects. Upstream's quirks are undone: wrong apiVersions are corrected,
// and an object listed twice identically (upstream lists each CA ConfigMap
// twice) is kept once. Kinds the scheme knows decode into their typed form; other kinds
// (for example OpenShift's) stay unstructured.
func DecodeManifests(raw []byte) ([]client.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []client.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		objs, err := decodeDocument(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, objs...)
	}
	return dropIdenticalDuplicates(out), nil
}

// dropIdenticalDuplicates keeps the first of identical objects with the same
// key; different objects with one key stay for the caller to refuse.
func dropIdenticalDuplicates(objs []client.Object) []client.Object {
	first := map[Key]client.Object{}
	out := objs[:0]
	for _, o := range objs {
		k := KeyOf(o)
		if prev, ok := first[k]; ok && reflect.DeepEqual(prev, o) {
			continue
		} else if !ok {
			first[k] = o
		}
		out = append(out, o)
	}
	return out
}

func decodeDocument(doc []byte) ([]client.Object, error) {
	var m map[string]interface{}
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	fixUpstreamAPIVersion(m)
	u := &unstructured.Unstructured{Object: m}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, fmt.Errorf("object has no apiVersion or kind")
	}
	if gvk.Kind == "List" && gvk.Group == "" {
		items, _, _ := unstructured.NestedSlice(m, "items")
		var out []client.Object
		for j, it := range items {
			b, err := json.Marshal(it)
			if err != nil {
				return nil, err
			}
			objs, err := decodeDocument(b)
			if err != nil {
				return nil, fmt.Errorf("item %d: %w", j, err)
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	if !scheme.Scheme.Recognizes(gvk) {
		return []client.Object{u}, nil
	}
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, typed); err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	obj, ok := typed.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object kind", gvk)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return []client.Object{obj}, nil
}
