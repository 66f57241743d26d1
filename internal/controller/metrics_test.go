package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

const emulationMetric = "kubevirt_configuration_emulation_enabled"

// virtopFamilies gathers the operator's own series: virtop's (virtop_) and
// the upstream operator's it keeps (kubevirt_).
func virtopFamilies(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		if strings.HasPrefix(f.GetName(), "virtop_") || strings.HasPrefix(f.GetName(), "kubevirt_") {
			out[f.GetName()] = f
		}
	}
	return out
}

// set reports whether any series of the family was ever given a value:
// a non-zero gauge or counter, a histogram with observations.
func set(f *dto.MetricFamily) bool {
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge().GetValue() != 0, m.GetCounter().GetValue() != 0, m.GetHistogram().GetSampleCount() != 0:
			return true
		}
	}
	return false
}

func gaugeValue(t *testing.T, name string) (float64, bool) {
	f, ok := virtopFamilies(t)[name]
	if !ok || len(f.GetMetric()) != 1 {
		return 0, false
	}
	return f.GetMetric()[0].GetGauge().GetValue(), true
}

// TestExportedMetricsAreSet installs with every setting that drives a
// metric on (emulation included) and checks that no series the operator
// exports stays at the zero value it was registered with, so none is
// exported without being set; then it turns emulation off and on again.
func TestExportedMetricsAreSet(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{UseEmulation: true}
	})
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)

	poll.Eventually(t, "every exported metric set", time.Minute, func() (bool, string) {
		fams := virtopFamilies(t)
		var unset []string
		for name, f := range fams {
			if !set(f) {
				unset = append(unset, name)
			}
		}
		slices.Sort(unset)
		return len(fams) > 0 && len(unset) == 0, fmt.Sprintf("%d families, never set: %v", len(fams), unset)
	})

	for _, want := range []float64{0, 1} {
		// The operator writes the status meanwhile: read again on a
		// conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, cur); err != nil {
				return err
			}
			cur.Spec.Configuration.DeveloperConfiguration.UseEmulation = want == 1
			return c.Update(ctx, cur)
		})
		if err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, fmt.Sprintf("%s = %v", emulationMetric, want), time.Minute, func() (bool, string) {
			v, ok := gaugeValue(t, emulationMetric)
			return ok && v == want, fmt.Sprintf("value %v (exported %v)", v, ok)
		})
	}
}
