package strategy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func render(t testing.TB, version string, settings config.Settings, mutate func(*kvv1.KubeVirt)) *Strategy {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.ImageTag = version
	if mutate != nil {
		mutate(kv)
	}
	cfg, err := config.FromKubeVirt(kv, settings)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := Generate(cfg)
	if err != nil {
		t.Fatalf("Generate %s: %v", version, err)
	}
	return s
}

func workloads(s *Strategy) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	for _, o := range s.Objects {
		if pt := podTemplate(o); pt != nil {
			out[o.GetName()] = pt
		}
	}
	return out
}

func handler(t *testing.T, s *Strategy) *appsv1.DaemonSet {
	t.Helper()
	ds, ok := s.Find("DaemonSet", s.Objects[0].GetNamespace(), vocab.VirtHandler).(*appsv1.DaemonSet)
	if !ok {
		for _, o := range s.Objects {
			if d, ok := o.(*appsv1.DaemonSet); ok {
				return d
			}
		}
		t.Fatal("no virt-handler")
	}
	return ds
}

func TestPlacement(t *testing.T) {
	for _, v := range release.Versions() {
		s := render(t, v, config.Settings{}, func(kv *kvv1.KubeVirt) {
			kv.Spec.Infra = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{NodeSelector: map[string]string{"infra": "yes"}}, Replicas: ptr.To(uint8(3))}
			kv.Spec.Workloads = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{Tolerations: []corev1.Toleration{{Key: "vms", Operator: corev1.TolerationOpExists}}}}
		})
		for name, pt := range workloads(s) {
			sel := pt.Spec.NodeSelector
			if sel[corev1.LabelOSStable] != "linux" {
				t.Errorf("%s %s: node selector %v lacks kubernetes.io/os", v, name, sel)
			}
			if name == vocab.VirtHandler {
				if !slices.ContainsFunc(pt.Spec.Tolerations, func(x corev1.Toleration) bool { return x.Key == "vms" }) || sel["infra"] != "" {
					t.Errorf("%s virt-handler: workloads placement not applied: %v %v", v, sel, pt.Spec.Tolerations)
				}
				continue
			}
			// virt-template's pods bring their own node affinity (arch).
			ownAffinity := !slices.Contains(kubeVirtComponents, name)
			if sel["infra"] != "yes" || !ownAffinity && pt.Spec.Affinity != nil && pt.Spec.Affinity.NodeAffinity != nil {
				t.Errorf("%s %s: infra placement not applied (or the control-plane default kept): %v %+v", v, name, sel, pt.Spec.Affinity)
			}
		}
		for _, o := range s.OfKind("Deployment") {
			if r := o.(*appsv1.Deployment).Spec.Replicas; r == nil || *r != 3 {
				t.Errorf("%s %s: replicas %v, want 3", v, o.GetName(), r)
			}
		}
	}
	// Without placement: upstream's control-plane default on Deployments.
	d := render(t, "v1.9.0", config.Settings{}, nil).Find("Deployment", "kubevirt", vocab.VirtController).(*appsv1.Deployment)
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("virt-controller without placement: affinity %+v, want the control-plane default", a)
	}
}

func TestPullSecretsAndLauncherImageHolder(t *testing.T) {
	for _, v := range release.Versions() {
		s := render(t, v, config.Settings{}, func(kv *kvv1.KubeVirt) {
			kv.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		})
		for name, pt := range workloads(s) {
			has := slices.Contains(pt.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: "regcred"})
			if has != slices.Contains(kubeVirtComponents, name) {
				t.Errorf("%s %s: pull secret %v", v, name, has)
			}
		}
		cs := handler(t, s).Spec.Template.Spec.Containers
		if len(cs) < 2 || cs[1].Name != "virt-launcher-image-holder" || !strings.Contains(cs[1].Image, "/virt-launcher:"+v) {
			t.Errorf("%s: virt-handler containers %v, want the image holder second", v, containerNames(cs))
		}
	}
	if cs := handler(t, render(t, "v1.5.3", config.Settings{}, nil)).Spec.Template.Spec.Containers; len(cs) != 1 {
		t.Errorf("without pull secrets: containers %v", containerNames(cs))
	}
}

func containerNames(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestPassthroughEnv(t *testing.T) {
	env := config.PassthroughEnvFrom([]string{"KV_IO_EXTRA_ENV_HTTPS_PROXY=http://proxy:3128", "KV_IO_EXTRA_ENV_NO_PROXY=.svc", "OTHER=x", "KV_IO_EXTRA_ENV_=y"})
	if len(env) != 2 {
		t.Fatalf("PassthroughEnvFrom: %v", env)
	}
	for _, v := range release.Versions() {
		s := render(t, v, config.Settings{PassthroughEnv: env}, nil)
		plain := render(t, v, config.Settings{}, nil)
		if s.ID == plain.ID {
			t.Errorf("%s: the passthrough environment does not change the deployment ID", v)
		}
		for name, pt := range workloads(s) {
			e := pt.Spec.Containers[0].Env
			got := len(e) >= 2 && e[0] == (corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}) && e[1].Name == "NO_PROXY"
			if got != slices.Contains(kubeVirtComponents, name) {
				t.Errorf("%s %s: env %v", v, name, e)
			}
		}
	}
}

func TestComponentFlags(t *testing.T) {
	s := render(t, "v1.8.4", config.Settings{}, func(kv *kvv1.KubeVirt) {
		kv.Spec.CustomizeComponents.Flags = &kvv1.Flags{Handler: map[string]string{"V": "4", "Debug": ""}, API: map[string]string{"x": "1"}}
	})
	if got := handler(t, s).Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"virt-handler", "--debug", "--v", "4"}) {
		t.Errorf("virt-handler command %v", got)
	}
	api := s.Find("Deployment", "kubevirt", vocab.VirtAPI).(*appsv1.Deployment)
	if got := api.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"virt-api", "--x", "1"}) {
		t.Errorf("virt-api command %v", got)
	}
	if len(api.Spec.Template.Spec.Containers[0].Args) == 0 {
		t.Error("the default args must stay")
	}
}

func TestMigrationNetworkAndMaxDevices(t *testing.T) {
	for _, v := range release.Versions() {
		s := render(t, v, config.Settings{}, func(kv *kvv1.KubeVirt) {
			kv.Spec.Configuration.MigrationConfiguration = &kvv1.MigrationConfiguration{Network: ptr.To("mignet")}
			kv.Spec.Configuration.VirtualMachineInstancesPerNode = ptr.To(42)
		})
		ds := handler(t, s)
		if got := ds.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]; got != "mignet@migration0" {
			t.Errorf("%s: networks annotation %q", v, got)
		}
		cmd := ds.Spec.Template.Spec.Containers[0].Command
		if len(cmd) < 2 || !slices.Equal(cmd[len(cmd)-2:], []string{"--max-devices", "42"}) {
			t.Errorf("%s: virt-handler command %v", v, cmd)
		}
	}
	plain := handler(t, render(t, "v1.5.3", config.Settings{}, nil))
	if _, ok := plain.Spec.Template.Annotations["k8s.v1.cni.cncf.io/networks"]; ok || slices.Contains(plain.Spec.Template.Spec.Containers[0].Command, "--max-devices") {
		t.Error("without the settings: annotation or --max-devices present")
	}
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	for _, bad := range []func(){
		func() {
			kv.Spec.Configuration.MigrationConfiguration = &kvv1.MigrationConfiguration{Network: ptr.To("Bad Name")}
		},
		func() {
			kv.Spec.Configuration.MigrationConfiguration = nil
			kv.Spec.Configuration.VirtualMachineInstancesPerNode = ptr.To(0)
		},
	} {
		bad()
		if _, err := config.FromKubeVirt(kv, config.Settings{}); err == nil {
			t.Errorf("config %+v accepted", kv.Spec.Configuration)
		}
	}
}

func TestPersistentReservationVariant(t *testing.T) {
	for _, v := range release.Versions() {
		with := handler(t, render(t, v, config.Settings{}, withFeatureGates("PersistentReservation")))
		without := handler(t, render(t, v, config.Settings{}, nil))
		names := containerNames(with.Spec.Template.Spec.Containers)
		if !slices.Contains(names, "pr-helper") || slices.Contains(containerNames(without.Spec.Template.Spec.Containers), "pr-helper") {
			t.Errorf("%s: pr-helper with the gate: %v, without: %v", v, names, containerNames(without.Spec.Template.Spec.Containers))
		}
		for _, c := range with.Spec.Template.Spec.Containers {
			if c.Name == "pr-helper" && (c.Image != "quay.io/kubevirt/pr-helper:"+v || c.ImagePullPolicy != corev1.PullIfNotPresent) {
				t.Errorf("%s: pr-helper image %q policy %q", v, c.Image, c.ImagePullPolicy)
			}
		}
		vols := 0
		for _, vol := range with.Spec.Template.Spec.Volumes {
			if slices.Contains([]string{"pr-helper-socket-vol", "dev-dir", "etc-multipath"}, vol.Name) {
				vols++
			}
		}
		if vols != 3 {
			t.Errorf("%s: %d pr-helper volumes, want 3", v, vols)
		}
	}
}

func TestFeatureGateMaturity(t *testing.T) {
	names := func(s *Strategy, kind string) []string {
		var out []string
		for _, o := range s.OfKind(kind) {
			out = append(out, o.GetName())
		}
		return out
	}
	// v1.6.6: VMExport is Beta but Beta gates are not on by default yet.
	if d := names(render(t, "v1.6.6", config.Settings{}, nil), "Deployment"); slices.Contains(d, "virt-exportproxy") || slices.Contains(d, "virt-synchronization-controller") {
		t.Errorf("v1.6.6 without gates: %v", d)
	}
	if d := names(render(t, "v1.6.6", config.Settings{}, withFeatureGates("VMExport", "DecentralizedLiveMigration")), "Deployment"); !slices.Contains(d, "virt-exportproxy") || !slices.Contains(d, "virt-synchronization-controller") {
		t.Errorf("v1.6.6 with the gates: %v", d)
	}
	// v1.9.0: VMExport is GA (on, even when disabled), Template Beta (on
	// unless disabled).
	plain := render(t, "v1.9.0", config.Settings{}, nil)
	if d := names(plain, "Deployment"); !slices.Contains(d, "virt-exportproxy") || !slices.Contains(d, "virt-template-controller") {
		t.Errorf("v1.9.0 without gates: %v", d)
	}
	off := render(t, "v1.9.0", config.Settings{}, func(kv *kvv1.KubeVirt) {
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{DisabledFeatureGates: []string{"Template", "VMExport"}}
	})
	if d := names(off, "Deployment"); !slices.Contains(d, "virt-exportproxy") || slices.Contains(d, "virt-template-controller") {
		t.Errorf("v1.9.0 with Template and VMExport disabled: %v", d)
	}
	for _, o := range off.Objects {
		if _, ok := o.GetAnnotations()["template.kubevirt.io/virt-template-version"]; ok {
			t.Errorf("v1.9.0 with Template disabled renders %s %s", Kind(o), o.GetName())
		}
	}
}

func TestProductLabelsAndImages(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	s := render(t, "v1.9.0", config.Settings{ImagePrefix: "kv-", ImageDigests: map[string]string{"virt-api": digest}}, func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageRegistry = "registry.example.org/mirror"
		kv.Spec.ProductName = "suite"
		kv.Spec.ProductVersion = "2.0"
		kv.Spec.ProductComponent = "virt"
	})
	for _, o := range s.Objects {
		l := o.GetLabels()
		if l[vocab.AppPartOfLabel] != "suite" || l[vocab.AppVersionLabel] != "2.0" || l[vocab.AppComponentLabel] != "virt" || l[vocab.ManagedByLabel] != vocab.ManagedByValue {
			t.Errorf("%s %s: labels %v", Kind(o), o.GetName(), l)
		}
	}
	for name, pt := range workloads(s) {
		if pt.Labels[vocab.AppVersionLabel] != "2.0" || pt.Annotations[vocab.InstallStrategyIdentifierAnnotation] != s.ID {
			t.Errorf("%s: pod template metadata %v %v", name, pt.Labels, pt.Annotations)
		}
		for _, c := range pt.Spec.Containers {
			switch {
			case name == vocab.VirtAPI && c.Name == vocab.VirtAPI:
				if c.Image != "registry.example.org/mirror/kv-virt-api@"+digest {
					t.Errorf("virt-api image %q", c.Image)
				}
			case strings.HasPrefix(name, "virt-template"):
				if !strings.HasPrefix(c.Image, "registry.example.org/mirror/kv-virt-template-") || !strings.HasSuffix(c.Image, ":v0.2.2") {
					t.Errorf("%s image %q: want its own version v0.2.2", name, c.Image)
				}
			default:
				if !strings.HasPrefix(c.Image, "registry.example.org/mirror/kv-") || !strings.HasSuffix(c.Image, ":v1.9.0") {
					t.Errorf("%s image %q", name, c.Image)
				}
			}
		}
	}
	// Without a product version the version label stays where upstream has
	// it: on the workloads only.
	for _, o := range render(t, "v1.5.3", config.Settings{}, nil).Objects {
		_, has := o.GetLabels()[vocab.AppVersionLabel]
		if want := podTemplate(o) != nil; has != want && !strings.HasPrefix(Kind(o), "VirtualMachineCluster") {
			t.Errorf("%s %s: version label %v, want %v", Kind(o), o.GetName(), has, want)
		}
	}
}

// TestNothingOfTheReferenceLeaks renders every release for a namespace and
// registry other than the reference dumps' and checks that no token, no
// namespace "kubevirt" in a namespace position and no quay.io/kubevirt is
// left anywhere: the templates' tokens cover every config value.
func TestNothingOfTheReferenceLeaks(t *testing.T) {
	for _, v := range release.Versions() {
		kv := func(kv *kvv1.KubeVirt) {
			kv.Namespace = "virt-ns"
			kv.Spec.ImageRegistry = "registry.example.org/mirror"
			kv.Spec.ImagePullPolicy = corev1.PullAlways
			withFeatureGates("VMExport", "PersistentReservation", "DecentralizedLiveMigration", "ContainerPathVolumes")(kv)
		}
		s := render(t, v, config.Settings{}, kv)
		for _, o := range s.Objects {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var m any
			_ = json.Unmarshal(b, &m)
			walkStrings(m, "", func(path, key, val string) {
				switch {
				case strings.Contains(val, "[["):
					t.Errorf("%s %s %s: token left: %q", v, KeyOf(o), path, val)
				case strings.Contains(val, "quay.io/kubevirt"):
					t.Errorf("%s %s %s: reference registry left: %q", v, KeyOf(o), path, val)
				case key == "namespace" && val == "kubevirt":
					t.Errorf("%s %s %s: reference namespace left", v, KeyOf(o), path)
				case strings.Contains(val, ":kubevirt:") || strings.Contains(val, ".kubevirt.svc"):
					t.Errorf("%s %s %s: reference namespace left in %q", v, KeyOf(o), path, val)
				case key == "imagePullPolicy" && val != "Always" && !strings.Contains(path, "image-holder"):
					t.Errorf("%s %s %s: pull policy %q", v, KeyOf(o), path, val)
				}
			})
			if o.GetNamespace() != "" && o.GetNamespace() != "virt-ns" && Kind(o) != "ServiceMonitor" && Kind(o) != "RoleBinding" {
				t.Errorf("%s %s: namespace %q", v, KeyOf(o), o.GetNamespace())
			}
		}
	}
}

func walkStrings(x any, path string, f func(path, key, val string)) {
	switch t := x.(type) {
	case map[string]any:
		for k, v := range t {
			if s, ok := v.(string); ok {
				f(path+"."+k, k, s)
				continue
			}
			walkStrings(v, path+"."+k, f)
		}
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok {
				f(path+"[]", "", s)
				continue
			}
			walkStrings(v, path+"[]", f)
		}
	}
}

var _ client.Object = &appsv1.Deployment{}
