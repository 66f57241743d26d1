//go:build packaging

package packaging

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

const upgradedCRD = "kubevirtmonitorings.virtop.dev"

// TestChartUpgradeUpdatesCRDs installs a "previous release" of the chart
// whose CRD differs (its schema's description), adopting the CRDs the
// test API server already has, as a cluster installed with kubectl has
// them; `helm upgrade` to the chart of the tree then updates the CRD; and
// `helm uninstall` leaves the CRDs (crds.keep) while removing the rest.
func TestChartUpgradeUpdatesCRDs(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	helmRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(helm, append(args, "--kubeconfig", kubeconfig, "--namespace", ns)...)
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("helm %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}

	// The previous release: the same chart, the CRD's description changed.
	old := filepath.Join(dir, "virtop")
	run(t, "cp", "-r", "charts/virtop", old)
	crdFile := filepath.Join("files", "crds", "virtop.dev_kubevirtmonitorings.yaml")
	var want apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(run(t, "cat", filepath.Join("charts", "virtop", crdFile)), &want); err != nil {
		t.Fatal(err)
	}
	prev := want.DeepCopy()
	prev.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "the previous release's schema"
	b, err := yaml.Marshal(prev)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, crdFile), append([]byte("---\n"), b...), 0o644); err != nil {
		t.Fatal(err)
	}

	// Adopting objects another manager applied with other values takes
	// --take-ownership and --force-conflicts (the chart README says so);
	// the upgrade after it needs neither.
	helmRun("install", "rel", old, "--take-ownership", "--force-conflicts", "--set", "priorityClass.create=false")
	crd := &apiextensionsv1.CustomResourceDefinition{}
	getCRD := func() {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKey{Name: upgradedCRD}, crd); err != nil {
			t.Fatal(err)
		}
	}
	getCRD()
	if got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; got != prev.Spec.Versions[0].Schema.OpenAPIV3Schema.Description {
		t.Fatalf("after helm install of the previous chart the CRD says %q", got)
	}
	if crd.Labels[vocab.ManagedByLabel] != "Helm" || crd.Annotations["meta.helm.sh/release-name"] != "rel" {
		t.Fatalf("the CRD is not the release's: labels %v annotations %v", crd.Labels, crd.Annotations)
	}

	helmRun("upgrade", "rel", "charts/virtop", "--set", "priorityClass.create=false")
	getCRD()
	if got, w := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description, want.Spec.Versions[0].Schema.OpenAPIV3Schema.Description; got != w {
		t.Errorf("helm upgrade left the CRD's description %q, want %q", got, w)
	}
	gotSchema, _ := json.Marshal(crd.Spec.Versions[0].Schema)
	wantSchema, _ := json.Marshal(want.Spec.Versions[0].Schema)
	var g, w any
	_ = json.Unmarshal(gotSchema, &g)
	_ = json.Unmarshal(wantSchema, &w)
	if !reflect.DeepEqual(g, w) {
		t.Error("after helm upgrade the served schema differs from the chart's")
	}

	helmRun("uninstall", "rel", "--no-hooks", "--wait")
	getCRD()
	if crd.DeletionTimestamp != nil {
		t.Error("helm uninstall deletes the CRD (crds.keep is true by default)")
	}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-operator"}, &appsv1.Deployment{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("Deployment virt-operator after helm uninstall: %v, want not found", err)
	}
}
