package tuning

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/api/v1alpha1"
)

// Report is what one reconcile pass did with the honoured
// KubeVirtMonitoring of a namespace, from which every KubeVirtMonitoring
// of the namespace gets its status.
type Report struct {
	// Chosen is the honoured resource (Select); Version the KubeVirt
	// version its tuning was checked against.
	Chosen  *v1alpha1.KubeVirtMonitoring
	Version string
	// Result is the rendered tuning when it was applied; Err says why it
	// was not: an *InvalidError (the tuning's fault) or a version whose
	// rules cannot be checked.
	Result *Result
	Err    error
	// Tuned names the objects the tuning rewrote ("PrometheusRule
	// kubevirt/prometheus-kubevirt-rules"); Waiting the gates that keep
	// them out of the plan.
	Tuned   []string
	Waiting string
	// Reached is true once the apply got through the monitoring stage;
	// ApplyErr is a failure to apply the monitoring objects.
	Reached  bool
	ApplyErr error
}

// Status is the status a KubeVirtMonitoring of the namespace should carry
// after the pass (the honoured one or one it supersedes); the conditions'
// transition times are the caller's.
func (tp *Report) Status(t *v1alpha1.KubeVirtMonitoring) v1alpha1.KubeVirtMonitoringStatus {
	st := v1alpha1.KubeVirtMonitoringStatus{ObservedGeneration: t.Generation}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: t.Generation})
	}
	if tp.Chosen == nil || tp.Chosen.UID != t.UID {
		name := ""
		if tp.Chosen != nil {
			name = tp.Chosen.Name
		}
		set(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonSuperseded,
			fmt.Sprintf("KubeVirtMonitoring %s is honoured in namespace %s (the oldest; one is honoured per namespace); this one is ignored", name, t.Namespace))
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "Superseded by KubeVirtMonitoring "+name)
		return st
	}
	st.Version = tp.Version
	out := tp
	switch {
	case out.Err != nil && IsInvalid(out.Err):
		set(v1alpha1.ConditionAccepted, metav1.ConditionFalse, v1alpha1.ReasonInvalidTuning, fmt.Sprintf("Checked against the rules of KubeVirt %s: %v", tp.Version, out.Err))
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied,
			"The tuning is not accepted; the monitoring objects stay installed untuned until it is fixed")
		return st
	case out.Err != nil:
		set(v1alpha1.ConditionAccepted, metav1.ConditionUnknown, v1alpha1.ReasonPending, out.Err.Error())
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonNotApplied, "The tuning could not be checked; the monitoring objects are installed untuned")
		return st
	}
	set(v1alpha1.ConditionAccepted, metav1.ConditionTrue, v1alpha1.ReasonValid, "Valid for the rules of KubeVirt "+tp.Version)
	if out.Result != nil {
		out.Result.SetStatus(tp.Version, &st)
	}
	names := out.Tuned
	switch {
	case len(out.Tuned) == 0:
		why := out.Waiting
		if why == "" {
			why = "the install strategy holds none"
		}
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, "The monitoring objects are not installed: "+why)
	case tp.ApplyErr != nil:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, fmt.Sprintf("Applying %s failed, retrying: %v", strings.Join(names, ", "), tp.ApplyErr))
	case !tp.Reached:
		set(v1alpha1.ConditionApplied, metav1.ConditionFalse, v1alpha1.ReasonPending, fmt.Sprintf("%s wait for the rollout of KubeVirt %s", strings.Join(names, ", "), tp.Version))
	default:
		msg := fmt.Sprintf("Applied to the rules of KubeVirt %s: %s", tp.Version, strings.Join(names, ", "))
		if out.Waiting != "" {
			msg += "; " + out.Waiting
		}
		set(v1alpha1.ConditionApplied, metav1.ConditionTrue, v1alpha1.ReasonApplied, msg)
	}
	return st
}
