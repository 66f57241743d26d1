package certs

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// caState is a resolved CA: its key pair and the bundle it publishes.
type caState struct {
	pair   *keyPair
	bundle bundle
}

// Fill returns objs with their certificate data filled, and a report of
// what it decided. objs are the desired objects of a plan; Fill handles
//   - the certificate Secrets it knows by name (tls.crt, tls.key and the
//     kubevirt.io/duration annotation),
//   - the CA ConfigMaps kubevirt-ca and kubevirt-export-ca (ca-bundle),
//   - ValidatingWebhookConfigurations and MutatingWebhookConfigurations
//     (caBundle of every webhook with a service clientConfig),
//   - APIServices with a service (spec.caBundle),
//   - OpenShift Routes with TLS, unstructured
//     (spec.tls.destinationCACertificate),
//
// and returns every other object unchanged. The CA injected is the one
// that signs the certificate named by the object's
// certificates.kubevirt.io/secret annotation; kubevirt-ca without it.
// Filled objects are copies: Fill modifies neither objs nor live.
//
// A live certificate is kept while it parses, its key matches, it has the
// expected names and usages, it was issued with the configured duration,
// a CA of the current bundle signed it, and its renewal is not due;
// otherwise a new one is issued. A CA that must be issued while its
// Secret is not in objs is an error (it would be lost); so are lifetimes
// config.Validate would refuse.
func (m *Manager) Fill(objs []client.Object, live Live, lt config.Certificates) ([]client.Object, *Report, error) {
	if err := validate(lt); err != nil {
		return nil, nil, err
	}
	now := m.now()
	rnd := m.rand()

	specs, err := specsOf(objs)
	if err != nil {
		return nil, nil, err
	}
	planned := map[string]*corev1.Secret{}
	needCA := map[string]bool{}
	for _, o := range objs {
		switch t := o.(type) {
		case *corev1.Secret:
			if s := specs.byName(t.Name); s != nil {
				if t.Namespace == "" {
					return nil, nil, fmt.Errorf("certificate Secret %s has no namespace", t.Name)
				}
				planned[t.Name] = t
				needCA[s.ca()] = true
			}
		case *corev1.ConfigMap:
			if s := specs.byName(t.Name); s != nil && s.kind == KindCA {
				needCA[t.Name] = true
			}
		case *admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration, *apiregv1.APIService:
			needCA[specs.bundleFor(o)] = true
		case *unstructured.Unstructured:
			if isRoute(t) {
				needCA[specs.bundleFor(o)] = true
			}
		}
	}

	rep := &Report{}
	cas := map[string]*caState{}
	pairs := map[string]*keyPair{}
	for _, s := range specs {
		if s.kind != KindCA || !needCA[s.name] {
			continue
		}
		st, c, err := m.resolveCA(s, live, planned[s.name] != nil, lt, now, rnd)
		if err != nil {
			return nil, nil, err
		}
		cas[s.name] = st
		pairs[s.name] = st.pair
		rep.Certificates = append(rep.Certificates, c)
		rep.Bundles = append(rep.Bundles, Bundle{Name: s.name, CAs: len(st.bundle.certs), ChangeAt: st.bundle.changeAt})
		rep.next(c.RenewAt)
		rep.next(st.bundle.changeAt)
	}
	delay := m.reissueDelay(lt.CARenewBefore.Duration)
	for _, s := range specs {
		sec := planned[s.name]
		if s.kind == KindCA || sec == nil {
			continue
		}
		ca := cas[s.issuer]
		if ca == nil {
			return nil, nil, fmt.Errorf("certificate %s: its issuer %s is no CA of the strategy", s.name, s.issuer)
		}
		pair, c, err := m.resolveLeaf(s, sec.Namespace, ca, live.Secrets[s.name], lt, delay, now, rnd)
		if err != nil {
			return nil, nil, err
		}
		pairs[s.name] = pair
		rep.Certificates = append(rep.Certificates, c)
		rep.next(c.RenewAt)
	}

	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = fillObject(o, specs, pairs, cas, lt)
	}
	return out, rep, nil
}

// ca is the CA Secret whose bundle vouches for s.
func (s *spec) ca() string {
	if s.kind == KindCA {
		return s.name
	}
	return s.issuer
}

// bundleFor is the CA whose bundle an object that trusts a server gets.
func (ss specSet) bundleFor(o client.Object) string {
	if s := ss.byName(o.GetAnnotations()[vocab.CertificateSecretAnnotation]); s != nil {
		return s.ca()
	}
	return vocab.CASecretName
}

func isRoute(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "route.openshift.io" && gvk.Kind == "Route"
}

// liveKeyPair parses a live certificate Secret.
func liveKeyPair(sec *corev1.Secret) (*keyPair, string) {
	if sec == nil {
		return nil, ReasonMissing
	}
	return parseKeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
}

// issuedFor reports whether the lifetime recorded in a certificate
// Secret's kubevirt.io/duration annotation is duration. virtop writes
// time.Duration's spelling ("24h0m0s"); upstream's operator writes the
// String of a *metav1.Duration, its generated protobuf form
// ("&Duration{Duration:24h0m0s,}"): a certificate upstream issued, taken
// over at adoption, is kept while its lifetime is the configured one.
func issuedFor(annotation string, duration time.Duration) bool {
	return annotation == duration.String() || annotation == "&Duration{Duration:"+duration.String()+",}"
}

// unfit reports why a sound live certificate must be replaced whatever
// its renewal time, or "".
func unfit(cert *x509.Certificate, sec *corev1.Secret, duration time.Duration, now time.Time) string {
	switch {
	case !issuedFor(sec.Annotations[vocab.CertificateDurationAnnotation], duration):
		return ReasonDurationChanged
	case now.Before(cert.NotBefore.Add(-maxSkew)):
		return ReasonNotYetValid
	}
	return ""
}

func (m *Manager) resolveCA(s *spec, live Live, planned bool, lt config.Certificates, now time.Time, rnd io.Reader) (*caState, Certificate, error) {
	duration, renew := lt.CADuration.Duration, lt.CARenewBefore.Duration
	// The previous CAs still trusted come from the CA Secret's own record,
	// which only writers of the CA's key can change. The CA ConfigMap is
	// output only: anyone who may patch ConfigMaps in the install namespace
	// can edit it, so nothing in it is trusted (a CA planted there would
	// otherwise reach every caBundle for the whole overlap).
	sec := live.Secrets[s.name]
	previous := previousCAs(sec, s)
	pair, reason := liveKeyPair(sec)
	if reason == "" {
		reason = checkCA(pair.cert, s)
	}
	if reason == "" {
		// A sound CA stays trusted through the overlap even when it is
		// replaced.
		previous = append(previous, pair.cert)
		reason = unfit(pair.cert, sec, duration, now)
		if reason == "" && !now.Before(pair.cert.NotAfter.Add(-renew)) {
			reason = ReasonRenewalDue
		}
	} else if c := certOnly(sec); c != nil && checkCA(c, s) == "" {
		// Its key is lost or damaged, but the certificate is one of this
		// CA's (the CA Secret is the operator's to write): what it signed
		// stays trusted through the overlap.
		previous = append(previous, c)
	}
	c := Certificate{Name: s.name, Kind: KindCA, Reason: reason, Issued: reason != ""}
	if !c.Issued {
		pair.duration = sec.Annotations[vocab.CertificateDurationAnnotation]
	}
	if c.Issued {
		if !planned {
			return nil, c, fmt.Errorf("CA %s must be issued (%s) but its Secret is not in the plan", s.name, reason)
		}
		var err error
		if pair, err = issueCA(rnd, s.caPrefix, now, duration); err != nil {
			return nil, c, fmt.Errorf("issuing CA %s: %w", s.name, err)
		}
	}
	st := &caState{pair: pair, bundle: mergeBundle(pair.cert, previous, renew, now)}
	c.CommonName = pair.cert.Subject.CommonName
	c.NotBefore, c.NotAfter = pair.cert.NotBefore, pair.cert.NotAfter
	c.RenewAt = pair.cert.NotAfter.Add(-renew)
	return st, c, nil
}

func (m *Manager) resolveLeaf(s *spec, ns string, ca *caState, sec *corev1.Secret, lt config.Certificates, delay time.Duration, now time.Time, rnd io.Reader) (*keyPair, Certificate, error) {
	duration, renew := lt.ServerDuration.Duration, lt.ServerRenewBefore.Duration
	c := Certificate{Name: s.name, Kind: s.kind, Issuer: s.issuer}
	pair, reason := liveKeyPair(sec)
	if reason == "" {
		reason = checkLeaf(pair.cert, s, ns)
	}
	if reason == "" {
		signer := ca.bundle.signer(pair.cert)
		if signer == nil {
			reason = ReasonUntrusted
		} else {
			reason = unfit(pair.cert, sec, duration, now)
		}
		if reason == "" {
			c.RenewAt = pair.cert.NotAfter.Add(-renew)
			if !signer.Equal(ca.pair.cert) {
				// Signed by a previous CA: re-sign once the new bundle
				// had time to reach every client, and before the previous
				// CA leaves the bundle or expires. A renewal that falls
				// due meanwhile waits for that too (with the default
				// lifetimes it coincides with every CA renewal), unless
				// the certificate would expire first.
				at := ca.pair.cert.NotBefore.Add(delay)
				for _, t := range []time.Time{signer.NotAfter, ca.bundle.changeAt} {
					if !t.IsZero() && t.Before(at) {
						at = t
					}
				}
				if at.Before(pair.cert.NotAfter) {
					c.RenewAt = at
				}
			}
			if !now.Before(c.RenewAt) {
				reason = ReasonRenewalDue
				if !signer.Equal(ca.pair.cert) {
					reason = ReasonIssuerRotated
				}
			}
		}
	}
	if reason == "" {
		pair.duration = sec.Annotations[vocab.CertificateDurationAnnotation]
	}
	if reason != "" {
		var err error
		if pair, err = issueLeaf(rnd, s, ns, ca.pair, now, duration); err != nil {
			return nil, c, fmt.Errorf("issuing certificate %s: %w", s.name, err)
		}
		c.RenewAt = pair.cert.NotAfter.Add(-renew)
		c.Issued, c.Reason = true, reason
	}
	c.CommonName = pair.cert.Subject.CommonName
	c.NotBefore, c.NotAfter = pair.cert.NotBefore, pair.cert.NotAfter
	return pair, c, nil
}

// fillObject returns o with its certificate data filled, a copy when it
// changes anything.
func fillObject(o client.Object, specs specSet, pairs map[string]*keyPair, cas map[string]*caState, lt config.Certificates) client.Object {
	switch t := o.(type) {
	case *corev1.Secret:
		p, ok := pairs[t.Name]
		if !ok {
			return o
		}
		duration := lt.ServerDuration.Duration
		if specs.byName(t.Name).kind == KindCA {
			duration = lt.CADuration.Duration
		}
		c := t.DeepCopy()
		c.Data = map[string][]byte{
			corev1.TLSCertKey:       slices.Clone(p.certPEM),
			corev1.TLSPrivateKeyKey: slices.Clone(p.keyPEM),
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		// A kept certificate keeps the annotation as its writer spelled
		// it: upstream's operator compares its own spelling exactly and
		// would re-issue every certificate after a hand back.
		c.Annotations[vocab.CertificateDurationAnnotation] = duration.String()
		if p.duration != "" {
			c.Annotations[vocab.CertificateDurationAnnotation] = p.duration
		}
		if st, ok := cas[t.Name]; ok && len(st.bundle.certs) > 1 {
			c.Data[vocab.PreviousCABundleKey] = encodeBundle(st.bundle.certs[1:])
		}
		return c
	case *corev1.ConfigMap:
		st, ok := cas[t.Name]
		if !ok {
			return o
		}
		c := t.DeepCopy()
		if c.Data == nil {
			c.Data = map[string]string{}
		}
		c.Data[vocab.CABundleKey] = string(st.bundle.pem)
		return c
	case *admissionv1.ValidatingWebhookConfiguration:
		c := t.DeepCopy()
		for i := range c.Webhooks {
			injectWebhook(&c.Webhooks[i].ClientConfig, cas[specs.bundleFor(o)])
		}
		return c
	case *admissionv1.MutatingWebhookConfiguration:
		c := t.DeepCopy()
		for i := range c.Webhooks {
			injectWebhook(&c.Webhooks[i].ClientConfig, cas[specs.bundleFor(o)])
		}
		return c
	case *apiregv1.APIService:
		if t.Spec.Service == nil {
			return o
		}
		c := t.DeepCopy()
		c.Spec.CABundle = slices.Clone(cas[specs.bundleFor(o)].bundle.pem)
		return c
	case *unstructured.Unstructured:
		if !isRoute(t) {
			return o
		}
		if _, found, _ := unstructured.NestedMap(t.Object, "spec", "tls"); !found {
			return o
		}
		c := t.DeepCopy()
		_ = unstructured.SetNestedField(c.Object, string(cas[specs.bundleFor(o)].bundle.pem), "spec", "tls", "destinationCACertificate")
		return c
	}
	return o
}

// certOnly parses the certificate of a Secret's tls.crt alone, or nil.
func certOnly(sec *corev1.Secret) *x509.Certificate {
	if sec == nil {
		return nil
	}
	block, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
	if block == nil || block.Type != pemCertificate {
		return nil
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	return c
}

// previousCAs are the previous CAs a CA Secret records (PreviousCABundleKey)
// that still look like CAs of s: self-signed, allowed to sign, named
// "<prefix>@<unix>". Their retirement needs no record: each leaves the
// bundle when the CA after it is older than the overlap, or at its expiry
// (mergeBundle), which the certificates themselves tell.
func previousCAs(sec *corev1.Secret, s *spec) []*x509.Certificate {
	if sec == nil {
		return nil
	}
	var out []*x509.Certificate
	for _, c := range parseBundle(sec.Data[vocab.PreviousCABundleKey]) {
		if checkCA(c, s) == "" {
			out = append(out, c)
		}
	}
	return out
}

// injectWebhook sets the CA bundle of a webhook served by a Service; a
// webhook reached by URL is someone else's and keeps its own.
func injectWebhook(cc *admissionv1.WebhookClientConfig, ca *caState) {
	if cc.Service != nil {
		cc.CABundle = slices.Clone(ca.bundle.pem)
	}
}
