package framework

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// RequestCounts are virtop_api_requests_total's samples by verb and
// resource.
type RequestCounts map[[2]string]float64

var requestSample = regexp.MustCompile(`^virtop_api_requests_total\{(.*)\} ([0-9.e+]+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// Metrics is a host-process operator's metrics endpoint and a bearer
// token the API server authenticates and authorizes to read it (the
// operator serves metrics only to such callers, as in a cluster).
type Metrics struct {
	Addr, Token string
}

// Args are the operator flags that serve its metrics at m.Addr (the last
// --metrics-bind-address wins over HostOperatorArgs' "0").
func (m Metrics) Args() []string { return []string{"--metrics-bind-address", m.Addr} }

// Get reads the operator's metrics (HTTPS, a self-signed certificate) with
// the token.
func (m Metrics) Get(ctx context.Context) ([]byte, error) {
	return GetMetrics(ctx, m.Addr, m.Token)
}

// GetMetrics reads https://addr/metrics, sending token as a bearer token
// when it is not empty.
func GetMetrics(ctx context.Context, addr, token string) ([]byte, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed metrics certificate
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &MetricsStatusError{Code: resp.StatusCode, Status: resp.Status}
	}
	return body, nil
}

// MetricsStatusError is a metrics read answered with another status than
// 200.
type MetricsStatusError struct {
	Code   int
	Status string
}

func (e *MetricsStatusError) Error() string { return "GET /metrics: " + e.Status }

// Names of what MetricsEndpoint creates once per cluster: a ServiceAccount
// in namespace default and a ClusterRole and ClusterRoleBinding granting
// it get on /metrics (the rule of virtop's ClusterRole
// virtop-metrics-reader, which the operator applies only with monitoring).
const metricsReaderName = "virtop-e2e-metrics-reader"

// MetricsEndpoint returns a free loopback address for a host operator's
// metrics and a token allowed to read them.
func (e *Env) MetricsEndpoint(t testing.TB) Metrics {
	t.Helper()
	addr, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return Metrics{Addr: addr, Token: e.MetricsToken(t)}
}

// MetricsToken is a token of ServiceAccount default/virtop-e2e-metrics-reader,
// allowed get on /metrics; made once per suite.
func (e *Env) MetricsToken(t testing.TB) string {
	t.Helper()
	e.metricsMu.Lock()
	defer e.metricsMu.Unlock()
	if e.metricsToken != "" {
		return e.metricsToken
	}
	ctx := context.Background()
	c := e.Client(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: metricsReaderName}}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: metricsReaderName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}},
	}
	for _, o := range []client.Object{sa, role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("the metrics reader's %T: %v", o, err)
		}
	}
	tr, err := e.Kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(6 * 3600))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	e.metricsToken = tr.Status.Token
	return e.metricsToken
}

// ScrapeRequests reads virtop_api_requests_total from the operator's
// metrics endpoint.
func ScrapeRequests(ctx context.Context, m Metrics) (RequestCounts, error) {
	body, err := m.Get(ctx)
	if err != nil {
		return nil, err
	}
	out := RequestCounts{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := requestSample.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var verb, res string
		for _, l := range labelPair.FindAllStringSubmatch(m[1], -1) {
			switch l[1] {
			case "verb":
				verb = l[2]
			case "resource":
				res = l[2]
			}
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[[2]string{verb, res}] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no virtop_api_requests_total samples yet")
	}
	return out, nil
}

// MustScrape scrapes the operator's request counters, retrying for a
// minute while the endpoint is not up.
func MustScrape(t testing.TB, m Metrics) RequestCounts {
	t.Helper()
	var out RequestCounts
	poll.Eventually(t, "the operator's metrics", time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		out, err = ScrapeRequests(ctx, m)
		return err == nil, err
	})
	return out
}

// IsWrite reports whether a request of verb on resource (as
// virtop_api_requests_total labels them) writes. A review (TokenReview,
// SubjectAccessReview: the operator checking who reads its metrics) is a
// create that stores nothing.
func IsWrite(verb, resource string) bool {
	if reviews[resource] {
		return false
	}
	switch verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

var reviews = map[string]bool{
	"tokenreviews.authentication.k8s.io":            true,
	"subjectaccessreviews.authorization.k8s.io":     true,
	"selfsubjectaccessreviews.authorization.k8s.io": true,
}

// Delta is after - before by verb, by verb and resource, and the writes.
func (after RequestCounts) Delta(before RequestCounts) (byVerb map[string]float64, byKey RequestCounts, writes float64) {
	byVerb, byKey = map[string]float64{}, RequestCounts{}
	for k, v := range after {
		d := v - before[k]
		if d == 0 {
			continue
		}
		byVerb[k[0]] += d
		byKey[k] = d
		if IsWrite(k[0], k[1]) {
			writes += d
		}
	}
	return byVerb, byKey, writes
}

// FormatVerbs prints counts by verb with their total.
func FormatVerbs(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	total := 0.0
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%g", k, m[k])
		total += m[k]
	}
	return fmt.Sprintf("total=%g%s", total, b.String())
}

// FormatKeys prints counts by verb and resource.
func FormatKeys(m RequestCounts) string {
	keys := make([][2]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s=%g", k[0], k[1], m[k]))
	}
	return strings.Join(parts, ", ")
}
