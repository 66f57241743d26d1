package placement

import (
	"reflect"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/config"
)

// TestMonitorNamespaceBindsItsPrometheusAccount (issue 31 item 7):
// spec.monitorNamespace names a namespace whose kube-prometheus-stack
// Prometheus runs as obs-kps-kube-prometheus-prometheus: that account is
// bound, not upstream's default name prometheus-k8s.
func TestMonitorNamespaceBindsItsPrometheusAccount(t *testing.T) {
	in := Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
		Settings:             config.Monitoring{MonitorNamespace: "observability"},
		PrometheusNamespaces: []string{},
		Prometheuses:         []PrometheusInfo{kubePrometheusStack("observability", "obs-kps", t0)},
		Namespaces:           ns("kubevirt", "observability"),
	}
	p := Resolve(in, objs)
	want := []rbacv1.Subject{sa("observability", "obs-kps-kube-prometheus-prometheus")}
	if !reflect.DeepEqual(p.Subjects, want) || p.Reason != ReasonApplied {
		t.Errorf("subjects %v, reason %s (%s); want %v, %s", p.Subjects, p.Reason, p.Message, want, ReasonApplied)
	}
	// The user's account wins when named.
	in.Settings.MonitorAccount = "prometheus-k8s"
	if p := Resolve(in, objs); !reflect.DeepEqual(p.Subjects, []rbacv1.Subject{sa("observability", "prometheus-k8s")}) {
		t.Errorf("named account: subjects %v", p.Subjects)
	}
	// No Prometheus there: upstream's default name.
	in.Settings.MonitorAccount = ""
	in.Prometheuses = nil
	if p := Resolve(in, objs); !reflect.DeepEqual(p.Subjects, []rbacv1.Subject{sa("observability", "prometheus-k8s")}) {
		t.Errorf("no Prometheus: subjects %v", p.Subjects)
	}
}

// TestMissingAccountNotApplied (issue 31 item 7): an account found
// missing is not bound, and MonitoringReady is not Applied while it is
// the one that matters.
func TestMissingAccountNotApplied(t *testing.T) {
	kps := kubePrometheusStack("observability", "obs-kps", t0)
	cases := []struct {
		name     string
		settings config.Monitoring
		proms    []PrometheusInfo
		missing  string
	}{
		{"the chosen Prometheus's account", config.Monitoring{MonitorNamespace: "observability"}, []PrometheusInfo{kps}, "obs-kps-kube-prometheus-prometheus"},
		{"upstream's default name, no Prometheus", config.Monitoring{MonitorNamespace: "observability"}, nil, "prometheus-k8s"},
		{"the user's account", config.Monitoring{MonitorNamespace: "observability", MonitorAccount: "prom"}, nil, "prom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
				Settings: c.settings, PrometheusNamespaces: []string{}, Prometheuses: c.proms,
				Namespaces:      ns("kubevirt", "observability"),
				MissingAccounts: nsn("observability", c.missing),
			}
			p := Resolve(in, objs)
			if p.Reason != ReasonAccountNotFound || len(p.Subjects) != 0 || len(p.ReaderSubjects) != 0 {
				t.Errorf("reason %s, subjects %v, reader %v: %s", p.Reason, p.Subjects, p.ReaderSubjects, p.Message)
			}
			if !strings.Contains(p.Message, "ServiceAccount observability/"+c.missing+" does not exist") {
				t.Errorf("message %q does not name the missing account", p.Message)
			}
		})
	}
}

// TestDefaultNamespaceTrustedByAge (issue 31 item 5): with the default
// --prometheus-namespaces, a default monitor namespace counts only if it
// existed when the KubeVirt resource was created; naming it trusts it at
// any age.
func TestDefaultNamespaceTrustedByAge(t *testing.T) {
	kv := t0.Add(time.Hour)
	base := func(created time.Time) Input {
		return Input{InstallNamespace: "kubevirt", ServiceMonitorAPI: true, PrometheusRuleAPI: true,
			Prometheuses:     []PrometheusInfo{kubePrometheus()},
			Namespaces:       ns("kubevirt", "monitoring"),
			TrustSince:       kv,
			NamespaceCreated: map[string]time.Time{"kubevirt": t0, "monitoring": created},
			Accounts:         nsn("monitoring", "prometheus-k8s"),
		}
	}
	old := Resolve(base(t0), objs)
	if old.Reason != ReasonApplied || !reflect.DeepEqual(old.Subjects, []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}) {
		t.Errorf("older namespace: %s %v: %s", old.Reason, old.Subjects, old.Message)
	}
	if len(old.ReaderSubjects) != 0 {
		t.Errorf("older namespace, not named: virtop-metrics-reader binds %v", old.ReaderSubjects)
	}
	late := Resolve(base(kv.Add(time.Second)), objs)
	if late.Reason == ReasonApplied || len(late.Subjects) != 0 || len(late.ReaderSubjects) != 0 ||
		!strings.Contains(late.Message, "was created after the KubeVirt resource") {
		t.Errorf("newer namespace: %s %v %v: %s", late.Reason, late.Subjects, late.ReaderSubjects, late.Message)
	}
	noProm := base(kv.Add(time.Second))
	noProm.Prometheuses = nil
	if p := Resolve(noProm, objs); p.Reason == ReasonApplied || len(p.Subjects) != 0 {
		t.Errorf("newer namespace, upstream's default account only: %s %v: %s", p.Reason, p.Subjects, p.Message)
	}
	named := base(kv.Add(time.Second))
	named.PrometheusNamespaces = []string{"monitoring"}
	p := Resolve(named, objs)
	if p.Reason != ReasonApplied || !reflect.DeepEqual(p.ReaderSubjects, []rbacv1.Subject{sa("monitoring", "prometheus-k8s")}) {
		t.Errorf("named in --prometheus-namespaces: %s, reader %v: %s", p.Reason, p.ReaderSubjects, p.Message)
	}
	unread := base(t0)
	delete(unread.NamespaceCreated, "monitoring")
	if p := Resolve(unread, objs); p.Reason == ReasonApplied {
		t.Errorf("creation time unknown: %s: %s", p.Reason, p.Message)
	}
}

func nsn(namespace, name string) []types.NamespacedName {
	return []types.NamespacedName{{Namespace: namespace, Name: name}}
}
