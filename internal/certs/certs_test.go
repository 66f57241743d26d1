package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

const ns = "kubevirt"

// start is a whole second, as certificate times are.
var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func defaults() config.Certificates {
	return config.Certificates{
		CADuration:        config.DefaultCADuration,
		CARenewBefore:     config.DefaultCARenewBefore,
		ServerDuration:    config.DefaultServerDuration,
		ServerRenewBefore: config.DefaultServerRenewBefore,
	}
}

// plan renders the objects the certificate code fills, from the real
// strategy of the default release with VMExport: certificate Secrets, CA
// ConfigMaps, webhooks, APIServices and the export proxy Route.
func plan(t testing.TB) []client.Object { return planFor(t, "v1.5.3") }

func planFor(t testing.TB, version string) []client.Object {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	kv.Namespace = ns
	kv.Spec.ImageTag = version
	kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{vocab.VMExportFeatureGate}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for _, o := range s.Objects {
		switch o.(type) {
		case *corev1.Secret, *corev1.ConfigMap, *admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration, *apiregv1.APIService:
			objs = append(objs, o)
		case *unstructured.Unstructured:
			if isRoute(o.(*unstructured.Unstructured)) {
				objs = append(objs, o)
			}
		}
	}
	return objs
}

// liveOf is what the cluster holds after objs were applied.
func liveOf(objs []client.Object) Live {
	l := Live{Secrets: map[string]*corev1.Secret{}}
	for _, o := range objs {
		if t, ok := o.(*corev1.Secret); ok {
			l.Secrets[t.Name] = t.DeepCopy()
		}
	}
	return l
}

type env struct {
	t     testing.TB
	clock *clocktesting.FakePassiveClock
	m     *Manager
	plan  []client.Object
	lt    config.Certificates
	out   []client.Object
	rep   *Report
}

func newEnv(t testing.TB) *env {
	clk := clocktesting.NewFakePassiveClock(start)
	return &env{t: t, clock: clk, m: &Manager{Clock: clk}, plan: plan(t), lt: defaults()}
}

// fill runs Fill against the live state left by the previous fill.
func (e *env) fill() *Report {
	e.t.Helper()
	out, rep, err := e.m.Fill(e.plan, liveOf(e.out), e.lt)
	if err != nil {
		e.t.Fatalf("Fill at %s: %v", e.clock.Now(), err)
	}
	e.out, e.rep = out, rep
	return rep
}

func (e *env) at(d time.Duration) *env { e.clock.SetTime(start.Add(d)); return e }

func find[T client.Object](objs []client.Object, name string) T {
	for _, o := range objs {
		if t, ok := o.(T); ok && o.GetName() == name {
			return t
		}
	}
	var zero T
	return zero
}

func secretOf(objs []client.Object, name string) *corev1.Secret {
	return find[*corev1.Secret](objs, name)
}

func certOf(t testing.TB, objs []client.Object, name string) *x509.Certificate {
	t.Helper()
	s := secretOf(objs, name)
	if s == nil {
		t.Fatalf("no Secret %s", name)
	}
	b, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if b == nil {
		t.Fatalf("%s: no PEM in tls.crt", name)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func bundleOf(t testing.TB, objs []client.Object, name string) []*x509.Certificate {
	t.Helper()
	cm := find[*corev1.ConfigMap](objs, name)
	if cm == nil {
		t.Fatalf("no ConfigMap %s", name)
	}
	return parseBundle([]byte(cm.Data["ca-bundle"]))
}

func issued(rep *Report) []string {
	out := rep.Issued()
	slices.Sort(out)
	return out
}

func reasonOf(rep *Report, name string) string {
	for _, c := range rep.Certificates {
		if c.Name == name {
			return c.Reason
		}
	}
	return "<absent>"
}

var leafNames = []string{
	"kubevirt-virt-api-certs", "kubevirt-controller-certs", "kubevirt-exportproxy-certs",
	"kubevirt-virt-handler-server-certs", "kubevirt-virt-handler-certs", "kubevirt-operator-certs",
}

func sorted(s ...string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// verifyAll checks that every component certificate verifies against the
// kubevirt-ca bundle published in the ConfigMap and injected into every
// webhook, APIService and the Route, for its service's DNS name.
func verifyAll(t testing.TB, objs []client.Object, now time.Time) {
	t.Helper()
	cm := find[*corev1.ConfigMap](objs, "kubevirt-ca")
	bundle := []byte(cm.Data["ca-bundle"])
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatalf("kubevirt-ca bundle holds no certificate")
	}
	for _, l := range leafCases {
		c := certOf(t, objs, l.name)
		opts := x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{l.usage}}
		if len(l.dns) > 0 {
			opts.DNSName = l.dns[2] // <svc>.<ns>.svc
		}
		if _, err := c.Verify(opts); err != nil {
			t.Errorf("%s at %s: %v", l.name, now, err)
		}
	}
	for _, o := range objs {
		var got [][]byte
		switch w := o.(type) {
		case *admissionv1.ValidatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				got = append(got, h.ClientConfig.CABundle)
			}
		case *admissionv1.MutatingWebhookConfiguration:
			for _, h := range w.Webhooks {
				got = append(got, h.ClientConfig.CABundle)
			}
		case *apiregv1.APIService:
			got = append(got, w.Spec.CABundle)
		case *unstructured.Unstructured:
			if s, _, _ := unstructured.NestedString(w.Object, "spec", "tls", "destinationCACertificate"); isRoute(w) {
				got = append(got, []byte(s))
			}
		}
		for _, g := range got {
			if string(g) != string(bundle) {
				t.Errorf("%s %s: CA bundle is not the kubevirt-ca bundle", o.GetObjectKind().GroupVersionKind().Kind, o.GetName())
			}
		}
	}
}

// leafCases are upstream's component certificates (components/secrets.go,
// triple.NewServerKeyPair / NewClientKeyPair), namespace kubevirt.
var leafCases = []struct {
	name  string
	cn    string
	dns   []string
	usage x509.ExtKeyUsage
}{
	{"kubevirt-virt-api-certs", "virt-api.kubevirt.pod.cluster.local",
		[]string{"virt-api", "virt-api.kubevirt", "virt-api.kubevirt.svc", "virt-api.kubevirt.svc.cluster.local"}, x509.ExtKeyUsageServerAuth},
	{"kubevirt-controller-certs", "virt-controller.kubevirt.pod.cluster.local",
		[]string{"virt-controller", "virt-controller.kubevirt", "virt-controller.kubevirt.svc", "virt-controller.kubevirt.svc.cluster.local"}, x509.ExtKeyUsageServerAuth},
	{"kubevirt-exportproxy-certs", "virt-exportproxy.kubevirt.pod.cluster.local",
		[]string{"virt-exportproxy", "virt-exportproxy.kubevirt", "virt-exportproxy.kubevirt.svc", "virt-exportproxy.kubevirt.svc.cluster.local"}, x509.ExtKeyUsageServerAuth},
	{"kubevirt-virt-handler-server-certs", "kubevirt.io:system:node:virt-handler",
		[]string{"virt-handler", "virt-handler.kubevirt", "virt-handler.kubevirt.svc", "virt-handler.kubevirt.svc.cluster.local"}, x509.ExtKeyUsageServerAuth},
	{"kubevirt-virt-handler-certs", "kubevirt.io:system:client:virt-handler", nil, x509.ExtKeyUsageClientAuth},
	{"kubevirt-operator-certs", "kubevirt-operator-webhook.kubevirt.pod.cluster.local",
		[]string{"kubevirt-operator-webhook", "kubevirt-operator-webhook.kubevirt", "kubevirt-operator-webhook.kubevirt.svc", "kubevirt-operator-webhook.kubevirt.svc.cluster.local"}, x509.ExtKeyUsageServerAuth},
}

func TestFirstFillCreatesAll(t *testing.T) {
	e := newEnv(t)
	before, _ := json.Marshal(e.plan)
	rep := e.fill()
	if after, _ := json.Marshal(e.plan); string(after) != string(before) {
		t.Errorf("Fill modified its input")
	}
	wantAll := sorted(append([]string{"kubevirt-ca", "kubevirt-export-ca"}, leafNames...)...)
	if got := issued(rep); !slices.Equal(got, wantAll) {
		t.Fatalf("issued %v, want %v", got, wantAll)
	}
	for _, c := range rep.Certificates {
		if c.Reason != ReasonMissing {
			t.Errorf("%s: reason %q, want %q", c.Name, c.Reason, ReasonMissing)
		}
	}

	for _, ca := range []struct{ name, cn string }{
		{"kubevirt-ca", fmt.Sprintf("kubevirt.io@%d", start.Unix())},
		{"kubevirt-export-ca", fmt.Sprintf("export.kubevirt.io@%d", start.Unix())},
	} {
		c := certOf(t, e.out, ca.name)
		if c.Subject.CommonName != ca.cn || !c.IsCA || c.CheckSignatureFrom(c) != nil {
			t.Errorf("%s: CN %q IsCA %v, want self-signed CA %q", ca.name, c.Subject.CommonName, c.IsCA, ca.cn)
		}
		if !c.NotBefore.Equal(start) || !c.NotAfter.Equal(start.Add(7*24*time.Hour)) {
			t.Errorf("%s: valid %s..%s, want 7 days from %s", ca.name, c.NotBefore, c.NotAfter, start)
		}
		if k, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
			t.Errorf("%s: key is not ECDSA P-256", ca.name)
		}
		s := secretOf(e.out, ca.name)
		if s.Annotations[vocab.CertificateDurationAnnotation] != "168h0m0s" || s.Type != corev1.SecretTypeTLS {
			t.Errorf("%s: duration annotation %q, type %q", ca.name, s.Annotations[vocab.CertificateDurationAnnotation], s.Type)
		}
		if b, _ := pem.Decode(s.Data["tls.key"]); b == nil || b.Type != "EC PRIVATE KEY" {
			t.Errorf("%s: tls.key is not an EC PRIVATE KEY block", ca.name)
		}
		if cm := find[*corev1.ConfigMap](e.out, ca.name); cm.Data["ca-bundle"] != string(s.Data["tls.crt"]) {
			t.Errorf("%s: ConfigMap ca-bundle is not the CA certificate alone", ca.name)
		}
	}
	if certOf(t, e.out, "kubevirt-ca").Equal(certOf(t, e.out, "kubevirt-export-ca")) {
		t.Errorf("the two CAs are the same certificate")
	}

	ca := certOf(t, e.out, "kubevirt-ca")
	for _, l := range leafCases {
		c := certOf(t, e.out, l.name)
		if c.Subject.CommonName != l.cn || !slices.Equal(c.DNSNames, l.dns) || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{l.usage}) {
			t.Errorf("%s: CN %q DNS %v usage %v; want %q %v %v", l.name, c.Subject.CommonName, c.DNSNames, c.ExtKeyUsage, l.cn, l.dns, l.usage)
		}
		// Upstream: kubevirt-ca signs every component certificate, the
		// export proxy's included; NotBefore is the CA's.
		if c.CheckSignatureFrom(ca) != nil || !c.NotBefore.Equal(ca.NotBefore) || !c.NotAfter.Equal(start.Add(24*time.Hour)) {
			t.Errorf("%s: not signed by kubevirt-ca for 1 day (valid %s..%s)", l.name, c.NotBefore, c.NotAfter)
		}
		if got := secretOf(e.out, l.name).Annotations[vocab.CertificateDurationAnnotation]; got != "24h0m0s" {
			t.Errorf("%s: duration annotation %q", l.name, got)
		}
	}
	verifyAll(t, e.out, start)

	// Renewal of the component certificates is due at 80% of a day.
	if want := start.Add(24*time.Hour - 24*time.Hour/5); !rep.NextRotation.Equal(want) {
		t.Errorf("NextRotation %s, want %s", rep.NextRotation, want)
	}
	if got := rep.RequeueAfter(start); got != 24*time.Hour*4/5 {
		t.Errorf("RequeueAfter %s", got)
	}
	if len(rep.Bundles) != 2 || rep.Bundles[0].CAs != 1 || rep.Bundles[1].CAs != 1 {
		t.Errorf("bundles %+v", rep.Bundles)
	}
	var injected int
	for _, o := range e.out {
		switch o.(type) {
		case *admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration, *apiregv1.APIService:
			injected++
		case *unstructured.Unstructured:
			if isRoute(o.(*unstructured.Unstructured)) {
				injected++
			}
		}
	}
	// 2 validating + 1 mutating webhook configuration, 2 APIServices, 1 Route.
	if injected != 6 {
		t.Errorf("%d objects with a CA bundle, want 6", injected)
	}
}

// TestSteadyStateWritesNothing: given its own output as the live state,
// Fill returns byte-identical objects until a rotation is due.
// TestEveryReleaseIssuesItsCertificates: every certificate Secret each
// release renders is issued from the release's own spec (names, issuer,
// usage), verifies against the kubevirt-ca bundle where kubevirt-ca signs
// it, and a second fill issues nothing.
func TestEveryReleaseIssuesItsCertificates(t *testing.T) {
	for _, v := range release.Versions() {
		t.Run(v, func(t *testing.T) {
			rel, _ := release.Lookup(v)
			e := newEnv(t)
			e.plan = planFor(t, v)
			rep := e.fill()
			if got, want := len(rep.Issued()), len(rel.Certificates); got != want {
				t.Fatalf("issued %d certificates (%v), the release has %d", got, rep.Issued(), want)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM([]byte(find[*corev1.ConfigMap](e.out, "kubevirt-ca").Data["ca-bundle"])) {
				t.Fatal("kubevirt-ca bundle holds no certificate")
			}
			for _, c := range rel.Certificates {
				cert := certOf(t, e.out, c.Secret)
				if c.Kind == release.CertCA {
					if !cert.IsCA || !strings.HasPrefix(cert.Subject.CommonName, c.CommonNamePrefix+"@") {
						t.Errorf("%s: CA %v named %q", c.Secret, cert.IsCA, cert.Subject.CommonName)
					}
					continue
				}
				usage := x509.ExtKeyUsageServerAuth
				if c.Kind == release.CertClient {
					usage = x509.ExtKeyUsageClientAuth
				}
				opts := x509.VerifyOptions{Roots: roots, CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{usage}}
				if c.Service != "" {
					opts.DNSName = c.Service + "." + ns + ".svc"
				}
				if _, err := cert.Verify(opts); err != nil {
					t.Errorf("%s: %v", c.Secret, err)
				}
				want := c.CommonName
				if c.PodDNS {
					want = c.Service + "." + ns + ".pod.cluster.local"
				}
				if cert.Subject.CommonName != want {
					t.Errorf("%s: common name %q, want %q", c.Secret, cert.Subject.CommonName, want)
				}
			}
			if rep := e.fill(); len(rep.Issued()) != 0 {
				t.Errorf("second fill issued %v", rep.Issued())
			}
		})
	}
}

// TestBadCertificateAnnotation: a strategy Secret whose spec does not parse
// or names another Secret is an error, not a certificate of a guessed kind.
func TestBadCertificateAnnotation(t *testing.T) {
	for name, value := range map[string]string{
		"not json":     "{",
		"other secret": `{"secret":"elsewhere","kind":"CA","commonNamePrefix":"x"}`,
		"no issuer":    `{"secret":"kubevirt-virt-api-certs","kind":"Server","service":"virt-api","podDNS":true}`,
		"unknown kind": `{"secret":"kubevirt-virt-api-certs","kind":"Other"}`,
	} {
		t.Run(name, func(t *testing.T) {
			objs := plan(t)
			for i, o := range objs {
				if o.GetName() == "kubevirt-virt-api-certs" {
					c := o.(*corev1.Secret).DeepCopy()
					c.Annotations[vocab.CertificateAnnotation] = value
					objs[i] = c
				}
			}
			if _, _, err := (&Manager{}).Fill(objs, Live{}, defaults()); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestSteadyStateWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.fill()
	first := e.out
	for _, d := range []time.Duration{0, time.Hour, 19*time.Hour + 12*time.Minute - time.Second} {
		rep := e.at(d).fill()
		if got := issued(rep); len(got) != 0 {
			t.Errorf("at +%s issued %v", d, got)
		}
		a, _ := json.Marshal(first)
		b, _ := json.Marshal(e.out)
		if string(a) != string(b) || !reflect.DeepEqual(first, e.out) {
			t.Fatalf("at +%s the output changed", d)
		}
		if want := start.Add(19*time.Hour + 12*time.Minute); !rep.NextRotation.Equal(want) {
			t.Errorf("at +%s NextRotation %s, want %s", d, rep.NextRotation, want)
		}
	}
}

func TestServerRenewalKeepsCA(t *testing.T) {
	e := newEnv(t)
	e.fill()
	prev := e.out
	rep := e.at(19*time.Hour + 12*time.Minute).fill()
	if got, want := issued(rep), sorted(leafNames...); !slices.Equal(got, want) {
		t.Fatalf("issued %v, want %v", got, want)
	}
	for _, n := range leafNames {
		if r := reasonOf(rep, n); r != ReasonRenewalDue {
			t.Errorf("%s: reason %q", n, r)
		}
		if reflect.DeepEqual(secretOf(prev, n).Data, secretOf(e.out, n).Data) {
			t.Errorf("%s: not renewed", n)
		}
	}
	for _, n := range []string{"kubevirt-ca", "kubevirt-export-ca"} {
		if !reflect.DeepEqual(secretOf(prev, n), secretOf(e.out, n)) || !reflect.DeepEqual(find[*corev1.ConfigMap](prev, n), find[*corev1.ConfigMap](e.out, n)) {
			t.Errorf("%s: CA or bundle changed", n)
		}
	}
	verifyAll(t, e.out, e.clock.Now())
	if want := e.clock.Now().Add(19*time.Hour + 12*time.Minute); !rep.NextRotation.Equal(want) {
		t.Errorf("NextRotation %s, want %s", rep.NextRotation, want)
	}
}

// runTo follows the requeues up to (not including) t.
func (e *env) runTo(t time.Time) {
	for i := 0; e.rep.NextRotation.Before(t); i++ {
		if i > 1000 {
			e.t.Fatalf("no progress towards %s", t)
		}
		e.clock.SetTime(e.rep.NextRotation)
		e.fill()
	}
}

func TestCARotation(t *testing.T) {
	caRenewal := 7*24*time.Hour - 7*24*time.Hour/5 // 5.6 days
	for _, tc := range []struct {
		name  string
		delay time.Duration
		// wantLeaves: the component certificates are re-signed in the
		// same Fill as the CA.
		wantLeaves bool
	}{
		{"default delay", 0, false},
		{"upstream, at once", -1, true},
		{"custom delay", time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.m.ReissueDelay = tc.delay
			e.fill()
			e.runTo(start.Add(caRenewal))
			oldCA := certOf(t, e.out, "kubevirt-ca")
			oldLeaves := map[string]*x509.Certificate{}
			for _, n := range leafNames {
				oldLeaves[n] = certOf(t, e.out, n)
			}
			now := e.at(caRenewal).clock.Now()
			rep := e.fill()

			want := []string{"kubevirt-ca", "kubevirt-export-ca"}
			if tc.wantLeaves {
				want = append(want, leafNames...)
			}
			if got := issued(rep); !slices.Equal(got, sorted(want...)) {
				t.Fatalf("issued %v, want %v", got, sorted(want...))
			}
			newCA := certOf(t, e.out, "kubevirt-ca")
			if newCA.Equal(oldCA) || !newCA.NotBefore.Equal(now) {
				t.Fatalf("kubevirt-ca not renewed")
			}
			b := bundleOf(t, e.out, "kubevirt-ca")
			if len(b) != 2 || !b[0].Equal(newCA) || !b[1].Equal(oldCA) {
				t.Fatalf("bundle holds %d CAs, want [new, old]", len(b))
			}
			if eb := bundleOf(t, e.out, "kubevirt-export-ca"); len(eb) != 2 {
				t.Errorf("export bundle holds %d CAs, want 2", len(eb))
			}
			verifyAll(t, e.out, now)
			for _, n := range leafNames {
				signedByNew := certOf(t, e.out, n).CheckSignatureFrom(newCA) == nil
				if signedByNew != tc.wantLeaves {
					t.Errorf("%s: signed by the new CA = %v", n, signedByNew)
				}
			}
			if tc.wantLeaves {
				return
			}
			delay := DefaultReissueDelay
			if tc.delay > 0 {
				delay = tc.delay
			}
			if want := now.Add(delay); !rep.NextRotation.Equal(want) {
				t.Fatalf("NextRotation %s, want %s (re-sign after the delay)", rep.NextRotation, want)
			}
			// Just before the delay: nothing changes.
			prev := e.out
			e.clock.SetTime(now.Add(delay - time.Second))
			if rep := e.fill(); len(rep.Issued()) != 0 || !reflect.DeepEqual(prev, e.out) {
				t.Fatalf("changed before the re-sign delay: %v", rep.Issued())
			}
			e.clock.SetTime(now.Add(delay))
			rep = e.fill()
			if got := issued(rep); !slices.Equal(got, sorted(leafNames...)) {
				t.Fatalf("issued %v after the delay, want the component certificates", got)
			}
			for _, n := range leafNames {
				c := certOf(t, e.out, n)
				if c.CheckSignatureFrom(newCA) != nil || reasonOf(rep, n) != ReasonIssuerRotated {
					t.Errorf("%s: not re-signed by the new CA (reason %q)", n, reasonOf(rep, n))
				}
				if c.Equal(oldLeaves[n]) {
					t.Errorf("%s: unchanged", n)
				}
			}
			if !certOf(t, e.out, "kubevirt-ca").Equal(newCA) {
				t.Errorf("CA changed again")
			}
			verifyAll(t, e.out, e.clock.Now())

			// The old CA leaves the bundle when the overlap (the CA
			// renewBefore) has passed, which is when it expires.
			e.runTo(now.Add(7 * 24 * time.Hour / 5))
			if b := bundleOf(t, e.out, "kubevirt-ca"); len(b) != 2 {
				t.Errorf("old CA dropped before the overlap ended")
			}
			e.clock.SetTime(now.Add(7 * 24 * time.Hour / 5))
			e.fill()
			if b := bundleOf(t, e.out, "kubevirt-ca"); len(b) != 1 || !b[0].Equal(newCA) {
				t.Errorf("bundle holds %d CAs after the overlap, want the new CA alone", len(b))
			}
			verifyAll(t, e.out, e.clock.Now())
		})
	}
}

// TestLongRun follows the requeues for 30 days: every certificate always
// verifies against the published bundle, a Fill one second before each
// requeue writes nothing, and the work stays bounded.
func TestLongRun(t *testing.T) {
	e := newEnv(t)
	e.fill()
	end := start.Add(30 * 24 * time.Hour)
	fills := 0
	for e.rep.NextRotation.Before(end) {
		next := e.rep.NextRotation
		prev := e.out
		e.clock.SetTime(next.Add(-time.Second))
		if rep := e.fill(); len(rep.Issued()) != 0 || !reflect.DeepEqual(prev, e.out) || !rep.NextRotation.Equal(next) {
			t.Fatalf("at %s, a second before the requeue, Fill changed something: %v", e.clock.Now(), rep.Issued())
		}
		e.clock.SetTime(next)
		rep := e.fill()
		fills++
		verifyAll(t, e.out, next)
		// Nothing may expire before the next requeue.
		for _, c := range rep.Certificates {
			if !c.NotAfter.After(rep.NextRotation) {
				t.Fatalf("at %s: %s expires %s, before the next rotation %s", next, c.Name, c.NotAfter, rep.NextRotation)
			}
		}
		for _, b := range rep.Bundles {
			if b.CAs > 2 {
				t.Fatalf("at %s: %s holds %d CAs", next, b.Name, b.CAs)
			}
		}
		if fills > 200 {
			t.Fatalf("more than 200 rotations in 30 days")
		}
	}
	// Per CA cycle (5.6 d): the component certificates renew about every
	// 19.2 h, plus the CA renewal, the re-sign and the bundle clean-up.
	if fills < 30 || fills > 60 {
		t.Errorf("%d rotations in 30 days", fills)
	}
}

func TestCorruptLiveIsReplaced(t *testing.T) {
	// reissue signs a certificate for virt-api's Secret with the live CA
	// but another spec (wrong names) or another CA (untrusted).
	reissue := func(t *testing.T, l Live, s *spec, caPEM, keyPEM []byte) {
		ca, why := parseKeyPair(caPEM, keyPEM)
		if why != "" {
			t.Fatal(why)
		}
		p, err := issueLeaf((&Manager{}).rand(), s, ns, ca, start, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sec := l.Secrets["kubevirt-virt-api-certs"]
		sec.Data = map[string][]byte{"tls.crt": p.certPEM, "tls.key": p.keyPEM}
	}
	virtAPI := specFor("kubevirt-virt-api-certs")
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, l Live)
		issued []string
		reason string // of the first issued
		// bundle is the number of CAs kubevirt-ca's bundle holds after.
		bundle int
	}{
		{"bad PEM", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-virt-api-certs"].Data["tls.crt"] = []byte("-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n")
		}, []string{"kubevirt-virt-api-certs"}, "tls.crt holds no PEM certificate", 1},
		{"not PEM at all", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-virt-api-certs"].Data["tls.crt"] = []byte("garbage")
		}, []string{"kubevirt-virt-api-certs"}, "tls.crt holds no PEM certificate", 1},
		{"key does not match", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-virt-api-certs"].Data["tls.key"] = l.Secrets["kubevirt-controller-certs"].Data["tls.key"]
		}, []string{"kubevirt-virt-api-certs"}, "tls.key is not a private key matching tls.crt", 1},
		{"key missing", func(t *testing.T, l Live) {
			delete(l.Secrets["kubevirt-virt-api-certs"].Data, "tls.key")
		}, []string{"kubevirt-virt-api-certs"}, ReasonMissing, 1},
		{"Secret deleted", func(t *testing.T, l Live) {
			delete(l.Secrets, "kubevirt-operator-certs")
		}, []string{"kubevirt-operator-certs"}, ReasonMissing, 1},
		{"another component's certificate", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-virt-api-certs"].Data = l.Secrets["kubevirt-controller-certs"].Data
		}, []string{"kubevirt-virt-api-certs"}, "common name is not virt-api.kubevirt.pod.cluster.local", 1},
		{"wrong SANs", func(t *testing.T, l Live) {
			s := *virtAPI
			s.service = "virt-api-other"
			ca := l.Secrets["kubevirt-ca"].Data
			reissue(t, l, &s, ca["tls.crt"], ca["tls.key"])
		}, []string{"kubevirt-virt-api-certs"}, "subject alternative names differ from the expected ones", 1},
		{"client usage on a server certificate", func(t *testing.T, l Live) {
			s := *virtAPI
			s.kind = KindClient
			ca := l.Secrets["kubevirt-ca"].Data
			reissue(t, l, &s, ca["tls.crt"], ca["tls.key"])
		}, []string{"kubevirt-virt-api-certs"}, "extended key usage lacks server auth", 1},
		{"signed by another CA", func(t *testing.T, l Live) {
			// The export CA is a valid CA, but not virt-api's.
			ca := l.Secrets["kubevirt-export-ca"].Data
			reissue(t, l, virtAPI, ca["tls.crt"], ca["tls.key"])
		}, []string{"kubevirt-virt-api-certs"}, ReasonUntrusted, 1},
		{"duration annotation missing", func(t *testing.T, l Live) {
			delete(l.Secrets["kubevirt-virt-api-certs"].Annotations, vocab.CertificateDurationAnnotation)
		}, []string{"kubevirt-virt-api-certs"}, ReasonDurationChanged, 1},
		// The CA ConfigMap is output only: with tls.crt no longer a CA of
		// kubevirt-ca, nothing vouches for the old CA, and the component
		// certificates are re-signed at once (as upstream does).
		{"CA swapped for the export CA", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-ca"].Data = l.Secrets["kubevirt-export-ca"].Data
		}, append([]string{"kubevirt-ca"}, leafNames...), "common name is not kubevirt.io@<timestamp>", 1},
		{"CA key does not match", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-ca"].Data["tls.key"] = l.Secrets["kubevirt-export-ca"].Data["tls.key"]
		}, []string{"kubevirt-ca"}, "tls.key is not a private key matching tls.crt", 2},
		{"CA is a leaf", func(t *testing.T, l Live) {
			l.Secrets["kubevirt-ca"].Data = l.Secrets["kubevirt-virt-api-certs"].Data
		}, append([]string{"kubevirt-ca"}, leafNames...), "tls.crt is not a CA certificate", 1},
		{"CA lost", func(t *testing.T, l Live) {
			delete(l.Secrets, "kubevirt-ca")
			// Nothing vouches for the component certificates any more.
		}, append([]string{"kubevirt-ca"}, leafNames...), ReasonMissing, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.fill()
			e.at(time.Hour)
			good := e.out
			live := liveOf(good)
			tc.break_(t, live)
			out, rep, err := e.m.Fill(e.plan, live, e.lt)
			if err != nil {
				t.Fatal(err)
			}
			want := sorted(tc.issued...)
			if got := issued(rep); !slices.Equal(got, want) {
				t.Fatalf("issued %v, want %v", got, want)
			}
			if len(want) > 0 {
				if got := reasonOf(rep, tc.issued[0]); got != tc.reason {
					t.Errorf("reason %q, want %q", got, tc.reason)
				}
			}
			if b := bundleOf(t, out, "kubevirt-ca"); len(b) != tc.bundle {
				t.Errorf("kubevirt-ca bundle holds %d CAs, want %d", len(b), tc.bundle)
			}
			// Untouched certificates are kept byte for byte.
			for _, s := range specs {
				if !slices.Contains(tc.issued, s.name) && !reflect.DeepEqual(secretOf(good, s.name), secretOf(out, s.name)) {
					t.Errorf("%s changed", s.name)
				}
			}
			verifyAll(t, out, e.clock.Now())
			// The repaired state is steady.
			e.out = out
			if rep := e.fill(); len(rep.Issued()) != 0 || !reflect.DeepEqual(out, e.out) {
				t.Errorf("second Fill after the repair issued %v", rep.Issued())
			}
		})
	}
}

func TestCustomLifetimes(t *testing.T) {
	custom := config.Certificates{
		CADuration:        metav1.Duration{Duration: 48 * time.Hour},
		CARenewBefore:     metav1.Duration{Duration: 12 * time.Hour},
		ServerDuration:    metav1.Duration{Duration: 6 * time.Hour},
		ServerRenewBefore: metav1.Duration{Duration: time.Hour},
	}
	check := func(t *testing.T, e *env, now time.Time) {
		t.Helper()
		ca := certOf(t, e.out, "kubevirt-ca")
		if !ca.NotAfter.Equal(now.Add(48 * time.Hour)) {
			t.Errorf("CA valid until %s, want %s", ca.NotAfter, now.Add(48*time.Hour))
		}
		if got := secretOf(e.out, "kubevirt-ca").Annotations[vocab.CertificateDurationAnnotation]; got != "48h0m0s" {
			t.Errorf("CA duration annotation %q", got)
		}
		for _, n := range leafNames {
			if c := certOf(t, e.out, n); !c.NotAfter.Equal(now.Add(6 * time.Hour)) {
				t.Errorf("%s valid until %s, want %s", n, c.NotAfter, now.Add(6*time.Hour))
			}
			if got := secretOf(e.out, n).Annotations[vocab.CertificateDurationAnnotation]; got != "6h0m0s" {
				t.Errorf("%s duration annotation %q", n, got)
			}
		}
		if want := now.Add(5 * time.Hour); !e.rep.NextRotation.Equal(want) {
			t.Errorf("NextRotation %s, want %s", e.rep.NextRotation, want)
		}
	}
	t.Run("fresh", func(t *testing.T) {
		e := newEnv(t)
		e.lt = custom
		e.fill()
		check(t, e, start)
		e.at(5*time.Hour - time.Second).fill()
		if len(e.rep.Issued()) != 0 {
			t.Errorf("issued %v before the custom renewBefore", e.rep.Issued())
		}
		e.at(5 * time.Hour).fill()
		if got := issued(e.rep); !slices.Equal(got, sorted(leafNames...)) {
			t.Errorf("issued %v at the custom renewBefore", got)
		}
	})
	t.Run("changed", func(t *testing.T) {
		e := newEnv(t)
		e.fill()
		e.lt = custom
		now := e.at(time.Hour).clock.Now()
		rep := e.fill()
		if got := len(rep.Issued()); got != 8 {
			t.Errorf("issued %d certificates after the lifetimes changed, want 8", got)
		}
		for _, c := range rep.Certificates {
			if c.Reason != ReasonDurationChanged {
				t.Errorf("%s: reason %q", c.Name, c.Reason)
			}
		}
		check(t, e, now)
	})
}

func TestInvalidLifetimes(t *testing.T) {
	e := newEnv(t)
	for name, lt := range map[string]func(*config.Certificates){
		"zero":                          func(c *config.Certificates) { *c = config.Certificates{} },
		"CA renewBefore = duration":     func(c *config.Certificates) { c.CARenewBefore = c.CADuration },
		"server renewBefore > duration": func(c *config.Certificates) { c.ServerRenewBefore.Duration = 2 * c.ServerDuration.Duration },
		"negative renewBefore":          func(c *config.Certificates) { c.ServerRenewBefore.Duration = -time.Hour },
	} {
		c := defaults()
		lt(&c)
		if _, _, err := e.m.Fill(e.plan, Live{}, c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestInjectionOnlyPlans(t *testing.T) {
	e := newEnv(t)
	e.fill()
	var admission []client.Object
	for _, o := range e.plan {
		switch o.(type) {
		case *corev1.Secret, *corev1.ConfigMap:
		default:
			admission = append(admission, o)
		}
	}
	// With a valid live CA, a plan of webhooks and APIServices gets its
	// bundle.
	out, rep, err := e.m.Fill(admission, liveOf(e.out), e.lt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Issued()) != 0 {
		t.Errorf("issued %v", rep.Issued())
	}
	want := find[*corev1.ConfigMap](e.out, "kubevirt-ca").Data["ca-bundle"]
	for _, o := range out {
		if w, ok := o.(*admissionv1.MutatingWebhookConfiguration); ok && string(w.Webhooks[0].ClientConfig.CABundle) != want {
			t.Errorf("mutating webhook CA bundle not injected")
		}
	}
	// Without one, Fill refuses to issue a CA it could not store.
	if _, _, err := e.m.Fill(admission, Live{}, e.lt); err == nil || !strings.Contains(err.Error(), "not in the plan") {
		t.Errorf("error %v, want a CA not in the plan", err)
	}
	// Webhooks reached by URL keep their own CA; objects Fill does not
	// know pass through as they are.
	url := &admissionv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "external"},
		Webhooks:   []admissionv1.ValidatingWebhook{{Name: "x", ClientConfig: admissionv1.WebhookClientConfig{URL: new(string), CABundle: []byte("theirs")}}},
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa", Namespace: ns}}
	out, _, err = e.m.Fill([]client.Object{url, sa}, liveOf(e.out), e.lt)
	if err != nil {
		t.Fatal(err)
	}
	if string(out[0].(*admissionv1.ValidatingWebhookConfiguration).Webhooks[0].ClientConfig.CABundle) != "theirs" {
		t.Errorf("URL webhook's CA bundle replaced")
	}
	if out[1] != client.Object(sa) {
		t.Errorf("unknown object not passed through")
	}
}

// TestNoSecretMaterial: neither errors nor reports carry private keys.
func TestNoSecretMaterial(t *testing.T) {
	e := newEnv(t)
	e.fill()
	var keys []string
	collect := func(objs []client.Object) {
		for _, o := range objs {
			if s, ok := o.(*corev1.Secret); ok {
				if b, _ := pem.Decode(s.Data["tls.key"]); b != nil {
					// Any line of the base64 body identifies the key.
					for _, line := range strings.Split(string(s.Data["tls.key"]), "\n")[1:3] {
						keys = append(keys, line)
					}
				}
			}
		}
	}
	collect(e.out)
	var texts []string
	record := func(rep *Report, err error) {
		if rep != nil {
			texts = append(texts, fmt.Sprintf("%+v %#v", *rep, *rep))
		}
		if err != nil {
			texts = append(texts, err.Error(), fmt.Sprintf("%+v %#v", err, err))
		}
	}
	record(e.rep, nil)

	// Corrupted keys: the key material of one Secret under another.
	live := liveOf(e.out)
	live.Secrets["kubevirt-virt-api-certs"].Data["tls.key"] = live.Secrets["kubevirt-ca"].Data["tls.key"]
	live.Secrets["kubevirt-export-ca"].Data["tls.crt"] = live.Secrets["kubevirt-ca"].Data["tls.key"]
	live.Secrets["kubevirt-controller-certs"].Data["tls.key"] = append([]byte("junk "), live.Secrets["kubevirt-ca"].Data["tls.key"]...)
	out, rep, err := e.m.Fill(e.plan, live, e.lt)
	record(rep, err)
	collect(out)
	// A CA that cannot be stored, bad lifetimes, a failing random source.
	_, rep, err = e.m.Fill(e.plan[8:], live, e.lt)
	record(rep, err)
	_, rep, err = e.m.Fill(e.plan, live, config.Certificates{})
	record(rep, err)
	broken := &Manager{Clock: e.clock, Rand: failingReader{}}
	_, rep, err = broken.Fill(e.plan, Live{}, e.lt)
	if err == nil {
		t.Errorf("a failing random source did not fail Fill")
	}
	record(rep, err)

	for _, text := range texts {
		if strings.Contains(text, "PRIVATE KEY") {
			t.Errorf("a PEM private key header leaked: %.200s", text)
		}
		for _, k := range keys {
			if strings.Contains(text, k) {
				t.Errorf("private key material leaked")
			}
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

// TestDeterministic: with the same clock, random stream and live state,
// Fill issues byte-identical certificates.
func TestDeterministic(t *testing.T) {
	run := func() []byte {
		cryptotest.SetGlobalRandom(t, 42)
		e := newEnv(t)
		e.fill()
		e.at(6 * 24 * time.Hour).fill()
		b, _ := json.Marshal(e.out)
		return b
	}
	if a, b := run(), run(); string(a) != string(b) {
		t.Errorf("two runs with the same random stream differ")
	}
}

func BenchmarkFill(b *testing.B) {
	e := newEnv(b)
	e.fill()
	live := liveOf(e.out)
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := e.m.Fill(e.plan, live, e.lt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("issue-all", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := e.m.Fill(e.plan, Live{}, e.lt); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestUpstreamDurationSpellingKept: upstream's operator records the
// lifetime as the String of a *metav1.Duration; the certificates it
// issued with the configured lifetimes are kept (an adoption re-issues
// none), and one issued with another lifetime is still replaced.
func TestUpstreamDurationSpellingKept(t *testing.T) {
	e := newEnv(t)
	e.fill()
	for _, o := range e.out {
		if sec, ok := o.(*corev1.Secret); ok {
			d := sec.Annotations[vocab.CertificateDurationAnnotation]
			dur, err := time.ParseDuration(d)
			if err != nil {
				t.Fatalf("%s: %v", sec.Name, err)
			}
			sec.Annotations[vocab.CertificateDurationAnnotation] = (&metav1.Duration{Duration: dur}).String()
			if !strings.HasPrefix(sec.Annotations[vocab.CertificateDurationAnnotation], "&Duration{") {
				t.Fatalf("metav1.Duration's String is %q: upstream's spelling is no longer that", sec.Annotations[vocab.CertificateDurationAnnotation])
			}
		}
	}
	if got := issued(e.at(time.Hour).fill()); len(got) != 0 {
		t.Errorf("re-issued certificates recorded in upstream's spelling: %v", got)
	}
	// Kept, they keep upstream's spelling: upstream's operator compares
	// its own exactly, and would re-issue them all after a hand back.
	for _, o := range e.out {
		if sec, ok := o.(*corev1.Secret); ok && sec.Annotations[vocab.CertificateDurationAnnotation] != "" &&
			!strings.HasPrefix(sec.Annotations[vocab.CertificateDurationAnnotation], "&Duration{") {
			t.Errorf("%s kept, but its kubevirt.io/duration rewritten to %q", sec.Name, sec.Annotations[vocab.CertificateDurationAnnotation])
		}
	}
	secretOf(e.out, vocab.VirtAPICertSecretName).Annotations[vocab.CertificateDurationAnnotation] = (&metav1.Duration{Duration: 12 * time.Hour}).String()
	rep := e.at(2 * time.Hour).fill()
	if got := reasonOf(rep, vocab.VirtAPICertSecretName); got != ReasonDurationChanged {
		t.Errorf("a certificate of another lifetime in upstream's spelling: reason %q, want %q", got, ReasonDurationChanged)
	}
	// Re-issued, it is virtop's spelling.
	if d := secretOf(e.out, vocab.VirtAPICertSecretName).Annotations[vocab.CertificateDurationAnnotation]; strings.HasPrefix(d, "&") {
		t.Errorf("a certificate virtop issued records %q", d)
	}
}
