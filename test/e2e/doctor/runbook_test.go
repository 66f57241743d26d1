package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// --- the header ---

// expectHeader checks that the report says which kubeconfig file,
// context, server and user it used, in JSON and as the first lines of
// the text, and that a context taken from the kubeconfig's current-context
// is said to be only the default.
func (s *installed) expectHeader(t *testing.T, r *run) {
	t.Helper()
	kc := s.env.Cluster.Kubeconfig()
	cfg, err := clientcmdLoad(kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cfg.CurrentContext
	user := cfg.Contexts[ctx].AuthInfo
	rp := r.report
	if rp.Kubeconfig != kc || rp.KubeconfigSource != "flag" || rp.Context != ctx || rp.ContextSource != "current-context" ||
		rp.Server != s.env.Clients.Config.Host || rp.User != user || rp.Namespace != s.ns {
		t.Errorf("JSON header: kubeconfig %q (%s), context %q (%s), server %q, user %q, namespace %q; want %s (flag), %s (current-context), %s, %s, %s",
			rp.Kubeconfig, rp.KubeconfigSource, rp.Context, rp.ContextSource, rp.Server, rp.User, rp.Namespace, kc, ctx, s.env.Clients.Config.Host, user, s.ns)
	}
	txt := s.doctorText(t)
	lines := strings.Split(txt, "\n")
	want := []string{
		"Kubeconfig: " + kc + " (--kubeconfig)",
		"Context:    " + ctx + " (only the kubeconfig's current-context: no --context given; pass --context " + ctx + " to be sure of the cluster)",
		"API server: " + s.env.Clients.Config.Host,
		"User:       " + user,
		"Namespace:  " + s.ns,
		"Prometheus: not asked",
	}
	for i, w := range want {
		if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
			t.Errorf("text line %d is not %q:\n%s", i+1, w, txt)
		}
	}
	// Named on the command line, the context is not said to be a default.
	ctxRun, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	named, err := s.doctor(ctxRun, "--context", ctx)
	if err != nil {
		t.Fatal(err)
	}
	if named.report.ContextSource != "flag" || named.report.Context != ctx {
		t.Errorf("with --context: context %q (%s)", named.report.Context, named.report.ContextSource)
	}
	named, err = s.exec(ctxRun, false, []string{"-o", "text", "--context", ctx})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(named.stdout, "Context:    "+ctx+" (--context)\n") {
		t.Errorf("with --context, the text says:\n%s", named.stdout)
	}
}

// --- GitOps owners ---

var gitopsOnce sync.Once

// gitopsCRDs installs test/crds/gitops (Flux's CRDs generated from their
// API modules, a minimal Argo CD Application) once for the suite.
func (s *installed) gitopsCRDs(t *testing.T) {
	t.Helper()
	gitopsOnce.Do(func() {
		files, err := filepath.Glob(filepath.Join(s.env.Repo, "test", "crds", "gitops", "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in test/crds/gitops: %v", err)
		}
		for _, p := range files {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.Unmarshal(raw, crd); err != nil {
				t.Fatal(err)
			}
			if err := s.c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating CRD %s: %v", crd.Name, err)
			}
			poll.Eventually(t, "CRD "+crd.Name+" established", 2*time.Minute, func(ctx context.Context) (bool, error) {
				got := &apiextensionsv1.CustomResourceDefinition{}
				if err := s.c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
					return false, err
				}
				for _, c := range got.Status.Conditions {
					if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
						return true, nil
					}
				}
				return false, fmt.Errorf("not established")
			})
		}
	})
}

// createWithStatus creates an object of a freshly installed kind (retried
// until the kind is served), then writes its status.
func (s *installed) createWithStatus(t *testing.T, u *unstructured.Unstructured, subresource bool) {
	t.Helper()
	ctx := context.Background()
	status := u.Object["status"]
	obj := u.DeepCopy()
	delete(obj.Object, "status")
	poll.Eventually(t, "creating "+u.GetKind()+" "+u.GetName(), 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := s.c.Create(ctx, obj.DeepCopy())
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return false, err
		}
		return true, err
	})
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = status
	var err error
	if subresource {
		err = s.c.Status().Update(ctx, obj)
	} else {
		err = s.c.Update(ctx, obj)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// markKubeVirt sets labels and annotations on the KubeVirt resource (a
// null value removes one), as a GitOps tool that applied it would have.
func (s *installed) markKubeVirt(t *testing.T, labels, annotations map[string]any) {
	t.Helper()
	patch := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}}
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: framework.KubeVirtKey.Namespace, Name: framework.KubeVirtKey.Name}}
	if err := s.c.Patch(context.Background(), kv, client.RawPatch(types.MergePatchType, mustJSON(t, patch))); err != nil {
		t.Fatal(err)
	}
}

// gitopsNamespace creates a namespace for a GitOps tool's objects,
// deleted when the test ends.
func (s *installed) gitopsNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.deleteAndWait(t, ns) })
}

func fluxCondition(typ, status, reason, msg string, at time.Time) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": at.UTC().Format(time.RFC3339)}
}

func (s *installed) testFluxBuildFailed(t *testing.T) {
	s.baseline(t)
	s.gitopsCRDs(t)
	ns := "flux-system"
	s.gitopsNamespace(t, ns)
	failedAt := time.Now().Add(-10 * time.Minute)
	s.createWithStatus(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": "fleet", "namespace": ns},
		"spec":     map[string]any{"url": "https://git.example.com/fleet.git", "interval": "1m", "ref": map[string]any{"branch": "main"}},
		"status": map[string]any{"conditions": []any{fluxCondition("Ready", "True", "Succeeded", "stored artifact for revision 'main@sha1:0123456789abcdef'", failedAt)},
			"artifact": map[string]any{"revision": "main@sha1:0123456789abcdef", "path": "x", "url": "http://source-controller/x", "lastUpdateTime": failedAt.UTC().Format(time.RFC3339), "digest": "sha256:0123"}},
	}}, true)
	// The runbook's recorded example: a remote base that timed out.
	buildErr := "kustomize build failed: accumulating resources: accumulation err='accumulating resources from 'https://git.example.com/bases/kubevirt?ref=v2': Get \"https://git.example.com/bases/kubevirt\": dial tcp: i/o timeout'"
	s.createWithStatus(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "kubevirt", "namespace": ns},
		"spec": map[string]any{"interval": "10m", "path": "./clusters/prod/kubevirt", "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"}},
		"status": map[string]any{
			"conditions":            []any{fluxCondition("Ready", "False", "BuildFailed", buildErr, failedAt)},
			"lastAttemptedRevision": "main@sha1:0123456789abcdef", "lastAppliedRevision": "main@sha1:fedcba9876543210",
		},
	}}, true)
	s.markKubeVirt(t, map[string]any{"kustomize.toolkit.fluxcd.io/name": "kubevirt", "kustomize.toolkit.fluxcd.io/namespace": ns}, nil)
	t.Cleanup(func() {
		s.markKubeVirt(t, map[string]any{"kustomize.toolkit.fluxcd.io/name": nil, "kustomize.toolkit.fluxcd.io/namespace": nil}, nil)
	})

	r := s.doctorUntil(t, "Degraded naming the Flux Kustomization", verdictIs("Degraded", "gitops/owner", "fail"))
	owner := "Flux Kustomization flux-system/kubevirt, which applies KubeVirt kubevirt/kubevirt, is not Ready since "
	expect(t, r, 1, []string{"Likely cause: " + owner, "BuildFailed: kustomize build failed"}, "gitops/owner", "fail",
		owner, "BuildFailed: kustomize build failed: accumulating resources", "dial tcp: i/o timeout",
		"it builds from GitRepository flux-system/fleet path ./clusters/prod/kubevirt from https://git.example.com/fleet.git")
	expectCause(t, r, "gitops/owner", "flux reconcile kustomization kubevirt -n flux-system --with-source", owner)
	// Nothing else is wrong: the owner is the only cause.
	if len(r.report.Causes) != 1 {
		t.Errorf("causes %+v, want the Kustomization alone", r.report.Causes)
	}
}

func (s *installed) testArgoDegraded(t *testing.T) {
	s.baseline(t)
	s.gitopsCRDs(t)
	ns := "argocd"
	s.gitopsNamespace(t, ns)
	s.createWithStatus(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "kubevirt", "namespace": ns},
		"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/fleet.git", "path": "kubevirt", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": s.ns}},
		"status": map[string]any{
			"health": map[string]any{"status": "Degraded", "message": "KubeVirt kubevirt/kubevirt: DeploymentFailed"},
			"sync":   map[string]any{"status": "OutOfSync", "revision": "0123456789abcdef"},
			"operationState": map[string]any{"phase": "Failed", "message": "one or more objects failed to apply, reason: admission webhook denied the request",
				"finishedAt": time.Now().Add(-3 * time.Minute).UTC().Format(time.RFC3339)},
		},
	}}, false)
	// Argo CD's annotation tracking: <app>:<group>/<kind>:<namespace>/<name>.
	s.markKubeVirt(t, nil, map[string]any{"argocd.argoproj.io/tracking-id": "kubevirt:kubevirt.io/KubeVirt:kubevirt/kubevirt"})
	t.Cleanup(func() { s.markKubeVirt(t, nil, map[string]any{"argocd.argoproj.io/tracking-id": nil}) })

	r := s.doctorUntil(t, "Degraded naming the Argo CD Application", verdictIs("Degraded", "gitops/owner", "fail"))
	owner := "Argo CD Application argocd/kubevirt, which applies KubeVirt kubevirt/kubevirt, is Degraded (health Degraded, sync OutOfSync)"
	expect(t, r, 1, []string{"Likely cause: " + owner}, "gitops/owner", "fail", owner,
		"last sync Failed: one or more objects failed to apply", "its source: https://git.example.com/fleet.git path kubevirt at main")
	expectCause(t, r, "gitops/owner", "argocd app get argocd/kubevirt", owner)
}

// expectCause checks that the report names a likely cause found by check,
// with a hint holding hint.
func expectCause(t *testing.T, r *run, check, hint string, cause ...string) {
	t.Helper()
	for _, c := range r.report.Causes {
		if c.Check != check {
			continue
		}
		ok := strings.Contains(c.Hint, hint)
		for _, want := range cause {
			ok = ok && strings.Contains(c.Cause, want)
		}
		if ok {
			return
		}
	}
	t.Errorf("no likely cause of %s with %q and hint %q: %+v", check, cause, hint, r.report.Causes)
}

// --- Prometheus behind a TLS proxy that checks a bearer token ---

func (s *installed) testPrometheusTokenCA(t *testing.T) {
	s.baseline(t)
	prom := s.startPrometheus(t, s.scrapedSeries(t))
	target, err := url.Parse(prom.URL)
	if err != nil {
		t.Fatal(err)
	}
	token := randomToken(t)
	var mu sync.Mutex
	methods := map[string]int{}
	refused := 0
	upstream := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods[r.Method]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			mu.Lock()
			refused++
			mu.Unlock()
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	ca := filepath.Join(t.TempDir(), "proxy-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	r := s.doctorUntil(t, "Healthy through the TLS proxy", verdictIs("Healthy", "prometheus/target", "ok"),
		"--prometheus-url", proxy.URL, "--prometheus-token", token, "--prometheus-ca", ca)
	expect(t, r, 0, nil, "prometheus/target", "ok", "KubeVirt targets, all up")
	expect(t, r, 0, nil, "prometheus/rules", "ok", "KubeVirt alerts loaded")
	p := r.report.Prometheus
	if p == nil || !p.Answered || p.Auth != "bearer-token" || p.Via != "url" || p.CAFile != ca || p.Version == "" || p.URL != proxy.URL {
		t.Errorf("JSON prometheus = %+v", p)
	}
	if strings.Contains(r.stdout, token) {
		t.Error("the token is in doctor's output")
	}
	txt := s.doctorTextArgs(t, "--prometheus-url", proxy.URL, "--prometheus-token", token, "--prometheus-ca", ca)
	if !strings.Contains(txt, "Prometheus: "+proxy.URL+" answered (Prometheus "+p.Version+"), with a bearer token, its certificate verified with "+ca) {
		t.Errorf("the header does not say which Prometheus answered, and how:\n%s", firstLines(txt, 8))
	}
	mu.Lock()
	if methods[http.MethodPost] > 0 {
		t.Errorf("doctor sent %d POSTs to Prometheus: it only reads", methods[http.MethodPost])
	}
	mu.Unlock()

	// Without the token the proxy refuses: doctor says Prometheus did not
	// answer and why, and checks nothing there.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err = s.doctor(ctx, "--prometheus-url", proxy.URL, "--prometheus-ca", ca)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.report.Prometheus; p == nil || p.Answered || !strings.Contains(p.Error, "401") {
		t.Errorf("without the token: prometheus %+v", p)
	}
	if c, _ := r.check("prometheus/target"); c.Status != "skipped" || !strings.Contains(c.Evidence, "401") {
		t.Errorf("without the token: prometheus/target %s %q", c.Status, c.Evidence)
	}
	mu.Lock()
	if refused == 0 {
		t.Error("the proxy refused nothing: the token was not checked")
	}
	mu.Unlock()
	// Without the CA the certificate is not trusted.
	r, err = s.doctor(ctx, "--prometheus-url", proxy.URL, "--prometheus-token", token)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.report.Prometheus; p == nil || p.Answered || !strings.Contains(p.Error, "certificate") {
		t.Errorf("without the CA: prometheus %+v", p)
	}
}

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// doctorTextArgs runs the text report with args.
func (s *installed) doctorTextArgs(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.exec(ctx, false, append([]string{"-o", "text"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	return r.stdout
}

// --- Prometheus through the API server's service proxy ---

// The addresses of the veth pair of the network namespace the Prometheus
// of the service-proxy case runs in: the API server refuses to proxy to
// loopback addresses, so Prometheus needs an address of its own. A
// benchmarking range (RFC 2544), on a link that exists only between this
// host and that namespace.
const (
	netnsHostAddr = "198.18.0.1"
	netnsPromAddr = "198.18.0.2"
	netnsPrefix   = "/30"
)

// netns creates a network namespace linked to the host by a veth pair
// (host side netnsHostAddr, namespace side netnsPromAddr) and removes it
// when the test ends.
func netns(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip (iproute2) not found: the service-proxy case puts Prometheus in a network namespace")
	}
	id := randomToken(t)[:6]
	name, host, peer := "virtop-doctor-"+id, "vdoc"+id+"h", "vdoc"+id+"p"
	const bound = 30 * time.Second
	ip := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		defer cancel()
		cmd := framework.Command(ctx, "ip", args...)
		out, err := cmd.CombinedOutput()
		return out, framework.CommandError(ctx, cmd, bound, err)
	}
	run := func(args ...string) {
		t.Helper()
		if out, err := ip(args...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	run("netns", "add", name)
	t.Cleanup(func() {
		_, _ = ip("link", "del", host)
		if out, err := ip("netns", "del", name); err != nil {
			t.Errorf("%v: %s", err, out)
		}
	})
	run("link", "add", host, "type", "veth", "peer", "name", peer)
	run("link", "set", peer, "netns", name)
	run("addr", "add", netnsHostAddr+netnsPrefix, "dev", host)
	run("link", "set", host, "up")
	run("-n", name, "addr", "add", netnsPromAddr+netnsPrefix, "dev", peer)
	run("-n", name, "link", "set", peer, "up")
	run("-n", name, "link", "set", "lo", "up")
	return name
}

func (s *installed) testPrometheusServiceProxy(t *testing.T) {
	s.baseline(t)
	ns := netns(t)
	end := time.Now()
	om := framework.OpenMetrics(s.scrapedSeries(t), end.Add(-backfillWindow), end, backfillStep)
	prom := s.env.StartPrometheusWith(t, om, map[string][]byte{"kubevirt-rules.yaml": s.rulesFile(t)},
		framework.PrometheusOptions{Netns: ns, Addr: netnsPromAddr + ":9090"})
	t.Logf("Prometheus in network namespace %s at %s", ns, prom.URL)

	// The pod and Service a kube-prometheus-stack release gives its
	// Prometheus (prometheus-operator's pod labels, the chart's Service),
	// the pod's address the one in the network namespace. No port-forward.
	ctx := context.Background()
	name := devcluster.PrometheusName
	podLabels := map[string]string{
		vocab.AppNameLabel: "prometheus", vocab.AppInstanceLabel: name, vocab.ManagedByLabel: "prometheus-operator",
		"operator.prometheus.io/name": name, "operator.prometheus.io/shard": "0", "prometheus": name,
	}
	var nodes corev1.NodeList
	if err := s.c.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + name + "-0", Namespace: devcluster.MonitoringNamespace, Labels: podLabels},
		Spec: corev1.PodSpec{
			NodeName:    nodes.Items[0].Name,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "prometheus", Image: "quay.io/prometheus/prometheus:v2.42.0",
				Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 9090}}}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: devcluster.MonitoringNamespace, Labels: map[string]string{"app": name, "release": devcluster.PrometheusRelease, "self-monitor": "true"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{vocab.AppNameLabel: "prometheus", "operator.prometheus.io/name": name},
			Ports:    []corev1.ServicePort{{Name: "http-web", Port: 9090, TargetPort: intstr.FromInt32(9090)}},
		},
	}
	for _, o := range []client.Object{pod, svc} {
		if err := s.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.deleteAndWait(t, o) })
	}
	// kwok runs the pod with an address of its own; give it the one in the
	// network namespace, as its kubelet would report it there.
	poll.Eventually(t, "the Prometheus pod running at "+netnsPromAddr, 2*time.Minute, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false, err
		}
		if !podReady(p) {
			return false, fmt.Errorf("phase %s, not ready", p.Status.Phase)
		}
		if p.Status.PodIP == netnsPromAddr {
			return true, nil
		}
		patch := map[string]any{"status": map[string]any{"podIP": netnsPromAddr, "podIPs": []map[string]any{{"ip": netnsPromAddr}}}}
		if err := s.c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, mustJSON(t, patch))); err != nil {
			return false, err
		}
		return false, fmt.Errorf("podIP was %s", p.Status.PodIP)
	})
	poll.Eventually(t, "the Service's EndpointSlice at "+netnsPromAddr, 2*time.Minute, func(ctx context.Context) (bool, error) {
		var l discoveryv1.EndpointSliceList
		if err := s.c.List(ctx, &l, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return false, err
		}
		for _, es := range l.Items {
			for _, e := range es.Endpoints {
				if slices.Contains(e.Addresses, netnsPromAddr) && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%d slices, none with %s ready", len(l.Items), netnsPromAddr)
	})

	r := s.doctorUntil(t, "Healthy through the service proxy", verdictIs("Healthy", "prometheus/target", "ok"), "--prometheus", "auto")
	expect(t, r, 0, nil, "prometheus/target", "ok", "KubeVirt targets, all up")
	expect(t, r, 0, nil, "prometheus/metrics", "ok", "kubevirt_* metric names scraped")
	expect(t, r, 0, nil, "prometheus/rules", "ok", "KubeVirt alerts loaded")
	wantURL := strings.TrimSuffix(s.env.Clients.Config.Host, "/") + "/api/v1/namespaces/monitoring/services/http:" + name + ":http-web/proxy/"
	p := r.report.Prometheus
	if p == nil || !p.Answered || p.Via != "service-proxy" || p.Auth != "kubeconfig" || p.Resource != devcluster.MonitoringNamespace+"/"+name ||
		p.Service != devcluster.MonitoringNamespace+"/"+name+" port http-web" || p.URL != wantURL || p.Version == "" {
		t.Errorf("JSON prometheus = %+v; want the service proxy URL %s", p, wantURL)
	}
	txt := s.doctorTextArgs(t, "--prometheus", "auto")
	if !strings.Contains(txt, "Prometheus: "+devcluster.MonitoringNamespace+"/"+name+" answered (Prometheus "+p.Version+"), through the API server's service proxy with the kubeconfig's credentials") {
		t.Errorf("the header does not name the Prometheus that answered:\n%s", firstLines(txt, 8))
	}

	// The same URL given by hand goes with the kubeconfig's credentials.
	r = s.doctorUntil(t, "Healthy with the service proxy URL given", verdictIs("Healthy", "prometheus/target", "ok"), "--prometheus-url", wantURL)
	if p := r.report.Prometheus; p == nil || p.Via != "service-proxy" || p.Auth != "kubeconfig" {
		t.Errorf("--prometheus-url of the service proxy: %+v", p)
	}
}

// --- a stuck upgrade ---

func (s *installed) testStuckUpgrade(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	if err := s.c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	from := kv.Status.ObservedKubeVirtVersion
	// The next release of the catalog (upstream supports one step at a
	// time), else the one before.
	to := ""
	versions := release.Builtin().Versions()
	if i := slices.Index(versions, from); i >= 0 {
		switch {
		case i+1 < len(versions):
			to = versions[i+1]
		case i > 0:
			to = versions[i-1]
		}
	}
	if to == "" {
		t.Fatalf("the catalog has no version besides %s to upgrade to", from)
	}
	origTag := any(nil)
	if kv.Spec.ImageTag != "" {
		origTag = kv.Spec.ImageTag
	}
	origInfra := any(nil)
	if kv.Spec.Infra != nil {
		origInfra = kv.Spec.Infra
	}
	t.Cleanup(func() {
		s.patchKubeVirtSpec(t, map[string]any{"imageTag": origTag, "infra": nil})
		if origInfra != nil {
			s.patchKubeVirtSpec(t, map[string]any{"infra": origInfra})
		}
		framework.WaitKubeVirt(t, s.c, "Available at "+from+" again", 5*time.Minute, framework.RolledOutAt(from))
		s.waitComponentsReady(t)
	})
	// The new version, with an infra placement no node satisfies: the
	// upgrade updates virt-handler, then stops at virt-controller, whose new
	// pods cannot be scheduled; the old ones keep serving.
	s.patchKubeVirtSpec(t, map[string]any{"imageTag": to, "infra": map[string]any{
		"nodePlacement": map[string]any{"nodeSelector": map[string]any{vocab.VirtopKeyPrefix + "e2e-no-such-node": "true"}}}})

	r := s.doctorUntil(t, "Degraded naming the stuck upgrade", verdictIs("Degraded", "install/upgrade", "fail"))
	stuck := fmt.Sprintf("An upgrade %s → %s (deployment ", from, to)
	expect(t, r, 1, []string{"Likely cause: " + stuck, "is stuck at virt-controller since"}, "install/upgrade", "fail",
		stuck, "is stuck at virt-controller since", "cannot be scheduled", "node affinity/selector",
		"changed: spec.infra, spec.imageTag "+from+" → "+to,
		"versions now: virt-handler "+to, "virt-controller ", "virt-api "+from,
		"Roll back by restoring the KubeVirt resource's spec", `"imageTag":"`+from+`"`,
		"the previous install strategy (ConfigMap kubevirt-install-strategy-")
	expectCause(t, r, "install/upgrade", "describe deployments.apps virt-controller", "stuck at virt-controller")
	// The old pods still serve: not a control-plane outage.
	expect(t, r, 1, nil, "controlplane/virt-api", "ok")
	if !strings.Contains(r.report.Upgrade, "stuck at virt-controller") {
		t.Errorf("JSON upgrade = %q", r.report.Upgrade)
	}
}

func (s *installed) patchKubeVirtSpec(t *testing.T, spec map[string]any) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: framework.KubeVirtKey.Namespace, Name: framework.KubeVirtKey.Name}}
	if err := s.c.Patch(context.Background(), kv, client.RawPatch(types.MergePatchType, mustJSON(t, map[string]any{"spec": spec}))); err != nil {
		t.Fatal(err)
	}
}

// --- a node under memory pressure ---

func (s *installed) testNodeMemoryPressure(t *testing.T) {
	s.baseline(t)
	pods := s.pods(t, vocab.VirtController)
	if len(pods) < 2 {
		t.Fatalf("%d virt-controller pods, want 2 (one flaps, one serves)", len(pods))
	}
	node := pods[0].Spec.NodeName
	t.Cleanup(func() {
		s.setNodeCondition(t, node, "MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
		s.replacePods(t, pods[:1])
	})
	s.setNodeCondition(t, node, "MemoryPressure", "True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
	// A component flapping on it: one virt-controller pod unready.
	s.setPodUnready(t, pods[0])

	r := s.doctorUntil(t, "the memory pressure named as the likely cause", func(r *run) bool {
		c, ok := r.check("controlplane/node-pressure")
		return ok && c.Status == "warn" && len(r.report.Causes) > 0
	})
	cause := "node " + node + " is under MemoryPressure since "
	expect(t, r, 1, []string{"Likely cause: " + cause, "virt-controller flaps (1 of "}, "controlplane/node-pressure", "warn",
		cause, "(kubelet has insufficient memory available)", "it hosts", "virt-controller")
	expectCause(t, r, "controlplane/node-pressure", "describe nodes "+node, cause, "virt-controller flaps (1 of")
	if r.report.Verdict != "Degraded" {
		t.Errorf("verdict %s, want Degraded (one virt-controller still serves)", r.report.Verdict)
	}
}

// setNodeCondition sets one condition of a node's status, as its kubelet
// reports it (the other conditions stay).
func (s *installed) setNodeCondition(t *testing.T, node, typ, status, reason, msg string) {
	t.Helper()
	now := metav1.Now()
	patch := map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": typ, "status": status, "reason": reason, "message": msg, "lastHeartbeatTime": now, "lastTransitionTime": now,
	}}}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := s.c.Status().Patch(context.Background(), n, client.RawPatch(types.StrategicMergePatchType, mustJSON(t, patch))); err != nil {
		t.Fatal(err)
	}
}

// --- the VM count line ---

func (s *installed) testVMCount(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	ns := s.env.Namespace(t, "doctor-vms")
	var nodes corev1.NodeList
	if err := s.c.List(ctx, &nodes); err != nil || len(nodes.Items) < 2 {
		t.Fatalf("want 2 nodes: %v", err)
	}
	a, b := nodes.Items[0].Name, nodes.Items[1].Name
	s.stopOperator(t)
	// KubeVirt's webhooks for VMIs point at virt-api, which nothing serves
	// here: take them away while the operator is stopped (it restores
	// them), so that creating the VMIs calls nothing.
	s.withoutKubeVirtWebhooks(t)
	vmis := []struct {
		name, phase, node string
	}{{"vmi-a", "Running", a}, {"vmi-b", "Running", b}, {"vmi-c", "Pending", ""}}
	var created []*unstructured.Unstructured
	for _, v := range vmis {
		status := map[string]any{"phase": v.phase}
		if v.node != "" {
			status["nodeName"] = v.node
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
			"metadata": map[string]any{"name": v.name, "namespace": ns},
			"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}}},
			// KubeVirt's VMI CRD has no status subresource.
			"status": status,
		}}
		if err := s.c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		created = append(created, u)
	}
	// Registered last, so the VMIs go before the operator and its
	// webhooks come back.
	t.Cleanup(func() {
		for _, u := range created {
			s.deleteAndWait(t, u)
		}
	})

	// Healthy first: the line says how many run, and where.
	r := s.doctorUntil(t, "the VM line while healthy", func(r *run) bool { return r.report.VMs.Running == 2 })
	running := fmt.Sprintf("2 VMs running (on %s: 1, %s: 1)", a, b)
	if a > b {
		running = fmt.Sprintf("2 VMs running (on %s: 1, %s: 1)", b, a)
	}
	if !strings.Contains(r.report.VMs.Line, running) || !strings.Contains(r.report.Reason, running) || r.report.VMs.ByPhase["Pending"] != 1 || r.report.VMs.RunningByNode[a] != 1 {
		t.Errorf("VM line %q, vms %+v; want %q", r.report.VMs.Line, r.report.VMs, running)
	}

	// The control plane down: they keep running, lifecycle operations fail.
	s.scale(t, vocab.VirtAPI, 0)
	r = s.doctorUntil(t, "ControlPlaneDown with the VM line", verdictIs("ControlPlaneDown", "controlplane/virt-api", "fail"))
	keep := strings.Replace(running, "2 VMs running", "2 VMs keep running", 1)
	expect(t, r, 1, []string{"controlplane/virt-api", keep + "; lifecycle operations (create, start, stop, migrate, console) fail until virt-api and virt-controller are back", "VMIs also 1 Pending wait for virt-controller"},
		"workloads", "ok", "3 VirtualMachineInstances (2 Running, 1 Pending)")
	txt := s.doctorTextArgs(t)
	if !strings.Contains(txt, "\nVerdict: ControlPlaneDown\n") || !strings.Contains(txt, "  VMs: "+keep) {
		t.Errorf("the text verdict lacks the VM line:\n%s", firstLines(txt, 14))
	}
}

// withoutKubeVirtWebhooks deletes the webhook configurations virtop applied
// (the operator must be stopped; it applies them again when it restarts).
func (s *installed) withoutKubeVirtWebhooks(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	managed := client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	if err := s.c.List(ctx, &v, managed); err != nil {
		t.Fatal(err)
	}
	if err := s.c.List(ctx, &m, managed); err != nil {
		t.Fatal(err)
	}
	for i := range v.Items {
		s.deleteAndWait(t, &v.Items[i])
	}
	for i := range m.Items {
		s.deleteAndWait(t, &m.Items[i])
	}
	t.Logf("deleted %d validating and %d mutating webhook configurations", len(v.Items), len(m.Items))
}

// --- the cluster `make demo` leaves ---

// TestDoctorOnDemoCluster runs what `make demo` runs, `virtop up --nodes 3
// --prometheus late`, with the built binary on a cluster of its own, and
// asks doctor about it: the product's own default cluster must read
// Healthy, its operator (a host process) recognised by its Lease.
func TestDoctorOnDemoCluster(t *testing.T) {
	env := framework.Require(t)
	state := t.TempDir()
	name := framework.UniqueName("demo")
	// up starts daemons (the cluster's components, the operator, the
	// Prometheus stack): framework.Command bounds the wait for its output
	// should one of them hold it.
	virtop := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := framework.Command(ctx, env.VirtopBin, args...)
		cmd.Dir = env.Repo
		cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+state)
		out, err := cmd.CombinedOutput()
		return string(out), framework.CommandError(ctx, cmd, timeout, err)
	}
	start := time.Now()
	out, err := virtop(10*time.Minute, "up", "--name", name, "--nodes", "3", "--prometheus", "late")
	t.Cleanup(func() {
		if out, err := virtop(2*time.Minute, "down", "--name", name); err != nil {
			t.Errorf("virtop down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("virtop up --prometheus late: %v\n%s", err, out)
	}
	t.Logf("MEASURE virtop up --prometheus late: %s", time.Since(start).Round(100*time.Millisecond))
	kubeconfig := filepath.Join(state, "virtop", name, "kubeconfig")
	if !strings.Contains(out, "--leader-elect=true") {
		t.Errorf("virtop up did not start its operator with leader election:\n%s", out)
	}

	var last string
	poll.Eventually(t, "doctor reads the demo cluster Healthy", 3*time.Minute, func(ctx context.Context) (bool, error) {
		cmd := framework.Command(ctx, env.VirtopBin, "doctor", "--kubeconfig", kubeconfig, "--context", "kwok-"+name, "-o", "json")
		raw, err := cmd.Output()
		var rp report
		if jerr := jsonUnmarshal(raw, &rp); jerr != nil {
			return false, fmt.Errorf("doctor: %v %v: %s", err, jerr, raw)
		}
		last = string(raw)
		if rp.Verdict != "Healthy" || err != nil {
			var bad []string
			for _, c := range rp.Checks {
				if c.Status == "fail" || c.Status == "warn" {
					bad = append(bad, c.Name+": "+c.Evidence)
				}
			}
			return false, fmt.Errorf("verdict %s (%s): %s", rp.Verdict, rp.Reason, strings.Join(bad, "; "))
		}
		for _, c := range rp.Checks {
			if c.Name == "controlplane/virt-operator" && !strings.Contains(c.Evidence, "Lease kubevirt/virt-operator is held by") {
				return false, fmt.Errorf("virt-operator: %s", c.Evidence)
			}
		}
		return true, nil
	})
	t.Logf("doctor on the demo cluster:\n%s", firstLines(last, 40))
}
