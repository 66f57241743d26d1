//go:build packaging

package packaging

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// chartMeta is what the tests need of Chart.yaml.
type chartMeta struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func readChartMeta(t *testing.T) chartMeta {
	t.Helper()
	var m chartMeta
	if err := yaml.Unmarshal(run(t, "cat", "charts/virtop/Chart.yaml"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// helmTemplate renders the chart with the given --set arguments.
func helmTemplate(t *testing.T, helm string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	return decodeStream(t, run(t, helm, append([]string{"template", "rel", "charts/virtop", "--namespace", "kubevirt"}, args...)...))
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func operatorImageOf(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	d := find(objs, "Deployment", "virt-operator")
	if d == nil {
		t.Fatal("no Deployment virt-operator")
	}
	cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image")
	return img
}

func TestChartLint(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	for _, set := range [][]string{nil, {"--set", "kubevirt.create=true", "--set", "namespace.create=true", "--set", "crds.enabled=false", "--set", "uninstallHook.enabled=false"}} {
		cmd := exec.Command(helm, append([]string{"lint", "--strict", "charts/virtop", "--namespace", "kubevirt"}, set...)...)
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}
}

// TestChartRendering: standard labels on every object, the image from
// appVersion or a digest, the CRDs with and without their keep policy or
// at all, the uninstall hook, the KubeVirt resource as a hook.
func TestChartRendering(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	meta := readChartMeta(t)
	if meta.AppVersion == "" || meta.AppVersion == "latest" || !strings.HasPrefix(meta.AppVersion, "v") {
		t.Errorf("Chart.yaml appVersion %q: want a pinned virtop release (v…)", meta.AppVersion)
	}
	objs := helmTemplate(t, helm, "--set", "kubevirt.create=true", "--set", "kubevirtMonitoring.create=true", "--set", "namespace.create=true",
		"--set", "commonLabels.team=virt")
	wantLabels := map[string]string{
		"helm.sh/chart":        meta.Name + "-" + meta.Version,
		vocab.AppNameLabel:     "virtop",
		vocab.AppInstanceLabel: "rel",
		vocab.AppVersionLabel:  meta.AppVersion,
		vocab.ManagedByLabel:   "Helm",
		"team":                 "virt",
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		for k, v := range wantLabels {
			if got := o.GetLabels()[k]; got != v {
				t.Errorf("%s %s: label %s=%q, want %q", o.GetKind(), o.GetName(), k, got, v)
			}
		}
	}
	for kind, n := range map[string]int{"CustomResourceDefinition": 2, "Deployment": 1, "Namespace": 1, "PriorityClass": 1, "KubeVirt": 1,
		"KubeVirtMonitoring": 1, "Job": 1, "ServiceAccount": 3, "Role": 3, "RoleBinding": 3, "ClusterRole": 1, "ClusterRoleBinding": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s objects, want %d (all: %v)", kinds[kind], kind, n, kinds)
		}
	}
	d := find(objs, "Deployment", "virt-operator")
	sel, _, _ := unstructured.NestedStringMap(d.Object, "spec", "selector", "matchLabels")
	if len(sel) != 1 || sel["kubevirt.io"] != "virt-operator" {
		t.Errorf("Deployment selector %v, want upstream's kubevirt.io=virt-operator alone", sel)
	}
	for _, name := range []string{"kubevirts.kubevirt.io", "kubevirtmonitorings.virtop.dev"} {
		crd := find(objs, "CustomResourceDefinition", name)
		if crd == nil {
			t.Errorf("no CRD %s", name)
			continue
		}
		if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s: no helm.sh/resource-policy: keep (crds.keep defaults to true)", name)
		}
		if crd.GetAnnotations()["controller-gen.kubebuilder.io/version"] == "" {
			t.Errorf("CRD %s lost its own annotations", name)
		}
	}
	for _, kind := range []string{"KubeVirt", "KubeVirtMonitoring"} {
		o := find(objs, kind, "kubevirt")
		if o == nil || o.GetAnnotations()["helm.sh/hook"] != "post-install,post-upgrade" {
			t.Errorf("%s kubevirt is not a post-install,post-upgrade hook (Helm would map it before its CRD exists)", kind)
		}
	}
	job := find(objs, "Job", "virtop-uninstall")
	if job == nil || job.GetAnnotations()["helm.sh/hook"] != "pre-delete" {
		t.Fatal("no pre-delete Job virtop-uninstall")
	}
	cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	if strings.Join(args, " ") != "uninstall --namespace=kubevirt --timeout=600s" {
		t.Errorf("uninstall hook runs %q", args)
	}
	role := find(objs, "Role", "virtop-uninstall")
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if got, _ := yaml.Marshal(rules); string(got) != "- apiGroups:\n  - kubevirt.io\n  resources:\n  - kubevirts\n  verbs:\n  - get\n  - list\n  - watch\n  - delete\n" {
		t.Errorf("uninstall Role rules:\n%s\nwant kubevirts get, list, watch, delete only", got)
	}

	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"default", nil, "ghcr.io/virtop-dev/virtop:" + meta.AppVersion},
		{"tag", []string{"--set", "image.tag=v9.9.9"}, "ghcr.io/virtop-dev/virtop:v9.9.9"},
		{"digest", []string{"--set", "image.digest=sha256:" + strings.Repeat("ab", 32)}, "ghcr.io/virtop-dev/virtop@sha256:" + strings.Repeat("ab", 32)},
		{"tag and digest", []string{"--set", "image.tag=v9.9.9", "--set", "image.digest=sha256:" + strings.Repeat("ab", 32)}, "ghcr.io/virtop-dev/virtop:v9.9.9@sha256:" + strings.Repeat("ab", 32)},
		{"repository", []string{"--set", "image.repository=registry.example:5000/mirror/virtop"}, "registry.example:5000/mirror/virtop:" + meta.AppVersion},
	} {
		objs := helmTemplate(t, helm, tc.set...)
		if got := operatorImageOf(t, objs); got != tc.want {
			t.Errorf("%s: operator image %q, want %q", tc.name, got, tc.want)
		}
		if job := find(objs, "Job", "virtop-uninstall"); job != nil {
			cs, _, _ := unstructured.NestedSlice(job.Object, "spec", "template", "spec", "containers")
			if img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image"); img != tc.want {
				t.Errorf("%s: the uninstall hook runs %q, want %q", tc.name, img, tc.want)
			}
		}
	}

	noKeep := helmTemplate(t, helm, "--set", "crds.keep=false")
	if crd := find(noKeep, "CustomResourceDefinition", "kubevirts.kubevirt.io"); crd == nil || crd.GetAnnotations()["helm.sh/resource-policy"] != "" {
		t.Error("crds.keep=false: the CRD is missing or still has the keep policy")
	}
	noCRDs := helmTemplate(t, helm, "--set", "crds.enabled=false", "--set", "uninstallHook.enabled=false")
	for _, o := range noCRDs {
		if o.GetKind() == "CustomResourceDefinition" || o.GetAnnotations()["helm.sh/hook"] != "" {
			t.Errorf("crds.enabled=false, uninstallHook.enabled=false: still renders %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestChartRefusesBadValues: a wrong value fails `helm install --dry-run`
// on the schema, naming the value; good values pass.
func TestChartRefusesBadValues(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	install := func(set ...string) (string, error) {
		cmd := exec.Command(helm, append([]string{"install", "rel", "charts/virtop", "--namespace", "kubevirt", "--dry-run=client"}, set...)...)
		cmd.Dir = repoRoot(t)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	out, err := install("--set", "replicas=3", "--set", "image.digest=sha256:"+strings.Repeat("0", 64), "--set", "tolerations[0].operator=Exists")
	if err != nil {
		t.Fatalf("helm install --dry-run with good values: %v\n%s", err, out)
	}
	for _, want := range []string{"NOTES:", "kubectl -n kubevirt wait deployment/virt-operator", "virtop doctor -n kubevirt", "helm uninstall rel -n kubevirt"} {
		if !strings.Contains(out, want) {
			t.Errorf("NOTES do not say %q:\n%s", want, out)
		}
	}
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "replicas=two"}, "at '/replicas'"},
		{[]string{"--set", "replicas=-1"}, "at '/replicas'"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "at '/image/pullPolicy'"},
		{[]string{"--set", "image.digest=latest"}, "at '/image/digest'"},
		{[]string{"--set", "image.tag=v1:2"}, "at '/image/tag'"},
		{[]string{"--set", "crds.keep=maybe"}, "at '/crds/keep'"},
		{[]string{"--set", "replica=2"}, "additional properties 'replica' not allowed"},
		{[]string{"--set", "kubevirt.name=Not_A_Name"}, "at '/kubevirt/name'"},
		{[]string{"--set", "operator.extraArgs[0]=leader-elect"}, "at '/operator/extraArgs/0'"},
		{[]string{"--set", "operator.prometheusNamespaces=Tenant_A"}, "at '/operator/prometheusNamespaces'"},
		{[]string{"--set", "resources.limits.memory=lots"}, "at '/resources/limits/memory'"},
		{[]string{"--set", "uninstallHook.timeoutSeconds=5"}, "at '/uninstallHook/timeoutSeconds'"},
	} {
		out, err := install(tc.set...)
		if err == nil {
			t.Errorf("helm install --dry-run %v succeeded, want a schema error", tc.set)
			continue
		}
		if !strings.Contains(out, "values don't meet the specifications of the schema") || !strings.Contains(out, tc.want) {
			t.Errorf("helm install --dry-run %v: want a schema error with %q, got:\n%s", tc.set, tc.want, out)
		}
	}
}

// TestChartOCI packages the chart, pushes it to a registry on loopback as
// an OCI artefact (`make chart-push`) and renders it back from there.
func TestChartOCI(t *testing.T) {
	helm := requireTool(t, toolpaths.Helm)
	addr := loopbackRegistry(t)
	dist := t.TempDir()
	version := "v0.0.0-oci"
	push := exec.Command("make", "--no-print-directory", "-C", repoRoot(t), "chart-push",
		"REGISTRY="+addr+"/virtop-dev", "VERSION="+version, "DIST="+dist, "PLAIN_HTTP=1")
	push.Env = withoutMakeEnv(os.Environ())
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("make chart-push: %v\n%s", err, out)
	}
	tgz := filepath.Join(dist, "virtop-0.0.0-oci.tgz")
	local, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	pullDir := t.TempDir()
	ref := "oci://" + addr + "/virtop-dev/charts/virtop"
	run(t, helm, "pull", ref, "--version", "0.0.0-oci", "--plain-http", "--destination", pullDir)
	pulled, err := os.ReadFile(filepath.Join(pullDir, "virtop-0.0.0-oci.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(local, pulled) {
		t.Errorf("the chart pulled back (%d bytes) differs from the one pushed (%d bytes)", len(pulled), len(local))
	}
	objs := decodeStream(t, run(t, helm, "template", "rel", ref, "--version", "0.0.0-oci", "--plain-http", "--namespace", "kubevirt"))
	if got := operatorImageOf(t, objs); got != "ghcr.io/virtop-dev/virtop:"+version {
		t.Errorf("the chart from the registry runs %q, want the packaged appVersion %s", got, version)
	}
}
