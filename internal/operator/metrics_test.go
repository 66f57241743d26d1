package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestMetricsEndpointAuth runs the operator's manager on a real API server
// and reads its metrics endpoint as three callers: with no token (401),
// with the token of a ServiceAccount nothing authorizes (403), and with the
// token of one bound to the ClusterRole virtop-metrics-reader as the
// strategy renders it (200, the operator's metrics).
func TestMetricsEndpointAuth(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	// The reader is bound to the ClusterRole the monitoring bundle renders
	// (under a name of the test's own, so tests do not share it).
	role := renderedMetricsReader(t)
	role.Name = "metrics-reader-" + ns
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), role) })
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := env.Client.Create(ctx, sa); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token of %s/%s: %v", ns, name, err)
		}
		return tr.Status.Token
	}
	reader, stranger := token("reader"), token("stranger")

	addr := freeAddr(t)
	mgr, err := New(env.Config, Options{Namespace: ns, MetricsBindAddress: addr, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// Wait for the endpoint to answer the reader (the binding may take a
	// moment to reach the authorizer's view).
	var code int
	var body string
	poll.Eventually(t, "the metrics endpoint to serve the reader", time.Minute, func() (bool, string) {
		code, body, err = getMetrics(ctx, addr, reader)
		return err == nil && code == http.StatusOK, fmt.Sprintf("status %d, error %v", code, err)
	})
	if !strings.Contains(body, "virtop_api_requests_total") {
		t.Errorf("the reader got no virtop_api_requests_total: %.300s", body)
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a token the API server does not know", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without get on /metrics", stranger, http.StatusForbidden},
	} {
		code, body, err := getMetrics(ctx, addr, c.token)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.who, err)
		case code != c.want:
			t.Errorf("%s: status %d, want %d (body %.200q)", c.who, code, c.want, body)
		case strings.Contains(body, "virtop_api_requests_total"):
			t.Errorf("%s: the metrics were served: %.200q", c.who, body)
		}
	}
}

// TestMetricsAuthDisabled: --metrics-auth=false serves metrics without a
// filter, as upstream's virt-operator does; "0" serves nothing.
func TestMetricsAuthDisabled(t *testing.T) {
	if o := metricsOptions(Options{MetricsBindAddress: ":8443"}); o.FilterProvider == nil || !o.SecureServing {
		t.Errorf("default: filter set %t, secure %t; want both", o.FilterProvider != nil, o.SecureServing)
	}
	if o := metricsOptions(Options{MetricsBindAddress: ":8443", MetricsAuthDisabled: true}); o.FilterProvider != nil || !o.SecureServing {
		t.Errorf("auth disabled: filter set %t, secure %t; want no filter, secure", o.FilterProvider != nil, o.SecureServing)
	}
	if o := metricsOptions(Options{MetricsBindAddress: "0"}); o.FilterProvider != nil || o.SecureServing {
		t.Errorf("disabled endpoint: filter set %t, secure %t; want neither", o.FilterProvider != nil, o.SecureServing)
	}
}

// renderedMetricsReader is the ClusterRole virtop-metrics-reader of the
// default release's strategy.
func renderedMetricsReader(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.Find("ClusterRole", "", vocab.MetricsReaderName).(*rbacv1.ClusterRole)
	if !ok {
		t.Fatalf("the strategy renders no ClusterRole %s", vocab.MetricsReaderName)
	}
	return r.DeepCopy()
}

func getMetrics(ctx context.Context, addr, token string) (int, string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed metrics certificate
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+vocab.MetricsPath, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestReviewsCached: Prometheus scraping every 30 s with one token costs
// one TokenReview and one SubjectAccessReview per cache lifetime, not per
// scrape; many distinct tokens stay within maxReviewCache entries. (The
// API server's answers are stubbed: this is the cache, a pure function of
// them and the clock.)
func TestReviewsCached(t *testing.T) {
	cs := fake.NewClientset()
	var tokenReviews, accessReviews int
	cs.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		tokenReviews++
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		tr.Status.Authenticated = tr.Spec.Token == "good"
		tr.Status.User = authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus-k8s", Groups: []string{"system:serviceaccounts"}}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		accessReviews++
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		sar.Status.Allowed = sar.Spec.NonResourceAttributes != nil && sar.Spec.NonResourceAttributes.Path == "/metrics"
		return true, sar, nil
	})
	r := newReviewer(cs.AuthenticationV1().TokenReviews(), cs.AuthorizationV1().SubjectAccessReviews())
	now := time.Unix(0, 0)
	r.now = func() time.Time { return now }
	h, err := r.filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	if err != nil {
		t.Fatal(err)
	}
	get := func(token, path string) int {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	// Ten minutes of scrapes every 30 s.
	for i := 0; i < 20; i++ {
		if code := get("good", "/metrics"); code != http.StatusOK {
			t.Fatalf("scrape %d: status %d", i, code)
		}
		now = now.Add(30 * time.Second)
	}
	// Reviews: a token every minute (tokenTTL), a verdict every 5 (allowedTTL).
	if tokenReviews != 10 || accessReviews != 2 {
		t.Errorf("20 scrapes in 10 minutes sent %d TokenReviews and %d SubjectAccessReviews, want 10 and 2", tokenReviews, accessReviews)
	}
	for _, c := range []struct {
		token, path string
		want        int
	}{{"", "/metrics", 401}, {"bad", "/metrics", 401}, {"good", "/debug", 403}} {
		if code := get(c.token, c.path); code != c.want {
			t.Errorf("token %q, path %s: status %d, want %d", c.token, c.path, code, c.want)
		}
	}
	for i := 0; i < 3*maxReviewCache; i++ {
		get(fmt.Sprintf("bad-%d", i), "/metrics")
	}
	if n := len(r.users); n > maxReviewCache {
		t.Errorf("%d cached tokens, bound %d", n, maxReviewCache)
	}
}
