package operator

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

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
	if n := r.users.len(); n > maxReviewCache {
		t.Errorf("%d cached tokens, bound %d", n, maxReviewCache)
	}
}
