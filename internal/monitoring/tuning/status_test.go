package tuning

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtop-dev/virtop/api/v1alpha1"
)

func TestReportStatus(t *testing.T) {
	chosen := &v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Name: "tuning", Namespace: "kubevirt", UID: "a", Generation: 3}}
	other := &v1alpha1.KubeVirtMonitoring{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "kubevirt", UID: "b", Generation: 1}}
	rule := "PrometheusRule kubevirt/prometheus-kubevirt-rules"
	invalid := &InvalidError{Name: "kubevirt/tuning", Errs: field.ErrorList{field.NotFound(field.NewPath("spec", "alerts").Key("NoSuchAlert").Child("name"), "NoSuchAlert")}}
	res := &Result{DisabledAlerts: []string{"LowKVMNodesCount"}, TunedAlerts: []string{"VirtApiRESTErrorsBurst"}}
	type want struct {
		accepted, acceptedReason, applied, appliedReason string
		msg                                              []string
		version                                          string
		disabled                                         int
	}
	for _, tc := range []struct {
		name string
		tp   Report
		obj  *v1alpha1.KubeVirtMonitoring
		want want
	}{
		{"applied", Report{Chosen: chosen, Version: "v1.5.3", Result: res, Tuned: []string{rule}, Reached: true}, chosen,
			want{"True", "Valid", "True", "Applied", []string{"v1.5.3", "PrometheusRule kubevirt/prometheus-kubevirt-rules"}, "v1.5.3", 1}},
		{"rollout not there yet", Report{Chosen: chosen, Version: "v1.5.3", Result: res, Tuned: []string{rule}}, chosen,
			want{"True", "Valid", "False", "Pending", []string{"wait for the rollout"}, "v1.5.3", 1}},
		{"apply failed", Report{Chosen: chosen, Version: "v1.5.3", Result: res, Tuned: []string{rule}, Reached: true, ApplyErr: errors.New("no matches for kind")}, chosen,
			want{"True", "Valid", "False", "Pending", []string{"no matches for kind"}, "v1.5.3", 1}},
		{"gate closed", Report{Chosen: chosen, Version: "v1.5.3", Result: res, Waiting: "PrometheusRule waits for api:monitoring.coreos.com/v1/prometheusrules"}, chosen,
			want{"True", "Valid", "False", "Pending", []string{"not installed", "api:monitoring.coreos.com/v1/prometheusrules"}, "v1.5.3", 1}},
		{"invalid", Report{Chosen: chosen, Version: "v1.5.3", Err: invalid}, chosen,
			want{"False", "InvalidTuning", "False", "NotApplied", []string{"spec.alerts[NoSuchAlert].name", "untuned"}, "v1.5.3", 0}},
		{"version outside the catalog", Report{Chosen: chosen, Version: "v1.6.0", Err: errors.New("no rules of KubeVirt v1.6.0")}, chosen,
			want{"Unknown", "Pending", "False", "NotApplied", []string{"untuned"}, "v1.6.0", 0}},
		{"superseded", Report{Chosen: chosen, Version: "v1.5.3", Result: res, Reached: true}, other,
			want{"False", "Superseded", "False", "NotApplied", []string{"tuning"}, "", 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.tp.Status(tc.obj)
			if st.ObservedGeneration != tc.obj.Generation {
				t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, tc.obj.Generation)
			}
			if len(st.Conditions) != 2 {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			a, p := st.Conditions[0], st.Conditions[1]
			if a.Type != "Accepted" || string(a.Status) != tc.want.accepted || a.Reason != tc.want.acceptedReason {
				t.Errorf("Accepted %s/%s, want %s/%s", a.Status, a.Reason, tc.want.accepted, tc.want.acceptedReason)
			}
			if p.Type != "Applied" || string(p.Status) != tc.want.applied || p.Reason != tc.want.appliedReason {
				t.Errorf("Applied %s/%s, want %s/%s", p.Status, p.Reason, tc.want.applied, tc.want.appliedReason)
			}
			msgs := a.Message + " | " + p.Message
			for _, m := range tc.want.msg {
				if !strings.Contains(msgs, m) {
					t.Errorf("messages %q lack %q", msgs, m)
				}
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != tc.obj.Generation {
					t.Errorf("%s observedGeneration %d", c.Type, c.ObservedGeneration)
				}
			}
			if st.Version != tc.want.version || len(st.DisabledAlerts) != tc.want.disabled {
				t.Errorf("version %q disabled %v, want %q and %d", st.Version, st.DisabledAlerts, tc.want.version, tc.want.disabled)
			}
		})
	}
}
