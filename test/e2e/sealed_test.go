package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/netns"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// The local cluster is sealed (DEVELOPMENT.md, "How the local cluster is sealed"):
// its API server and this suite run in the cluster's network namespace,
// which has nothing but loopback. From there a dial to a fake pod's IP or a
// Service's ClusterIP fails at once — no packet can leave the machine — and
// a webhook served at such a Service is answered at once: refused when it
// fails closed, skipped when it fails open, well within its timeout either
// way (KubeVirt's webhooks on this cluster are the latter).
func TestClusterIsSealed(t *testing.T) {
	env := framework.Require(t)
	ctx := context.Background()
	ns := env.Cluster.Netns()

	t.Run("the API server and the suite share the sealed namespace", func(t *testing.T) {
		if !ns.Inside() {
			t.Errorf("the suite does not run inside %s", ns.Path())
		}
		for _, comp := range []string{devcluster.ComponentKubeAPIServer, devcluster.ComponentEtcd, devcluster.ComponentKwokController} {
			pid, ok := env.ComponentPID(t, comp)
			if !ok {
				t.Errorf("%s is not running", comp)
				continue
			}
			if !ns.Holds(pid) {
				t.Errorf("%s (pid %d) runs outside %s", comp, pid, ns.Path())
			}
		}
		// Its only routes lead to the real node's bridge (its pods, in
		// namespaces of their own), none out: no default route.
		v4, v6Default, err := netns.Routes()
		if err != nil {
			t.Fatal(err)
		}
		_, bridge, _ := net.ParseCIDR(env.Cluster.NodePodCIDR())
		for _, r := range v4 {
			ones, _ := r.Mask.Size()
			if ones == 0 || !bridge.Contains(r.IP) || ones < 24 {
				t.Errorf("the cluster's namespace routes %s: only the bridge's %s may be reached", r, bridge)
			}
		}
		if v6Default {
			t.Error("the cluster's namespace has an IPv6 default route")
		}
		t.Logf("routes of the cluster's namespace: %v", v4)
	})

	// A fake pod (kwok gives it an IP from the cluster's pod range) behind
	// a Service with a ClusterIP.
	nsName := env.Namespace(t, "sealed")
	d := framework.PauseDeployment(nsName, "backend", 1)
	if _, err := env.Kube.AppsV1().Deployments(nsName).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitDeploymentAvailable(t, nsName, d.Name, 0)
	pods, err := env.Kube.CoreV1().Pods(nsName).List(ctx, metav1.ListOptions{LabelSelector: "app=backend"})
	if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("the fake pod has no IP: %v %v", err, pods)
	}
	podIP := pods.Items[0].Status.PodIP
	if _, cidr, _ := net.ParseCIDR(env.Cluster.PodCIDR()); !cidr.Contains(net.ParseIP(podIP)) {
		t.Errorf("the fake pod's IP %s is outside the cluster's own pod range %s", podIP, cidr)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "backend", Namespace: nsName},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "backend"},
			Ports:    []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}},
		},
	}
	svc, err = env.Kube.CoreV1().Services(nsName).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fake pod IP %s, Service ClusterIP %s", podIP, svc.Spec.ClusterIP)
	// The API server dials a webhook at its Service's endpoints
	// (--enable-aggregator-routing): wait until the fake pod is one, or it
	// answers "no endpoints available" without dialling anything.
	poll.Eventually(t, "the fake pod an endpoint of its Service", framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
		l, err := env.Kube.DiscoveryV1().EndpointSlices(nsName).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=backend"})
		if err != nil {
			return false, err
		}
		for _, sl := range l.Items {
			for _, ep := range sl.Endpoints {
				if slices.Contains(ep.Addresses, podIP) && (ep.Conditions.Ready == nil || *ep.Conditions.Ready) {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("%s is not a ready endpoint of Service backend yet", podIP)
	})

	t.Run("a dial to a fake pod or a Service fails at once", func(t *testing.T) {
		for _, addr := range []string{net.JoinHostPort(podIP, "8443"), net.JoinHostPort(svc.Spec.ClusterIP, "443")} {
			start := time.Now()
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err == nil {
				c.Close()
				t.Errorf("dial %s connected: something answers for a fake address", addr)
				continue
			}
			if !netns.ErrUnreachable(err) {
				t.Errorf("dial %s: %v; want network unreachable (no route out)", addr, err)
			}
			t.Logf("MEASURE dial %s failed after %s: %v", addr, time.Since(start).Round(time.Microsecond), err)
		}
	})

	t.Run("a webhook at such a Service is answered within its timeout", func(t *testing.T) {
		const timeout = 10
		hookName := nsName + ".sealed.virtop.dev"
		fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
		none := admissionregistrationv1.SideEffectClassNone
		path := "/validate"
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: hookName},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name: hookName,
				ClientConfig: admissionregistrationv1.WebhookClientConfig{
					Service: &admissionregistrationv1.ServiceReference{Namespace: nsName, Name: svc.Name, Path: &path, Port: framework.Ptr(int32(443))},
				},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": nsName}},
				FailurePolicy:           &fail,
				SideEffects:             &none,
				TimeoutSeconds:          framework.Ptr(int32(timeout)),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		hooks := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
		if _, err := hooks.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hooks.Delete(context.Background(), hookName, metav1.DeleteOptions{}) })

		create := func(name string) (time.Duration, error) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsName}}
			start := time.Now()
			_, err := env.Kube.CoreV1().ConfigMaps(nsName).Create(ctx, cm, metav1.CreateOptions{})
			return time.Since(start), err
		}
		// Webhook configurations reach the API server's admission through
		// an informer: wait until a create is refused by this one.
		var took time.Duration
		deadline := time.Now().Add(framework.DefaultTimeout)
		for i := 0; ; i++ {
			took, err = create(fmt.Sprintf("closed-%d", i))
			if err != nil && strings.Contains(err.Error(), hookName) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the webhook never refused a create (last: %v)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.Contains(err.Error(), "network is unreachable") {
			t.Errorf("fail closed: %v; want the API server's dial to fail with network unreachable", err)
		}
		if took >= timeout*time.Second {
			t.Errorf("fail closed: the refusal took %s, the webhook's whole timeout (%ds): the dial did not fail at once", took, timeout)
		}
		t.Logf("MEASURE failurePolicy Fail: refused after %s: %v", took.Round(time.Millisecond), err)

		cur, err := hooks.Get(ctx, hookName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Webhooks[0].FailurePolicy = &ignore
		if _, err := hooks.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline = time.Now().Add(framework.DefaultTimeout)
		for i := 0; ; i++ {
			took, err = create(fmt.Sprintf("open-%d", i))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with failurePolicy Ignore creates are still refused: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if took >= timeout*time.Second {
			t.Errorf("fail open: the create took %s, the webhook's whole timeout (%ds)", took, timeout)
		}
		t.Logf("MEASURE failurePolicy Ignore: admitted after %s", took.Round(time.Millisecond))
	})
}
