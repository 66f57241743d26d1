package operator

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions is the operator's metrics endpoint: HTTPS (a self-signed
// certificate, as KubeVirt's components serve theirs: the ServiceMonitor
// skips verification) unless disabled with "0", and, unless
// opts.MetricsAuthDisabled, only for callers the API server authenticates
// (TokenReview of the bearer token) and authorizes (SubjectAccessReview of
// get on the non-resource URL /metrics; ClusterRole virtop-metrics-reader
// grants it, bound to the Prometheus found). Anyone else gets 401 or 403.
func metricsOptions(opts Options) metricsserver.Options {
	out := metricsserver.Options{
		BindAddress:   opts.MetricsBindAddress,
		SecureServing: opts.MetricsBindAddress != "0",
	}
	if out.SecureServing && !opts.MetricsAuthDisabled {
		out.FilterProvider = reviewedMetrics
	}
	return out
}

// reviewedMetrics builds the filter with the operator's own credentials
// (its ClusterRole holds create on tokenreviews and subjectaccessreviews).
func reviewedMetrics(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	r := newReviewer(authn.TokenReviews(), authz.SubjectAccessReviews())
	return r.filter, nil
}

// How long answers of the API server are reused, so that Prometheus's
// scrapes every 30 s cost no review in a steady state: a known token for a
// minute, an unknown one for 10 s; an allowed caller for 5 minutes, a
// denied one for 30 s (a new binding takes effect within that). At most
// maxReviewCache entries of each are kept, so callers with many tokens cost
// memory only up to that bound.
const (
	tokenTTL       = time.Minute
	badTokenTTL    = 10 * time.Second
	allowedTTL     = 5 * time.Minute
	deniedTTL      = 30 * time.Second
	reviewTimeout  = 10 * time.Second
	maxReviewCache = 1024
	bearerPrefix   = "bearer "
)

// reviewer authenticates and authorizes callers of the metrics endpoint
// through the API server, as an aggregated API server does.
type reviewer struct {
	tokens authenticationclient.TokenReviewInterface
	access authorizationclient.SubjectAccessReviewInterface
	now    func() time.Time
	// users are the tokens' users by the tokens' SHA-256 (nil: the token
	// was refused); verdicts the SubjectAccessReviews' by verdictKey.
	users    answers[[sha256.Size]byte, *authenticationv1.UserInfo]
	verdicts answers[string, bool]
}

func newReviewer(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface) *reviewer {
	return &reviewer{tokens: tokens, access: access, now: time.Now}
}

// filter answers 401 without a token the API server authenticates, 403
// when it does not authorize the caller for the request's verb and path,
// and 503 when the API server cannot be asked; it serves the metrics
// otherwise. A caller's mistakes are not logged (anyone who reaches the
// port could fill the log); failures to ask the API server are.
func (r *reviewer) filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), reviewTimeout)
		defer cancel()
		token := bearerToken(req)
		if token == "" {
			http.Error(w, "Unauthorized: send a bearer token allowed to get "+req.URL.Path, http.StatusUnauthorized)
			return
		}
		user, err := r.authenticate(ctx, token)
		if err != nil {
			log.Error(err, "metrics: token review failed")
			http.Error(w, "token review failed", http.StatusServiceUnavailable)
			return
		}
		if user == nil {
			http.Error(w, "Unauthorized: the API server does not authenticate the token", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := r.authorize(ctx, user, verb, req.URL.Path)
		if err != nil {
			log.Error(err, "metrics: subject access review failed", "user", user.Username)
			http.Error(w, "subject access review failed", http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			http.Error(w, "Forbidden: "+user.Username+" may not "+verb+" "+req.URL.Path, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the request's bearer token, "" if none.
func bearerToken(req *http.Request) string {
	h := req.Header.Get("Authorization")
	if len(h) <= len(bearerPrefix) || !strings.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return ""
	}
	return strings.TrimSpace(h[len(bearerPrefix):])
}

// authenticate returns the token's user, nil when the API server refuses
// the token.
func (r *reviewer) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	now := r.now()
	if user, ok := r.users.get(key, now); ok {
		return user, nil
	}
	tr, err := r.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if !tr.Status.Authenticated {
		r.users.put(key, nil, now, badTokenTTL)
		return nil, nil
	}
	user := tr.Status.User
	r.users.put(key, &user, now, tokenTTL)
	return &user, nil
}

// authorize asks whether user may do verb on the non-resource path.
func (r *reviewer) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	key := verdictKey(user, verb, path)
	now := r.now()
	if allowed, ok := r.verdicts.get(key, now); ok {
		return allowed, nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := r.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := sar.Status.Allowed && !sar.Status.Denied
	ttl := deniedTTL
	if allowed {
		ttl = allowedTTL
	}
	r.verdicts.put(key, allowed, now, ttl)
	return allowed, nil
}

// verdictKey identifies what a SubjectAccessReview decides on.
func verdictKey(user *authenticationv1.UserInfo, verb, path string) string {
	groups := append([]string(nil), user.Groups...)
	sort.Strings(groups)
	var extra []string
	for k, v := range user.Extra {
		extra = append(extra, k+"="+strings.Join(v, ","))
	}
	sort.Strings(extra)
	return strings.Join([]string{user.Username, user.UID, strings.Join(groups, ","), strings.Join(extra, ";"), verb, path}, "\x00")
}

// answers keeps the API server's answers until they expire, at most
// maxReviewCache of them. The zero value is empty and ready.
type answers[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]answer[V]
}

type answer[V any] struct {
	v       V
	expires time.Time
}

// get returns the answer for k unless there is none or it has expired.
func (a *answers[K, V]) get(k K, now time.Time) (V, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.m[k]
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put keeps v for k for ttl, first dropping expired answers when the
// bound is reached, and every answer when none has expired.
func (a *answers[K, V]) put(k K, v V, now time.Time, ttl time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[K]answer[V]{}
	}
	if len(a.m) >= maxReviewCache {
		for key, e := range a.m {
			if !now.Before(e.expires) {
				delete(a.m, key)
			}
		}
		if len(a.m) >= maxReviewCache {
			clear(a.m)
		}
	}
	a.m[k] = answer[V]{v: v, expires: now.Add(ttl)}
}

// len is the number of answers kept, expired ones included.
func (a *answers[K, V]) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}
