// Package certs runs the lifecycle of the KubeVirt certificate
// authorities and of the component certificates they sign: it fills the
// placeholder Secrets and CA ConfigMaps of a plan, keeping live
// certificates while they are valid and issuing new ones before they
// expire, and injects the CA bundle into the webhooks, APIServices and
// Route that need it.
//
// Fill is a function of its inputs: the plan, the live Secrets, the
// lifetimes, the clock and the random source. Given live
// objects equal to its own previous output and a clock before the next
// rotation, it returns byte-identical data, so steady state writes
// nothing. Nothing here logs, and no error or report carries secret
// material.
//
// What upstream KubeVirt v1.5.3 does, and virtop keeps
// (pkg/virt-operator/resource/apply/core.go, generate/components/secrets.go,
// pkg/certificates/triple):
//   - two self-signed ECDSA P-256 CAs, kubevirt-ca ("kubevirt.io@<unix>")
//     and kubevirt-export-ca ("export.kubevirt.io@<unix>"), each stored as
//     tls.crt/tls.key in its Secret and published, with the previous CAs
//     still in their overlap, under "ca-bundle" in the ConfigMap of the
//     same name (upstream reads the previous CAs back from that ConfigMap;
//     virtop keeps them in the CA Secret under "previous-ca-bundle" and
//     never reads the ConfigMap, which others may edit);
//   - kubevirt-ca signs every component certificate, the export proxy's
//     included; kubevirt-export-ca signs nothing here: virt-controller
//     mounts it to sign the export servers' certificates, and
//     virt-exportproxy trusts its bundle;
//   - the kubevirt-ca bundle goes into every webhook, APIService and the
//     export proxy Route;
//   - the annotation kubevirt.io/duration records the lifetime a
//     certificate was issued with; a different configured lifetime
//     re-issues it (upstream writes a *metav1.Duration's String,
//     "&Duration{Duration:24h0m0s,}", virtop "24h0m0s"; both are read).
//
// Which certificates a strategy has, and how each is issued, is the
// release's fact (internal/release: the data's certificates, read from
// upstream's secrets.go at the tag), carried by each certificate Secret of
// the strategy in the annotation vocab.CertificateAnnotation; v1.6 adds
// the synchronization controller's client and server certificates, v1.7
// virt-handler's migration and vsock client certificates, v1.8 the backup
// CA, v1.9 virt-handler's monitoring client and virt-template's three.
//
// Where virtop differs:
//   - after a CA rotation, certificates signed by the previous CA (still in
//     the bundle) are re-signed ReissueDelay later instead of at once, so
//     the new bundle reaches every client before any server presents a
//     certificate only the new CA vouches for;
//   - kubevirt-export-ca is renewed with the CA renewBefore (upstream uses
//     the server certificates' renewBefore for it, which keeps the
//     previous export CA trusted for only 4.8 h).
package certs

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// DefaultReissueDelay is how long after a CA rotation the certificates
// signed by the previous CA are re-signed by the new one.
const DefaultReissueDelay = 5 * time.Minute

// maxSkew is how far in the future a certificate's NotBefore may lie
// before it is considered not yet valid, and replaced.
const maxSkew = 5 * time.Minute

// Reasons a certificate is issued (Certificate.Reason). Parse and check
// failures have their own, more specific reasons.
const (
	ReasonMissing         = "missing"
	ReasonRenewalDue      = "renewal due"
	ReasonDurationChanged = "configured duration changed"
	ReasonIssuerRotated   = "issuer CA rotated"
	ReasonUntrusted       = "not signed by a trusted CA"
	ReasonNotYetValid     = "not valid yet"
)

// Kind is what a certificate is for.
type Kind string

const (
	KindCA     Kind = "CA"
	KindServer Kind = "Server"
	KindClient Kind = "Client"
)

// spec describes one certificate Secret.
type spec struct {
	name string
	kind Kind
	// caPrefix is a CA's common name before "@<unix>".
	caPrefix string
	// issuer is the CA Secret that signs a leaf.
	issuer string
	// cn is a leaf's common name; %s is the namespace when pod is true.
	cn  string
	pod bool
	// service a server certificate is for; its DNS names are derived.
	service string
}

// specs are the certificates of KubeVirt v1.5.3, CAs first: the specs of
// a strategy whose Secrets do not carry theirs (one cached by a virtop
// before release-aware strategies). Every release's own list is its data's
// (internal/release), carried by each Secret of its strategy.
var specs = specSet{
	{name: vocab.CASecretName, kind: KindCA, caPrefix: "kubevirt.io"},
	{name: vocab.ExportCASecretName, kind: KindCA, caPrefix: "export.kubevirt.io"},
	serving(vocab.VirtAPICertSecretName, vocab.VirtAPI),
	serving(vocab.VirtControllerCertSecretName, vocab.VirtController),
	serving(vocab.VirtExportProxyCertSecretName, vocab.VirtExportProxy),
	{name: vocab.VirtHandlerServerCertSecretName, kind: KindServer, issuer: vocab.CASecretName,
		cn: "kubevirt.io:system:node:virt-handler", service: vocab.VirtHandler},
	{name: vocab.VirtHandlerCertSecretName, kind: KindClient, issuer: vocab.CASecretName,
		cn: "kubevirt.io:system:client:virt-handler"},
	serving(vocab.VirtOperatorCertSecretName, vocab.OperatorWebhookServiceName),
}

// serving is a server certificate named, as upstream, for the pod DNS name
// "<service>.<namespace>.pod.cluster.local".
func serving(name, service string) *spec {
	return &spec{name: name, kind: KindServer, issuer: vocab.CASecretName,
		cn: service + ".%s.pod.cluster.local", pod: true, service: service}
}

func specFor(name string) *spec { return specs.byName(name) }

// specSet is the certificates of one strategy, CAs first.
type specSet []*spec

func (ss specSet) byName(name string) *spec {
	for _, s := range ss {
		if s.name == name {
			return s
		}
	}
	return nil
}

// specsOf collects the certificate specs of a strategy's objects: each
// Secret's own (vocab.CertificateAnnotation), else, for Secrets of older
// strategies, the v1.5.3 spec of that name. CAs come first.
func specsOf(objs []client.Object) (specSet, error) {
	var cas, leaves specSet
	for _, o := range objs {
		sec, ok := o.(*corev1.Secret)
		if !ok {
			continue
		}
		s := specFor(sec.Name)
		if raw, ok := sec.Annotations[vocab.CertificateAnnotation]; ok {
			var c release.Certificate
			if err := json.Unmarshal([]byte(raw), &c); err != nil {
				return nil, fmt.Errorf("Secret %s: annotation %s: %w", sec.Name, vocab.CertificateAnnotation, err)
			}
			if c.Secret != sec.Name {
				return nil, fmt.Errorf("Secret %s: annotation %s is for %q", sec.Name, vocab.CertificateAnnotation, c.Secret)
			}
			var err error
			if s, err = specFromRelease(c); err != nil {
				return nil, fmt.Errorf("Secret %s: %w", sec.Name, err)
			}
		}
		switch {
		case s == nil:
		case s.kind == KindCA:
			cas = append(cas, s)
		default:
			leaves = append(leaves, s)
		}
	}
	// A plan of webhooks and APIServices alone still needs the CAs every
	// release has, to inject their bundles.
	for _, s := range specs {
		if s.kind == KindCA && cas.byName(s.name) == nil {
			cas = append(cas, s)
		}
	}
	return append(cas, leaves...), nil
}

// specFromRelease turns a release's certificate fact into a spec.
func specFromRelease(c release.Certificate) (*spec, error) {
	s := &spec{name: c.Secret, kind: Kind(c.Kind), caPrefix: c.CommonNamePrefix, issuer: c.Issuer, cn: c.CommonName, pod: c.PodDNS, service: c.Service}
	switch {
	case s.kind == KindCA && s.caPrefix == "":
		return nil, errors.New("a CA needs a commonNamePrefix")
	case s.kind == KindServer || s.kind == KindClient:
		if s.issuer == "" {
			return nil, fmt.Errorf("a %s certificate needs an issuer", s.kind)
		}
		if s.pod {
			if s.service == "" {
				return nil, errors.New("a pod DNS name needs a service")
			}
			s.cn = s.service + ".%s.pod.cluster.local"
		}
		if s.cn == "" {
			return nil, errors.New("no common name")
		}
	case s.kind != KindCA:
		return nil, fmt.Errorf("unknown kind %q", c.Kind)
	}
	return s, nil
}

func (s *spec) commonName(ns string) string {
	if s.pod {
		return fmt.Sprintf(s.cn, ns)
	}
	return s.cn
}

// dnsNames are the service names a server certificate covers, in
// upstream's order (triple.NewServerKeyPair with domain cluster.local).
func (s *spec) dnsNames(ns string) []string {
	if s.service == "" {
		return nil
	}
	nn := s.service + "." + ns
	return []string{s.service, nn, nn + ".svc", nn + ".svc.cluster.local"}
}

func (s *spec) usage() x509.ExtKeyUsage {
	if s.kind == KindClient {
		return x509.ExtKeyUsageClientAuth
	}
	return x509.ExtKeyUsageServerAuth
}

// Manager fills certificate data. The zero value uses the real clock and
// crypto/rand.
type Manager struct {
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// Rand feeds serial numbers and is handed to the key generation and
	// signing routines; nil means crypto/rand.Reader (read at each call, so
	// testing/cryptotest.SetGlobalRandom applies). Since Go 1.26 those
	// routines use a non-default reader only with GODEBUG
	// cryptocustomrand=1; reproducible keys in tests come from
	// cryptotest.SetGlobalRandom.
	Rand io.Reader
	// ReissueDelay is how long after a CA rotation the certificates the
	// previous CA signed are re-signed; zero means DefaultReissueDelay, a
	// negative value re-signs them at once as upstream does. It is capped at
	// half the CA renewBefore, while the previous CA is still trusted.
	ReissueDelay time.Duration
}

func (m *Manager) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

func (m *Manager) rand() io.Reader {
	if m.Rand == nil {
		return rand.Reader
	}
	return m.Rand
}

func (m *Manager) reissueDelay(caRenewBefore time.Duration) time.Duration {
	d := m.ReissueDelay
	switch {
	case d < 0:
		return 0
	case d == 0:
		d = DefaultReissueDelay
	}
	return min(d, caRenewBefore/2)
}

// Live holds the live Secrets of the install namespace by name (from the
// caller's cache). A nil map and missing entries mean the Secret does not
// exist. Fill never modifies them. The CA ConfigMaps are not among its
// inputs: they are output only (anyone who may patch ConfigMaps in the
// install namespace can write them), and the previous CAs still trusted
// are read from the CA Secrets' own record (vocab.PreviousCABundleKey).
type Live struct {
	Secrets map[string]*corev1.Secret
}

// Certificate is the state of one certificate after Fill.
type Certificate struct {
	// Name of the Secret holding it.
	Name string
	Kind Kind
	// Issuer is the CA Secret that signed it; empty for a CA.
	Issuer     string
	CommonName string
	NotBefore  time.Time
	NotAfter   time.Time
	// RenewAt is when Fill will replace it.
	RenewAt time.Time
	// Issued is true when this Fill issued it.
	Issued bool
	// Reason it was issued, for a status message or an event; empty when
	// the live certificate was kept.
	Reason string
}

// Bundle is the state of one CA ConfigMap after Fill.
type Bundle struct {
	// Name of the ConfigMap (and of its CA's Secret).
	Name string
	// CAs is the number of CA certificates in the bundle (more than one
	// during a rotation's overlap).
	CAs int
	// ChangeAt is when a previous CA leaves the bundle; zero if none is
	// kept.
	ChangeAt time.Time
}

// Report is what Fill decided. It carries no secret material.
type Report struct {
	// Certificates in a fixed order: the CAs, then the component
	// certificates.
	Certificates []Certificate
	Bundles      []Bundle
	// NextRotation is the earliest time a Fill would change something;
	// zero when nothing was filled.
	NextRotation time.Time
}

// RequeueAfter is how long to wait from now until NextRotation; zero when
// there is nothing to wait for, and at least a second otherwise.
func (r *Report) RequeueAfter(now time.Time) time.Duration {
	if r.NextRotation.IsZero() {
		return 0
	}
	return max(r.NextRotation.Sub(now), time.Second)
}

// Issued lists the names of the certificates Fill issued.
func (r *Report) Issued() []string {
	var out []string
	for _, c := range r.Certificates {
		if c.Issued {
			out = append(out, c.Name)
		}
	}
	return out
}

func (r *Report) next(t time.Time) {
	if !t.IsZero() && (r.NextRotation.IsZero() || t.Before(r.NextRotation)) {
		r.NextRotation = t
	}
}

// validate checks the lifetimes; config.Validate refuses the same inputs,
// so this only guards against a caller that skipped it (a renewBefore not
// shorter than the duration would re-issue on every Fill).
func validate(lt config.Certificates) error {
	for _, p := range []struct {
		what              string
		duration, renewal time.Duration
	}{
		{"CA", lt.CADuration.Duration, lt.CARenewBefore.Duration},
		{"server", lt.ServerDuration.Duration, lt.ServerRenewBefore.Duration},
	} {
		if p.renewal <= 0 || p.duration <= p.renewal {
			return fmt.Errorf("%s certificate lifetimes: renewBefore %s must be positive and shorter than duration %s",
				p.what, p.renewal, p.duration)
		}
	}
	return nil
}

// SecretNames names the certificate Secrets of a strategy's objects (the
// CAs every release has included): the Secrets Fill reads from Live.
func SecretNames(objs []client.Object) ([]string, error) {
	ss, err := specsOf(objs)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.name)
	}
	return out, nil
}
