package controller_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// alertExpr returns the expression of an alert of the PrometheusRule.
func alertExpr(r *monitoringv1.PrometheusRule, name string) (string, bool) {
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == name {
				return rule.Expr.String(), true
			}
		}
	}
	return "", false
}

// tuningConds summarizes a KubeVirtMonitoring's conditions for messages.
func tuningConds(m *v1alpha1.KubeVirtMonitoring) string {
	var parts []string
	for _, c := range m.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s (%s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("gen %d observed %d version %q: %s", m.Generation, m.Status.ObservedGeneration, m.Status.Version, strings.Join(parts, "; "))
}

func hasCond(m *v1alpha1.KubeVirtMonitoring, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, typ)
	return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == m.Generation
}

// TestTuningLive: a KubeVirtMonitoring is applied to the live
// PrometheusRule and reported in its status; a second one is superseded; an
// invalid tuning is refused naming the field while the rules stay installed
// untuned; an upgrade from v1.5.0 to v1.5.3 carries the tuning to the new
// version's rules.
func TestTuningLive(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.0" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)

	ruleKey := client.ObjectKey{Namespace: ns, Name: "prometheus-kubevirt-rules"}
	rule := &monitoringv1.PrometheusRule{}
	if err := c.Get(ctx, ruleKey, rule); err != nil {
		t.Fatal(err)
	}
	const untunedRatio, tunedRatio = " >= 0.8", " >= 0.5"
	if _, ok := alertExpr(rule, "LowKVMNodesCount"); !ok {
		t.Fatal("untuned PrometheusRule lacks LowKVMNodesCount")
	}
	if e, _ := alertExpr(rule, "VirtApiRESTErrorsBurst"); !strings.HasSuffix(e, untunedRatio) {
		t.Fatalf("untuned VirtApiRESTErrorsBurst expression %q", e)
	}
	// untuned is the live rule in its untuned form: the alert present and
	// the default ratio.
	untuned := func(r *monitoringv1.PrometheusRule) (bool, string) {
		_, low := alertExpr(r, "LowKVMNodesCount")
		e, _ := alertExpr(r, "VirtApiRESTErrorsBurst")
		return low && strings.HasSuffix(e, untunedRatio), fmt.Sprintf("LowKVMNodesCount present %v, VirtApiRESTErrorsBurst %q", low, e)
	}
	tuned := func(r *monitoringv1.PrometheusRule) (bool, string) {
		_, low := alertExpr(r, "LowKVMNodesCount")
		e, _ := alertExpr(r, "VirtApiRESTErrorsBurst")
		return !low && strings.HasSuffix(e, tunedRatio), fmt.Sprintf("LowKVMNodesCount present %v, VirtApiRESTErrorsBurst %q", low, e)
	}
	waitRule := func(what string, want func(*monitoringv1.PrometheusRule) (bool, string), extra func(*monitoringv1.PrometheusRule) (bool, string)) {
		t.Helper()
		poll.Eventually(t, what, 2*time.Minute, func() (bool, string) {
			if err := c.Get(ctx, ruleKey, rule); err != nil {
				return false, err.Error()
			}
			ok, why := want(rule)
			if ok && extra != nil {
				ok, why = extra(rule)
			}
			return ok, why
		})
	}
	tn := &v1alpha1.KubeVirtMonitoring{}
	tnKey := client.ObjectKey{Namespace: ns, Name: "tuning"}
	waitStatus := func(what string, cond func(*v1alpha1.KubeVirtMonitoring) bool) {
		t.Helper()
		poll.Eventually(t, what, 2*time.Minute, func() (bool, string) {
			if err := c.Get(ctx, tnKey, tn); err != nil {
				return false, err.Error()
			}
			return cond(tn), tuningConds(tn)
		})
	}
	applied := func(version string) func(*v1alpha1.KubeVirtMonitoring) bool {
		return func(m *v1alpha1.KubeVirtMonitoring) bool {
			return hasCond(m, v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonValid) &&
				hasCond(m, v1alpha1.ConditionApplied, metav1.ConditionTrue, v1alpha1.ReasonApplied) &&
				m.Status.ObservedGeneration == m.Generation && m.Status.Version == version
		}
	}

	tn = &v1alpha1.KubeVirtMonitoring{
		ObjectMeta: metav1.ObjectMeta{Name: "tuning", Namespace: ns},
		Spec: v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{
			{Name: "LowKVMNodesCount", Disabled: true},
			{Name: "VirtApiRESTErrorsBurst", Parameters: map[string]v1alpha1.ParameterValue{"ratio": "0.5"}},
		}},
	}
	if err := c.Create(ctx, tn); err != nil {
		t.Fatal(err)
	}

	t.Run("tuning applied", func(t *testing.T) {
		waitRule("the tuned PrometheusRule", tuned, nil)
		waitStatus("Accepted=True/Valid, Applied=True/Applied for v1.5.0", applied("v1.5.0"))
		if got, want := tn.Status.DisabledAlerts, []string{"LowKVMNodesCount"}; !reflect.DeepEqual(got, want) {
			t.Errorf("status.disabledAlerts %v, want %v", got, want)
		}
		if got, want := tn.Status.TunedAlerts, []string{"VirtApiRESTErrorsBurst"}; !reflect.DeepEqual(got, want) {
			t.Errorf("status.tunedAlerts %v, want %v", got, want)
		}
		if a := meta.FindStatusCondition(tn.Status.Conditions, v1alpha1.ConditionApplied); !strings.Contains(a.Message, "PrometheusRule "+ns+"/prometheus-kubevirt-rules") {
			t.Errorf("Applied message %q does not name the PrometheusRule", a.Message)
		}
		// Virtop's own status write does not wake it again: the resource
		// stays as it is.
		rv := tn.ResourceVersion
		time.Sleep(5 * time.Second)
		if err := c.Get(ctx, tnKey, tn); err != nil {
			t.Fatal(err)
		}
		if tn.ResourceVersion != rv {
			t.Errorf("the KubeVirtMonitoring was written again in steady state: %s", tuningConds(tn))
		}
	})

	t.Run("second one superseded", func(t *testing.T) {
		// Named to sort after "tuning" should both carry the same
		// creation second.
		second := &v1alpha1.KubeVirtMonitoring{
			ObjectMeta: metav1.ObjectMeta{Name: "zz-second", Namespace: ns},
			Spec:       v1alpha1.KubeVirtMonitoringSpec{Alerts: []v1alpha1.AlertTuning{{Name: "VirtAPIDown", Disabled: true}}},
		}
		if err := c.Create(ctx, second); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "Accepted=False/Superseded on the second", time.Minute, func() (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
				return false, err.Error()
			}
			a := meta.FindStatusCondition(second.Status.Conditions, v1alpha1.ConditionAccepted)
			return hasCond(second, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonSuperseded) &&
				hasCond(second, v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied) &&
				strings.Contains(a.Message, "tuning"), tuningConds(second)
		})
		if err := c.Get(ctx, ruleKey, rule); err != nil {
			t.Fatal(err)
		}
		if _, ok := alertExpr(rule, "VirtAPIDown"); !ok {
			t.Error("the superseded tuning disabled VirtAPIDown")
		}
		if err := c.Delete(ctx, second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("invalid tuning refused, rules untuned", func(t *testing.T) {
		if err := c.Get(ctx, tnKey, tn); err != nil {
			t.Fatal(err)
		}
		orig := tn.DeepCopy()
		tn.Spec.Alerts = append(tn.Spec.Alerts, v1alpha1.AlertTuning{Name: "NoSuchAlert", Disabled: true})
		if err := c.Patch(ctx, tn, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		waitStatus("Accepted=False/InvalidTuning naming NoSuchAlert", func(m *v1alpha1.KubeVirtMonitoring) bool {
			a := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionAccepted)
			return hasCond(m, v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidTuning) &&
				strings.Contains(a.Message, "spec.alerts[NoSuchAlert]") &&
				hasCond(m, v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied) &&
				m.Status.ObservedGeneration == m.Generation
		})
		if len(tn.Status.DisabledAlerts)+len(tn.Status.TunedAlerts) != 0 {
			t.Errorf("status lists %v %v while nothing of the tuning is applied", tn.Status.DisabledAlerts, tn.Status.TunedAlerts)
		}
		waitRule("the PrometheusRule back to its untuned form", untuned, nil)
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != "True" {
			t.Errorf("Available %s after an invalid tuning", a.Status)
		}
		// Fixed again.
		orig = tn.DeepCopy()
		tn.Spec.Alerts = tn.Spec.Alerts[:2]
		if err := c.Patch(ctx, tn, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		waitRule("the tuned PrometheusRule again", tuned, nil)
		waitStatus("Applied again", applied("v1.5.0"))
	})

	t.Run("upgrade keeps the tuning", func(t *testing.T) {
		cur := setImageTag(t, c, key, "v1.5.3")
		poll.Eventually(t, "the update to v1.5.3", 3*time.Minute, func() (bool, string) {
			if err := c.Get(ctx, key, cur); err != nil {
				return false, err.Error()
			}
			return cur.Status.ObservedKubeVirtVersion == "v1.5.3", "observed " + cur.Status.ObservedKubeVirtVersion
		})
		waitRule("v1.5.3's PrometheusRule, tuned", tuned, func(r *monitoringv1.PrometheusRule) (bool, string) {
			v := r.Annotations[vocab.InstallStrategyVersionAnnotation]
			if _, old := alertExpr(r, "VirtApiRESTErrorsHigh"); old {
				return false, "still v1.5.0's rules (VirtApiRESTErrorsHigh present)"
			}
			return v == "v1.5.3", "strategy version " + v
		})
		waitStatus("Applied for v1.5.3", applied("v1.5.3"))
		if got, want := tn.Status.DisabledAlerts, []string{"LowKVMNodesCount"}; !reflect.DeepEqual(got, want) {
			t.Errorf("status.disabledAlerts %v after the upgrade, want %v", got, want)
		}
	})
}
