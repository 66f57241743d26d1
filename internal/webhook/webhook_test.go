package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	crdwait "github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/internal/webhook"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// render is the strategy of a default KubeVirt resource in ns.
func render(t *testing.T, ns string) *strategy.Strategy {
	t.Helper()
	cfg, err := config.FromKubeVirt(&kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt"}}, config.Settings{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var crdsOnce sync.Once

// installKubeVirtCRDs creates the CRDs of the strategy (VirtualMachine,
// VirtualMachineInstance, ...) once per test binary and waits until their
// kinds are served.
func installKubeVirtCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	crdsOnce.Do(func() {
		ctx := context.Background()
		var created []*apiextensionsv1.CustomResourceDefinition
		for _, o := range render(t, "kubevirt").Objects {
			crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
			if !ok {
				continue
			}
			crd = crd.DeepCopy()
			if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating CRD %s: %v", crd.Name, err)
			}
			created = append(created, crd)
		}
		if len(created) == 0 {
			t.Fatal("the strategy has no CRDs")
		}
		crdwait.WaitServed(t, env.Client, 3*time.Minute, created...)
	})
}

// serve runs the webhook for namespace ns as a host process does: a
// self-signed certificate, the strategy's virt-operator-validator
// rewritten to a URL (renamed per test and limited to ns), and waits until
// the API server calls it.
func serve(t *testing.T, env *testenv.Env, ns string) {
	t.Helper()
	port := freePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	cert, ca, err := webhook.SelfSigned(host, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := crwebhook.NewServer(crwebhook.Options{
		Host: "127.0.0.1", Port: port,
		TLSOpts: webhook.TLSOptions(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }),
	})
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	v := &webhook.Validator{Reader: env.Client, Mapper: mapper, Settings: config.Settings{Namespace: ns}}
	v.Register(srv)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()

	var vwc *admissionv1.ValidatingWebhookConfiguration
	for _, o := range render(t, ns).Objects {
		if o.GetName() == vocab.OperatorValidatingWebhookName {
			vwc = webhook.RewriteForURL(o, host, ca).(*admissionv1.ValidatingWebhookConfiguration)
		}
	}
	if vwc == nil {
		t.Fatal("the strategy has no virt-operator-validator")
	}
	vwc.Name = vocab.OperatorValidatingWebhookName + "-" + ns
	for i := range vwc.Webhooks {
		if *vwc.Webhooks[i].FailurePolicy != admissionv1.Fail {
			t.Fatalf("webhook %s: failurePolicy %s, want the strategy's Fail", vwc.Webhooks[i].Name, *vwc.Webhooks[i].FailurePolicy)
		}
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	}
	if err := env.Client.Create(context.Background(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Client.Delete(context.Background(), vwc); err != nil {
			t.Errorf("deleting %s: %v", vwc.Name, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	// The API server picks the configuration up asynchronously: wait until
	// a dry-run create of an invalid resource is refused by the webhook.
	poll.Eventually(t, "the webhook to be called", 3*time.Minute, func() (bool, string) {
		probe := kubevirt(ns, "probe", badPatch)
		err := env.Client.Create(context.Background(), probe, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "spec.customizeComponents.patches[0].patch") {
			return true, ""
		}
		return false, fmt.Sprint(err)
	})
}

// cleanKubeVirts deletes the KubeVirt resources of ns when the test ends
// (after the webhook is gone): the create check lists every namespace.
func cleanKubeVirts(t *testing.T, env *testenv.Env, ns string) {
	t.Cleanup(func() {
		err := env.Client.DeleteAllOf(context.Background(), &kvv1.KubeVirt{}, client.InNamespace(ns))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting KubeVirts of %s: %v", ns, err)
		}
	})
}

func setup(t *testing.T) (*testenv.Env, string) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	cleanKubeVirts(t, env, ns)
	serve(t, env, ns)
	return env, ns
}

func refused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("admitted, want refused")
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) {
		t.Errorf("error %v is not a refusal", err)
	}
	if !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("error %q is not the webhook's", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

func TestSecondKubeVirtRefused(t *testing.T) {
	env, ns := setup(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, kubevirt(ns, "kubevirt", nil)); err != nil {
		t.Fatalf("the first KubeVirt: %v", err)
	}
	err := env.Client.Create(ctx, kubevirt(ns, "second", nil))
	refused(t, err, ns+"/kubevirt", "only one KubeVirt")
	var list kvv1.KubeVirtList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil || len(list.Items) != 1 {
		t.Errorf("KubeVirts after the refusal: %d (%v), want 1", len(list.Items), err)
	}
}

func TestInvalidPatchRefused(t *testing.T) {
	env, ns := setup(t)
	ctx := context.Background()
	err := env.Client.Create(ctx, kubevirt(ns, "kubevirt", badPatch))
	refused(t, err, "spec.customizeComponents.patches[0].patch")

	// The same patch brought in by an update is refused too; an update
	// that leaves the spec alone is admitted.
	kv := kubevirt(ns, "kubevirt", nil)
	if err := env.Client.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	bad := kv.DeepCopy()
	badPatch(bad)
	refused(t, env.Client.Update(ctx, bad), "spec.customizeComponents.patches[0].patch")
	kv.Labels = map[string]string{"edited": "true"}
	if err := env.Client.Update(ctx, kv); err != nil {
		t.Errorf("a label edit: %v", err)
	}
}

func TestDeleteRefusedWhileVMIExists(t *testing.T) {
	env := testenv.Get(t)
	installKubeVirtCRDs(t, env)
	env, ns := setup(t)
	ctx := context.Background()
	kv := kubevirt(ns, "kubevirt", nil)
	if err := env.Client.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	kv.Status.Phase = kvv1.KubeVirtPhaseDeployed
	if err := env.Client.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachineInstance",
		"metadata":   map[string]any{"name": "testvmi", "namespace": ns},
		"spec": map[string]any{"domain": map[string]any{
			"devices":   map[string]any{},
			"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
		}},
	}}
	if err := env.Client.Create(ctx, vmi); err != nil {
		t.Fatalf("creating a VMI: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), vmi) })

	refused(t, env.Client.Delete(ctx, kv), "VirtualMachineInstance", "BlockUninstallIfWorkloadsExist", "RemoveWorkloads")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{}); err != nil {
		t.Fatalf("the KubeVirt after the refused delete: %v", err)
	}

	// Available dropped (phase Deploying) on an installed control plane
	// (the operator's finalizer is on it): still refused, not admitted to
	// hang on the finalizer.
	cur := &kvv1.KubeVirt{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = kvv1.KubeVirtPhaseDeploying
	if err := env.Client.Status().Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = []string{vocab.KubeVirtFinalizer}
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	refused(t, env.Client.Delete(ctx, kv), "VirtualMachineInstance", "BlockUninstallIfWorkloadsExist")
	cur.Finalizers = nil
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the VMI to be gone", 3*time.Minute, func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(vmi), vmi.DeepCopy())
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if err := env.Client.Delete(ctx, kv); err != nil {
		t.Fatalf("delete once the VMI is gone: %v", err)
	}
}

// TestSecretCertificate serves the certificate of a Secret: the handshake
// fails while the Secret is empty, succeeds once it is filled, and follows
// a new certificate.
func TestSecretCertificate(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: vocab.VirtOperatorCertSecretName, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: nil, corev1.TLSPrivateKeyKey: nil},
	}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	sc := &webhook.SecretCertificate{Reader: env.Client, Key: client.ObjectKeyFromObject(secret)}
	cfg := &tls.Config{}
	for _, o := range webhook.TLSOptions(sc.GetCertificate) {
		o(cfg)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	dial := func(ca []byte) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0], nil
	}
	fill := func() ([]byte, *x509.Certificate) {
		cert, ca, err := webhook.SelfSigned("127.0.0.1", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		crt, key := pemPair(t, cert)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			t.Fatal(err)
		}
		secret.Data = map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
		if err := env.Client.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		return ca, cert.Leaf
	}

	if _, err := dial(nil); err == nil {
		t.Fatal("handshake succeeded with an empty Secret")
	}
	ca1, leaf1 := fill()
	got, err := dial(ca1)
	if err != nil {
		t.Fatalf("handshake with the filled Secret: %v", err)
	}
	if !got.Equal(leaf1) {
		t.Error("served a certificate other than the Secret's")
	}
	ca2, leaf2 := fill()
	got, err = dial(ca2)
	if err != nil {
		t.Fatalf("handshake after the certificate changed: %v", err)
	}
	if !got.Equal(leaf2) {
		t.Error("still served the previous certificate")
	}
	var unknown x509.UnknownAuthorityError
	if _, err := dial(ca1); err == nil || !errors.As(err, &unknown) && !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("the previous CA still verifies: %v", err)
	}
}

func pemPair(t *testing.T, cert tls.Certificate) (crt, key []byte) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return crt, key
}
