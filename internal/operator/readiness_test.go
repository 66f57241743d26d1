package operator_test

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestStandbyReplicaReportsReady: a replica waiting for the lease another
// replica holds reports kubevirt_virt_operator_ready_status 1 once its
// caches are synced, and leading_status 0, as every replica of upstream's
// operator does (it reports ready before it campaigns). With the release
// manifest's two replicas, upstream's LowReadyVirtOperatorsCount compares
// the sum of ready_status over Ready pods with the operator pods running:
// a standby reporting 0 made it fire on every healthy install (seen with
// the operator as a pod on the real node, TestMonitoringOnRealNode).
func TestStandbyReplicaReportsReady(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.OperatorLeaseName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("the-other-replica"),
			LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime:          &now,
			RenewTime:            &now,
		},
	}
	if err := env.Client.Create(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, LeaderElect: true})
	poll.Eventually(t, "the standby replica to report itself ready, not leading", time.Minute, func() (bool, string) {
		ready, leading := gaugeValue(t, "kubevirt_virt_operator_ready_status"), gaugeValue(t, "kubevirt_virt_operator_leading_status")
		return ready == 1 && leading == 0, fmt.Sprintf("ready_status %v, leading_status %v", ready, leading)
	})
}

// gaugeValue is the value of the unlabelled gauge name in the registry the
// operator's metrics endpoint serves (-1 when absent).
func gaugeValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
