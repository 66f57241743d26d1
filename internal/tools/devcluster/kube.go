package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	virtopconfig "github.com/virtop-dev/virtop/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Clients bundles the clients of one cluster.
type Clients struct {
	Config  *rest.Config
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	Mapper  meta.ResettableRESTMapper
}

// Clients connects to the cluster through its kubeconfig.
func (c *Cluster) Clients() (*Clients, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 15 * time.Second
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &Clients{Config: cfg, Kube: kube, Dynamic: dyn, Mapper: mapper}, nil
}

// WaitAPI waits until the API server answers /readyz.
func (c *Cluster) WaitAPI(ctx context.Context, timeout time.Duration) error {
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	var last error
	err = poll(ctx, timeout, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, last = cl.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the API server of cluster %s is not ready after %s: %v", c.Name, timeout, last)
	}
	return nil
}

// poll calls f every interval until it returns true or an error, or until
// timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := f(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Node names: <name>-control-plane, then <name>-worker, <name>-worker2, …
// as kind names them.
func nodeName(cluster string, i int) string {
	switch i {
	case 0:
		return cluster + "-control-plane"
	case 1:
		return cluster + "-worker"
	default:
		return fmt.Sprintf("%s-worker%d", cluster, i)
	}
}

// FakeNode is the Node object of fake node i (0 is the control-plane node).
// It carries kwok's annotation, so kwok-controller (which kwokctl runs with
// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake) keeps it
// Ready and runs the pods bound to it through kwok's default stages, and the
// labels kwok's documentation gives fake nodes.
//
// kwok's documentation also taints fake nodes (kwok.x-k8s.io/node=fake:NoSchedule)
// to keep real pods off them in a cluster that has real nodes. A kwokctl
// cluster has none, and KubeVirt's components tolerate only the control-plane
// taints and CriticalAddonsOnly, so the taint is applied only when asked for.
func FakeNode(cluster string, i int, kwokTaint bool) *corev1.Node {
	name := nodeName(cluster, i)
	role := "agent"
	labels := map[string]string{
		"beta.kubernetes.io/arch":         "amd64",
		"beta.kubernetes.io/os":           "linux",
		"kubernetes.io/arch":              "amd64",
		"kubernetes.io/hostname":          name,
		"kubernetes.io/os":                "linux",
		"kubernetes.io/role":              role,
		"node-role.kubernetes.io/" + role: "",
		"type":                            "kwok",
	}
	if i == 0 {
		labels["node-role.kubernetes.io/control-plane"] = ""
	}
	var taints []corev1.Taint
	if kwokTaint {
		taints = append(taints, corev1.Taint{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule})
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				"node.alpha.kubernetes.io/ttl": "0",
				"kwok.x-k8s.io/node":           "fake",
			},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Allocatable: res,
			Capacity:    res,
			Phase:       corev1.NodeRunning,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:     "amd64",
				OperatingSystem:  "linux",
				KubeletVersion:   "fake",
				KubeProxyVersion: "fake",
			},
		},
	}
}

// EnsureNodes creates fake nodes 0..n-1 that do not exist yet (16 at a
// time) and waits until all are Ready: a minute, plus 100 ms a node beyond
// the first 600, since kwok marks a thousand nodes Ready in about 40 s on a
// 2-core machine.
func (c *Cluster) EnsureNodes(ctx context.Context, n int, kwokTaint bool) error {
	cl, err := c.Clients()
	if err != nil {
		return err
	}
	cfg := *cl.Config
	cfg.QPS, cfg.Burst = 500, 1000
	kube, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		return err
	}
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				_, err := kube.CoreV1().Nodes().Create(ctx, FakeNode(c.Name, i, kwokTaint), metav1.CreateOptions{FieldManager: vocab.UpFieldManager})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- fmt.Errorf("creating node %s: %w", nodeName(c.Name, i), err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	timeout := time.Minute + time.Duration(max(0, n-600))*100*time.Millisecond
	var notReady []string
	err = poll(ctx, timeout, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		ready := map[string]bool{}
		for i := range list.Items {
			ready[list.Items[i].Name] = nodeReady(&list.Items[i])
		}
		notReady = notReady[:0]
		for i := 0; i < n; i++ {
			if !ready[nodeName(c.Name, i)] {
				notReady = append(notReady, nodeName(c.Name, i))
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		shown := notReady
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(notReady)-10))
		}
		return fmt.Errorf("nodes not Ready after %s (is kwok-controller running? see %s): %s", timeout,
			filepath.Join(c.KwokClusterDir(), "logs", "kwok-controller.log"), strings.Join(shown, ", "))
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// installBase installs what the release manifest holds besides the
// operator's RBAC and Deployment, from the same files (the config
// package's embedded copy of config/): virtop's CRDs, the install namespace
// and the PriorityClass kubevirt-cluster-critical. It returns the number of
// objects applied.
func installBase(ctx context.Context, cl *Clients) (int, error) {
	return applyFS(ctx, cl, virtopconfig.FS, virtopconfig.Base())
}

// applyFS server-side applies the files of fsys, in the order given.
func applyFS(ctx context.Context, cl *Clients, fsys fs.FS, files []string) (int, error) {
	n := 0
	for _, name := range files {
		f, err := fsys.Open(name)
		if err != nil {
			return n, err
		}
		k, err := applyStream(ctx, cl, f, name, "")
		f.Close()
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// applyDir server-side applies every *.yaml/*.yml/*.json file in dir (sorted
// by name) and waits for the CRDs among them to be Established. It returns
// the number of objects applied.
func applyDir(ctx context.Context, cl *Clients, dir string) (int, error) {
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	n := 0
	for _, f := range files {
		k, err := applyFile(ctx, cl, f, "")
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// applyFile server-side applies every object of a YAML or JSON stream;
// namespaced objects without a namespace go to defaultNS. CRDs are waited
// for (Established) and the REST mapping is refreshed, so that later objects
// of the new kinds can be applied.
func applyFile(ctx context.Context, cl *Clients, path, defaultNS string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return applyStream(ctx, cl, f, path, defaultNS)
}

// applyStream is applyFile of a stream; name names it in errors.
func applyStream(ctx context.Context, cl *Clients, r io.Reader, path, defaultNS string) (int, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	n := 0
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, fmt.Errorf("%s: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := apply(ctx, cl, obj, defaultNS); err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		n++
	}
}

func apply(ctx context.Context, cl *Clients, obj *unstructured.Unstructured, defaultNS string) error {
	gvk := obj.GroupVersionKind()
	mapping, err := cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		cl.Mapper.Reset()
		mapping, err = cl.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = cl.Dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = defaultNS
			obj.SetNamespace(ns)
		}
		ri = cl.Dynamic.Resource(mapping.Resource).Namespace(ns)
	}
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	if _, err := ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: vocab.UpFieldManager, Force: true}); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
		if err := waitEstablished(ctx, cl, obj.GetName()); err != nil {
			return err
		}
		cl.Mapper.Reset()
	}
	return nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(ctx context.Context, cl *Clients, name string) error {
	err := poll(ctx, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		crd, err := cl.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return conditionTrue(crd, "Established"), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not Established after 30s", name)
	}
	return nil
}

// hasCRD reports whether the CRD called name exists and is Established.
func hasCRD(ctx context.Context, cl *Clients, name string) bool {
	crd, err := cl.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
	return err == nil && conditionTrue(crd, "Established")
}

// conditionTrue reports whether status.conditions has type t with status True.
func conditionTrue(obj *unstructured.Unstructured, t string) bool {
	for _, c := range conditions(obj) {
		if c.Type == t {
			return c.Status == "True"
		}
	}
	return false
}

type condition struct{ Type, Status, Reason, Message string }

func conditions(obj *unstructured.Unstructured) []condition {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []condition
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, condition{s("type"), s("status"), s("reason"), s("message")})
	}
	return out
}
