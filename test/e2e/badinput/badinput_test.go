package badinput

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// bench is the state the cases share.
type bench struct {
	env  *framework.Env
	c    client.Client
	op   *operator
	good *kvv1.KubeVirt
	// tenant are the objects the tenantCopies case made (its input).
	tenant map[string]string
}

// TestBadInput runs the bad input table against one install: each input
// is applied to the running install, its outcome checked (refused at
// admission naming the field, or stored and answered as the table says),
// and then, in every case: the operator never exited, the running control
// plane was not written, and (for every stored input, and once for all the
// refused ones) the operator is quiet over quietWindow. The good spec is
// restored after each stored input and Available waited for.
func TestBadInput(t *testing.T) {
	env := framework.Require(t)
	start := time.Now()
	b := &bench{env: env, c: env.Client(t)}
	b.op = startOperator(t, env)
	b.good = ensureInstalled(t, b.c)
	// The virt-operator-validator webhook is served by this host process
	// (devcluster.HostOperatorFlags): make sure the API server calls it
	// before any case relies on it.
	b.waitWebhookServed(t)

	cases := badInputs(b.good)
	var admission, stored []badCase
	for _, bc := range cases {
		if bc.want == refused {
			admission = append(admission, bc)
		} else {
			stored = append(stored, bc)
		}
	}
	t.Logf("bad input table: %d cases (%d refused at admission, %d stored and answered)", len(cases), len(admission), len(stored))
	if len(cases) < 25 {
		t.Errorf("the table holds %d cases; issue 10 asks for at least 25", len(cases))
	}

	before := framework.ManagedResourceVersions(t, b.c)
	for _, bc := range admission {
		t.Run(bc.name, func(t *testing.T) { b.runRefused(t, bc) })
	}
	t.Run("quiet after every refused input", func(t *testing.T) {
		quiet(t, b.c, b.op, "the refused inputs")
		untouched(t, b.c, before, "the refused inputs")
		b.op.alive(t)
	})
	for _, bc := range stored {
		t.Run(bc.name, func(t *testing.T) { b.runStored(t, bc) })
	}
	t.Logf("MEASURE bad input table (%d cases) ran in %s", len(cases), time.Since(start).Round(time.Second))
}

// waitWebhookServed waits until an update the webhook refuses is refused:
// the webhook configuration is applied with the admission stage.
func (b *bench) waitWebhookServed(t *testing.T) {
	t.Helper()
	probe := specPatch(map[string]any{"imagePullSecrets": []any{map[string]string{"name": "Not_A_Name"}}})
	poll.Eventually(t, "virtop's webhook to answer", 2*time.Minute, func(ctx context.Context) (bool, error) {
		kv := &kvv1.KubeVirt{}
		kv.Namespace, kv.Name = framework.KubeVirtKey.Namespace, framework.KubeVirtKey.Name
		err := b.c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, []byte(probe)), client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "admission webhook") {
			return true, nil
		}
		return false, fmt.Errorf("dry-run of an invalid imagePullSecret: %v", err)
	})
}

func (b *bench) kv(t *testing.T) *kvv1.KubeVirt {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	if err := b.c.Get(context.Background(), framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// runRefused applies an input that must be refused at admission.
func (b *bench) runRefused(t *testing.T, bc badCase) {
	before := framework.ManagedResourceVersions(t, b.c)
	kvBefore := b.kv(t)
	err := b.input(t, bc)
	if err == nil {
		t.Errorf("%s was admitted; want it refused by the %s naming %q", bc.name, bc.by, bc.field)
		b.restore(t)
		return
	}
	msg := err.Error()
	t.Logf("refused: %s", clip(msg, 600))
	if !strings.Contains(msg, bc.field) {
		t.Errorf("the refusal does not name %q: %s", bc.field, clip(msg, 600))
	}
	if bc.says != "" && !strings.Contains(msg, bc.says) {
		t.Errorf("the refusal does not say %q: %s", bc.says, clip(msg, 600))
	}
	hooked := strings.Contains(msg, "admission webhook")
	if (bc.by == byWebhook) != hooked {
		t.Errorf("refused by the wrong party: want the %s: %s", bc.by, clip(msg, 600))
	}
	if kvAfter := b.kv(t); kvAfter.ResourceVersion != kvBefore.ResourceVersion {
		t.Errorf("the KubeVirt resource changed although the input was refused (resourceVersion %s -> %s)", kvBefore.ResourceVersion, kvAfter.ResourceVersion)
	}
	untouched(t, b.c, before, bc.name)
	b.op.alive(t)
}

// runStored applies an input that is stored and answered by the operator.
func (b *bench) runStored(t *testing.T, bc badCase) {
	before := framework.ManagedResourceVersions(t, b.c)
	if bc.action == "operatorNamespace" {
		b.runOperatorNamespace(t, bc, before)
		return
	}
	if err := b.input(t, bc); err != nil {
		t.Fatalf("%s was refused (%v); want it stored and answered by a %s", bc.name, err, bc.want)
	}
	t.Cleanup(func() { b.restore(t) })
	switch bc.want {
	case kvCondition:
		reason := kvv1.ReasonInvalidConfiguration
		if bc.reason != "" {
			reason = bc.reason
		}
		settled(t, b.c, reason+" naming "+bc.field, func(kv *kvv1.KubeVirt) (bool, string) {
			st := kv.Status.Condition(kvv1.KubeVirtConditionStalled)
			sy := kv.Status.Condition(kvv1.KubeVirtConditionSynchronized)
			av := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
			ok := st.Status == corev1.ConditionTrue && st.Reason == reason &&
				strings.Contains(st.Message, bc.field) && strings.Contains(st.Message, bc.says) &&
				sy.Status == corev1.ConditionFalse && strings.Contains(sy.Message, bc.field) &&
				av.Status == corev1.ConditionTrue
			return ok, fmt.Sprintf("Stalled %s %s: %s; Synchronized %s: %s; Available %s", st.Status, st.Reason, st.Message, sy.Status, sy.Message, av.Status)
		})
		t.Logf("answered: %s", b.kv(t).Status.Condition(kvv1.KubeVirtConditionStalled).Message)
	case ignored:
		settled(t, b.c, "Available, the input ignored", func(kv *kvv1.KubeVirt) (bool, string) {
			ok, why := framework.RolledOutAt(installVersion)(kv)
			st := kv.Status.Condition(kvv1.KubeVirtConditionStalled)
			return ok && st.Status == corev1.ConditionFalse, fmt.Sprintf("%s; Stalled %s: %s", why, st.Status, st.Message)
		})
	case monCondition:
		b.waitMonitoring(t, bc)
	default:
		t.Fatalf("unknown outcome %q", bc.want)
	}
	quiet(t, b.c, b.op, bc.name)
	after := framework.ManagedResourceVersions(t, b.c)
	if bc.action == "tenantCopies" {
		b.tenantCopiesKept(t, after)
	}
	untouched(t, b.c, before, bc.name, after)
	b.op.alive(t)
}

// tenantCopiesKept checks that the objects a tenant labelled as virtop's
// are still there as the tenant wrote them, and drops them from after: they
// are the case's input, not the control plane.
func (b *bench) tenantCopiesKept(t *testing.T, after map[string]string) {
	t.Helper()
	for key, rv := range b.tenant {
		if after[key] != rv {
			t.Errorf("the tenant's %s was written or deleted by the operator (resourceVersion %s -> %q)", key, rv, after[key])
		}
		delete(after, key)
	}
}

// strangerScrapes reads the operator's metrics as callers it must refuse:
// with no token and with 2000 distinct forged ones (401: the API server
// authenticates none), and with the token of a ServiceAccount nothing
// authorizes for get on /metrics (403). None gets a metric.
func (b *bench) strangerScrapes(t *testing.T) error {
	ctx := context.Background()
	ns := b.env.Namespace(t, "stranger")
	if err := b.c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stranger"}}); err != nil {
		return err
	}
	tr, err := b.env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "stranger", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	expect := func(token string, code int) error {
		_, err := framework.GetMetrics(ctx, b.op.metrics.Addr, token)
		var se *framework.MetricsStatusError
		if !errors.As(err, &se) || se.Code != code {
			return fmt.Errorf("GET /metrics with token %.12q: %v, want status %d", token, err, code)
		}
		return nil
	}
	if err := expect("", http.StatusUnauthorized); err != nil {
		return err
	}
	if err := expect(tr.Status.Token, http.StatusForbidden); err != nil {
		return err
	}
	for i := 0; i < 2000; i++ {
		if err := expect(fmt.Sprintf("forged-%d", i), http.StatusUnauthorized); err != nil {
			return err
		}
	}
	return nil
}

// tenantCopies are what a tenant labels app.kubernetes.io/managed-by:
// virtop in a namespace of their own: a large ConfigMap, a Secret, and a
// kubectl copy of the CA bundle kept as a backup. b.tenant keys them as
// framework.ManagedResourceVersions does, with their resourceVersions.
func (b *bench) tenantCopies(t *testing.T) error {
	ctx := context.Background()
	ns := b.env.Namespace(t, "tenant")
	labels := map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}
	ca := &corev1.ConfigMap{}
	if err := b.c.Get(ctx, client.ObjectKey{Namespace: framework.KubeVirtKey.Namespace, Name: "kubevirt-ca"}, ca); err != nil {
		return err
	}
	objs := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blob", Labels: labels}, Data: map[string]string{"blob": strings.Repeat("x", 512<<10)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blob", Labels: labels}, StringData: map[string]string{"blob": strings.Repeat("x", 512<<10)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt-ca", Labels: ca.Labels}, Data: ca.Data},
	}
	b.tenant = map[string]string{}
	for _, o := range objs {
		if err := b.c.Create(ctx, o); err != nil {
			return err
		}
		list := "ConfigMapList"
		if _, ok := o.(*corev1.Secret); ok {
			list = "SecretList"
		}
		b.tenant[list+"/"+ns+"/"+o.GetName()] = o.GetResourceVersion()
	}
	// Gone before the next case takes its snapshot (the namespace's own
	// deletion, registered earlier, runs after this and does not wait).
	t.Cleanup(func() {
		for _, o := range objs {
			if err := b.c.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Error(err)
			}
		}
		poll.Eventually(t, "the tenant's objects gone", time.Minute, func(ctx context.Context) (bool, error) {
			for _, o := range objs {
				if err := b.c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			return true, nil
		})
	})
	return nil
}

// input applies the case's input and returns the API server's answer.
func (b *bench) input(t *testing.T, bc badCase) error {
	t.Helper()
	ctx := context.Background()
	switch bc.action {
	case "":
		kv := &kvv1.KubeVirt{}
		kv.Namespace, kv.Name = framework.KubeVirtKey.Namespace, framework.KubeVirtKey.Name
		return b.c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, []byte(bc.patch)))
	case "second", "wrongNamespace":
		kv := &kvv1.KubeVirt{Spec: *b.good.Spec.DeepCopy()}
		kv.Namespace, kv.Name = framework.KubeVirtKey.Namespace, "kubevirt-second"
		if bc.action == "wrongNamespace" {
			kv.Namespace, kv.Name = b.env.Namespace(t, "kv-elsewhere"), framework.KubeVirtKey.Name
		}
		err := b.c.Create(ctx, kv)
		if err == nil {
			t.Cleanup(func() {
				_ = b.c.Delete(context.Background(), kv)
			})
		}
		return err
	case "moveNamespace":
		gvr := schema.GroupVersionResource{Group: kvv1.GroupVersion.Group, Version: kvv1.GroupVersion.Version, Resource: "kubevirts"}
		res := b.env.Clients.Dynamic.Resource(gvr).Namespace(framework.KubeVirtKey.Namespace)
		u, err := res.Get(ctx, framework.KubeVirtKey.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetNamespace(b.env.Namespace(t, "kv-moved"))
		_, err = res.Update(ctx, u, metav1.UpdateOptions{})
		return err
	case "tenantCopies":
		return b.tenantCopies(t)
	case "strangerScrapes":
		return b.strangerScrapes(t)
	case "monUnknownAlert", "monUnknownParam", "monBadExpr", "monBadLabel":
		m := &v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Namespace: framework.KubeVirtKey.Namespace, Name: "bad-tuning"}}
		switch bc.action {
		case "monUnknownAlert":
			m.Spec.Alerts = []v1alpha1.AlertTuning{{Name: "NoSuchAlert", Severity: v1alpha1.SeverityInfo}}
		case "monUnknownParam":
			m.Spec.Alerts = []v1alpha1.AlertTuning{{Name: "VirtApiRESTErrorsBurst", Parameters: map[string]v1alpha1.ParameterValue{"threshold": "0.5"}}}
		case "monBadExpr":
			m.Spec.AdditionalGroups = []v1alpha1.RuleGroup{{Name: "mine", Rules: []v1alpha1.Rule{{Alert: "Mine", Expr: "sum(rate(kubevirt_vmi_phase_count[5m]"}}}}
		case "monBadLabel":
			m.Spec.Alerts = []v1alpha1.AlertTuning{{Name: "VirtApiRESTErrorsBurst", Labels: map[string]string{"team-name": "virt"}}}
		}
		err := b.c.Create(ctx, m)
		if err == nil {
			t.Cleanup(func() {
				if err := b.c.Delete(context.Background(), m); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
				poll.Eventually(t, "the KubeVirtMonitoring gone", time.Minute, func(ctx context.Context) (bool, error) {
					err := b.c.Get(ctx, client.ObjectKeyFromObject(m), &v1alpha1.KubeVirtMonitoring{})
					return apierrors.IsNotFound(err), err
				})
			})
		}
		return err
	}
	t.Fatalf("unknown action %q", bc.action)
	return nil
}

// waitMonitoring waits for the KubeVirtMonitoring's Accepted condition to
// refuse the tuning naming the field.
func (b *bench) waitMonitoring(t *testing.T, bc badCase) {
	t.Helper()
	key := client.ObjectKey{Namespace: framework.KubeVirtKey.Namespace, Name: "bad-tuning"}
	poll.Eventually(t, "Accepted False naming "+bc.field, 2*time.Minute, func(ctx context.Context) (bool, error) {
		m := &v1alpha1.KubeVirtMonitoring{}
		if err := b.c.Get(ctx, key, m); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionAccepted)
		if c == nil {
			return false, fmt.Errorf("no Accepted condition yet")
		}
		ok := m.Status.ObservedGeneration == m.Generation && c.Status == metav1.ConditionFalse &&
			c.Reason == v1alpha1.ReasonInvalidTuning && strings.Contains(c.Message, bc.field)
		if ok {
			t.Logf("answered: %s", clip(c.Message, 600))
		}
		return ok, fmt.Errorf("Accepted %s %s: %s", c.Status, c.Reason, c.Message)
	})
}

// runOperatorNamespace restarts the operator with another --namespace: it
// must leave the running install alone and say it does not serve it, and
// the operator with the right namespace takes over again without a write.
func (b *bench) runOperatorNamespace(t *testing.T, bc badCase, before map[string]string) {
	b.op.Stop(10 * time.Second)
	other := b.env.Namespace(t, "virtop-moved")
	moved := startOperator(t, b.env, "--namespace", other)
	framework.WaitKubeVirt(t, b.c, "not served, naming the namespace", 2*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		sy := kv.Status.Condition(kvv1.KubeVirtConditionSynchronized)
		av := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
		return sy.Status == corev1.ConditionFalse && sy.Reason == kvv1.ReasonExistingDeployment &&
				strings.Contains(sy.Message, bc.field) && strings.Contains(sy.Message, other) && av.Status == corev1.ConditionTrue,
			fmt.Sprintf("Synchronized %s %s: %s; Available %s", sy.Status, sy.Reason, sy.Message, av.Status)
	})
	t.Logf("answered: %s", b.kv(t).Status.Condition(kvv1.KubeVirtConditionSynchronized).Message)
	quiet(t, b.c, moved, bc.name)
	untouched(t, b.c, before, bc.name)
	moved.alive(t)
	moved.Stop(10 * time.Second)
	b.op.Start()
	settled(t, b.c, "Available again under the right operator", func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(installVersion)(kv)
		sy := kv.Status.Condition(kvv1.KubeVirtConditionSynchronized)
		return ok && sy.Status == corev1.ConditionTrue, fmt.Sprintf("%s; Synchronized %s: %s", why, sy.Status, sy.Message)
	})
	// The host-process operator serves its webhook with a certificate it
	// makes at start: its return rewrites virt-operator-validator's
	// caBundle, and nothing else.
	delete(before, "ValidatingWebhookConfigurationList//virt-operator-validator")
	after := framework.ManagedResourceVersions(t, b.c)
	delete(after, "ValidatingWebhookConfigurationList//virt-operator-validator")
	untouched(t, b.c, before, "the operator's return", after)
}

// restore puts the good spec and metadata back and waits until the install
// is Available and settled again.
func (b *bench) restore(t *testing.T) {
	t.Helper()
	poll.Eventually(t, "the good spec restored", time.Minute, func(ctx context.Context) (bool, error) {
		kv := &kvv1.KubeVirt{}
		if err := b.c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
			return false, err
		}
		kv.Spec = *b.good.Spec.DeepCopy()
		kv.Annotations = b.good.Annotations
		err := b.c.Update(ctx, kv)
		return err == nil, err
	})
	settled(t, b.c, "Available after the restore", func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(installVersion)(kv)
		st := kv.Status.Condition(kvv1.KubeVirtConditionStalled)
		return ok && st.Status == corev1.ConditionFalse, fmt.Sprintf("%s; Stalled %s: %s", why, st.Status, st.Message)
	})
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
