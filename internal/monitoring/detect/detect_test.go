package detect

import (
	"context"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func configMaps(t *testing.T) (full, withoutMonitoring *corev1.ConfigMap) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}, Spec: kvv1.KubeVirtSpec{ImageTag: "v1.5.3"}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: "kubevirt"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	full, err = s.ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	// An upstream-like strategy generated when Gate B failed: no
	// ServiceMonitor, PrometheusRule or monitoring RBAC, no managed-by.
	stale := &strategy.Strategy{Version: s.Version, Registry: s.Registry, ID: "0123456789abcdef"}
	for _, o := range s.Objects {
		switch o.GetObjectKind().GroupVersionKind().Kind {
		case "ServiceMonitor", "PrometheusRule":
			continue
		}
		stale.Objects = append(stale.Objects, o)
	}
	withoutMonitoring, err = stale.ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	delete(withoutMonitoring.Labels, vocab.ManagedByLabel)
	return full, withoutMonitoring
}

func TestFindStrategiesMissingMonitoring(t *testing.T) {
	full, stale := configMaps(t)
	corrupt := stale.DeepCopy()
	corrupt.Name = "kubevirt-install-strategy-corrupt"
	corrupt.Data["manifests"] = "not base64!"
	other := stale.DeepCopy()
	other.Namespace = "elsewhere"
	prom := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: "k8s"}}

	ctx := context.Background()
	build := func(objs ...client.Object) client.Client {
		return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	}

	// No Prometheus: nothing to report.
	got, err := FindStrategiesMissingMonitoring(ctx, build(full, stale), "kubevirt")
	if err != nil || len(got) != 0 {
		t.Fatalf("without Prometheus: %v, %v", got, err)
	}

	got, err = FindStrategiesMissingMonitoring(ctx, build(full, stale, corrupt, other, prom), "kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("want the stale and the corrupt ConfigMaps, got %+v", got)
	}
	byName := map[string]Finding{}
	for _, f := range got {
		byName[f.ConfigMap.Name] = f
	}
	f := byName[stale.Name]
	if f.Owner != "upstream" || f.Version != "v1.5.3" || f.ID != "0123456789abcdef" ||
		!reflect.DeepEqual(f.Missing, []string{"ServiceMonitor", "PrometheusRule"}) ||
		!reflect.DeepEqual(f.Prometheuses, []string{"monitoring/k8s"}) || f.Err != "" {
		t.Errorf("stale finding %+v", f)
	}
	if !strings.Contains(f.Message, "delete the ConfigMap and restart virt-operator") {
		t.Errorf("message %q", f.Message)
	}
	if c := byName[corrupt.Name]; c.Err == "" {
		t.Errorf("corrupt finding %+v", c)
	}
	if _, ok := byName[full.Name]; ok {
		t.Errorf("virtop's full strategy reported")
	}
}
