package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
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
	ctx := context.Background()
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

	addr, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, MetricsBindAddress: addr})

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
