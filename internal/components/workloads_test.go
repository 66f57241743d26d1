package components

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

func workloadsTestConfig(mutate func(*config.DeploymentConfig)) *config.DeploymentConfig {
	c := &config.DeploymentConfig{Namespace: "kubevirt", Version: "v1.5.3", FeatureGates: []string{"VMExport"}}
	if mutate != nil {
		mutate(c)
	}
	config.Normalize(c)
	return c
}

func renderWorkloadsFor(t *testing.T, c *config.DeploymentConfig) map[string]client.Object {
	t.Helper()
	release, _ := catalog.Lookup("v1.5.3")
	objs, err := Renderers["workloads"](c, release)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	out := map[string]client.Object{}
	for _, o := range objs {
		out[o.GetObjectKind().GroupVersionKind().Kind+"/"+o.GetName()] = o
	}
	return out
}

// podTemplateOf returns the pod template of a rendered Deployment or
// DaemonSet.
func podTemplateOf(t *testing.T, o client.Object) *corev1.PodTemplateSpec {
	t.Helper()
	switch w := o.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	}
	t.Fatalf("%T is not a workload", o)
	return nil
}

type probeFact struct {
	path                             string
	delay, period, timeout, failures int32
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, want *probeFact) {
	t.Helper()
	if want == nil {
		if p != nil {
			t.Errorf("%s: unexpected probe %+v", what, p)
		}
		return
	}
	if p == nil || p.HTTPGet == nil {
		t.Fatalf("%s: missing HTTP probe", what)
	}
	if p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Port.IntValue() != 8443 || p.HTTPGet.Path != want.path {
		t.Errorf("%s: GET %s :%s%s, want HTTPS :8443%s", what, p.HTTPGet.Scheme, p.HTTPGet.Port.String(), p.HTTPGet.Path, want.path)
	}
	got := probeFact{want.path, p.InitialDelaySeconds, p.PeriodSeconds, p.TimeoutSeconds, p.FailureThreshold}
	if got != *want {
		t.Errorf("%s: timing %+v, want %+v", what, got, *want)
	}
}

// TestWorkloadFacts checks each component against upstream v1.5.3
// (upstream-facts.md §3.4, components/deployments.go, daemonsets.go).
func TestWorkloadFacts(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(nil))
	if len(objs) != 4 {
		t.Fatalf("rendered %d workloads, want 4: %v", len(objs), reflect.ValueOf(objs).MapKeys())
	}
	tests := []struct {
		key        string
		stage      stage.Stage
		replicas   *int32 // nil for the DaemonSet
		sa         string
		scc        string
		container  string
		image      string
		command    []string
		args       []string
		ports      []string // name:port
		readiness  *probeFact
		liveness   *probeFact
		cpu, mem   string
		certs      map[string]string // secret -> mount path
		nonRoot    bool
		dropAll    bool
		privileged bool
		anti       string // kubevirt.io value of the preferred anti-affinity, "" none
	}{
		{
			key: "Deployment/virt-api", stage: stage.VirtAPI, replicas: ptr.To(int32(2)),
			sa: "kubevirt-apiserver", scc: "restricted-v2", container: "virt-api",
			image:     "quay.io/kubevirt/virt-api:v1.5.3",
			command:   []string{"virt-api"},
			args:      []string{"--port", "8443", "--console-server-port", "8186", "--subresources-only", "-v", "2"},
			ports:     []string{"metrics:8443"},
			readiness: &probeFact{path: "/apis/subresources.kubevirt.io/v1/healthz", delay: 15, period: 10},
			cpu:       "5m", mem: "500Mi",
			certs: map[string]string{
				"kubevirt-virt-api-certs":     "/etc/virt-api/certificates",
				"kubevirt-virt-handler-certs": "/etc/virt-handler/clientcertificates",
			},
			nonRoot: true, dropAll: true, anti: "virt-api",
		},
		{
			key: "Deployment/virt-controller", stage: stage.VirtController, replicas: ptr.To(int32(2)),
			sa: "kubevirt-controller", scc: "restricted-v2", container: "virt-controller",
			image:   "quay.io/kubevirt/virt-controller:v1.5.3",
			command: []string{"virt-controller"},
			args: []string{
				"--launcher-image", "quay.io/kubevirt/virt-launcher:v1.5.3",
				"--exporter-image", "quay.io/kubevirt/virt-exportserver:v1.5.3",
				"--port", "8443", "-v", "2",
			},
			ports:     []string{"metrics:8443"},
			liveness:  &probeFact{path: "/healthz", delay: 15, timeout: 10, failures: 8},
			readiness: &probeFact{path: "/leader", delay: 15, timeout: 10},
			cpu:       "10m", mem: "275Mi",
			certs: map[string]string{
				"kubevirt-controller-certs": "/etc/virt-controller/certificates",
				"kubevirt-export-ca":        "/etc/virt-controller/exportca",
			},
			nonRoot: true, dropAll: true, anti: "virt-controller",
		},
		{
			key: "DaemonSet/virt-handler", stage: stage.VirtHandler,
			sa: "kubevirt-handler", scc: "kubevirt-handler", container: "virt-handler",
			image:   "quay.io/kubevirt/virt-handler:v1.5.3",
			command: []string{"virt-handler"},
			args: []string{
				"--port", "8443", "--hostname-override", "$(NODE_NAME)", "--pod-ip-address", "$(MY_POD_IP)",
				"--max-metric-requests", "3", "--console-server-port", "8186", "--graceful-shutdown-seconds", "315", "-v", "2",
			},
			ports:     []string{"metrics:8443"},
			readiness: &probeFact{path: "/healthz", delay: 15, period: 20, timeout: 10},
			liveness:  &probeFact{path: "/healthz", delay: 15, period: 45, timeout: 10, failures: 3},
			cpu:       "10m", mem: "357Mi",
			certs: map[string]string{
				"kubevirt-virt-handler-certs":        "/etc/virt-handler/clientcertificates",
				"kubevirt-virt-handler-server-certs": "/etc/virt-handler/servercertificates",
			},
			privileged: true,
		},
		{
			key: "Deployment/virt-exportproxy", stage: stage.VirtExportProxy, replicas: ptr.To(int32(2)),
			sa: "kubevirt-exportproxy", scc: "restricted-v2", container: "exportproxy",
			image:     "quay.io/kubevirt/virt-exportproxy:v1.5.3",
			command:   []string{"virt-exportproxy", "--port", "8443", "-v", "2"},
			ports:     []string{"metrics:8443"},
			readiness: &probeFact{path: "/healthz", delay: 15, period: 10},
			cpu:       "5m", mem: "150Mi",
			certs:   map[string]string{"kubevirt-exportproxy-certs": "/etc/virt-exportproxy/certificates"},
			nonRoot: true, anti: "virt-api", // upstream's own choice of label value
		},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			o, ok := objs[tt.key]
			if !ok {
				t.Fatalf("%s not rendered", tt.key)
			}
			name := o.GetName()
			if o.GetNamespace() != "kubevirt" {
				t.Errorf("namespace %q", o.GetNamespace())
			}
			if o.GetObjectKind().GroupVersionKind().GroupVersion().String() != "apps/v1" {
				t.Errorf("apiVersion %v", o.GetObjectKind().GroupVersionKind())
			}
			if s, err := stage.Of(o); err != nil || s != tt.stage {
				t.Errorf("stage %q (%v), want %q", s, err, tt.stage)
			}
			if len(stage.GatesOf(o)) != 0 {
				t.Errorf("gates %v, want none", stage.GatesOf(o))
			}
			if o.GetLabels()["kubevirt.io"] != name {
				t.Errorf("labels %v", o.GetLabels())
			}
			switch w := o.(type) {
			case *appsv1.Deployment:
				if tt.replicas == nil || w.Spec.Replicas == nil || *w.Spec.Replicas != *tt.replicas {
					t.Errorf("replicas %v, want %v", w.Spec.Replicas, tt.replicas)
				}
				if !reflect.DeepEqual(w.Spec.Selector.MatchLabels, map[string]string{"kubevirt.io": name}) {
					t.Errorf("selector %v", w.Spec.Selector)
				}
				if w.Labels["app.kubernetes.io/name"] != name {
					t.Errorf("app.kubernetes.io/name label %v", w.Labels)
				}
			case *appsv1.DaemonSet:
				if tt.replicas != nil {
					t.Errorf("a DaemonSet was rendered, want a Deployment")
				}
				if w.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
					t.Errorf("update strategy %q", w.Spec.UpdateStrategy.Type)
				}
				if !reflect.DeepEqual(w.Spec.Selector.MatchLabels, map[string]string{"kubevirt.io": name}) {
					t.Errorf("selector %v", w.Spec.Selector)
				}
			}

			tmpl := podTemplateOf(t, o)
			wantLabels := map[string]string{"kubevirt.io": name, "prometheus.kubevirt.io": "true", "app.kubernetes.io/version": "v1.5.3"}
			if !reflect.DeepEqual(tmpl.Labels, wantLabels) {
				t.Errorf("template labels %v, want %v", tmpl.Labels, wantLabels)
			}
			if got := tmpl.Annotations["openshift.io/required-scc"]; got != tt.scc {
				t.Errorf("required-scc %q, want %q", got, tt.scc)
			}
			pod := tmpl.Spec
			if pod.ServiceAccountName != tt.sa {
				t.Errorf("service account %q, want %q", pod.ServiceAccountName, tt.sa)
			}
			if pod.PriorityClassName != "kubevirt-cluster-critical" {
				t.Errorf("priority class %q", pod.PriorityClassName)
			}
			if len(pod.Tolerations) == 0 || pod.Tolerations[0] != (corev1.Toleration{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}) {
				t.Errorf("first toleration %v, want CriticalAddonsOnly Exists", pod.Tolerations)
			}
			if pod.NodeSelector["kubernetes.io/os"] != "linux" {
				t.Errorf("node selector %v", pod.NodeSelector)
			}
			var anti string
			if pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil {
				terms := pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
				if len(terms) != 1 || terms[0].Weight != 1 || terms[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
					t.Fatalf("anti-affinity %+v", terms)
				}
				e := terms[0].PodAffinityTerm.LabelSelector.MatchExpressions
				if len(e) != 1 || e[0].Key != "kubevirt.io" || e[0].Operator != "In" || len(e[0].Values) != 1 {
					t.Fatalf("anti-affinity selector %+v", e)
				}
				anti = e[0].Values[0]
			}
			if anti != tt.anti {
				t.Errorf("anti-affinity on %q, want %q", anti, tt.anti)
			}
			gotNonRoot := pod.SecurityContext != nil && ptr.Deref(pod.SecurityContext.RunAsNonRoot, false)
			if gotNonRoot != tt.nonRoot {
				t.Errorf("pod runAsNonRoot %v, want %v", gotNonRoot, tt.nonRoot)
			}

			ctr := pod.Containers[0]
			if ctr.Name != tt.container || ctr.Image != tt.image || ctr.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("container %s %s %s, want %s %s IfNotPresent", ctr.Name, ctr.Image, ctr.ImagePullPolicy, tt.container, tt.image)
			}
			if !reflect.DeepEqual(ctr.Command, tt.command) {
				t.Errorf("command %q, want %q", ctr.Command, tt.command)
			}
			if !reflect.DeepEqual(ctr.Args, tt.args) {
				t.Errorf("args %q, want %q", ctr.Args, tt.args)
			}
			var ports []string
			for _, p := range ctr.Ports {
				if p.Protocol != corev1.ProtocolTCP {
					t.Errorf("port %s protocol %q", p.Name, p.Protocol)
				}
				ports = append(ports, p.Name+":"+itoa(p.ContainerPort))
			}
			if !reflect.DeepEqual(ports, tt.ports) {
				t.Errorf("ports %v, want %v", ports, tt.ports)
			}
			checkProbe(t, "readiness", ctr.ReadinessProbe, tt.readiness)
			checkProbe(t, "liveness", ctr.LivenessProbe, tt.liveness)
			if cpu := ctr.Resources.Requests.Cpu().String(); cpu != tt.cpu {
				t.Errorf("cpu request %s, want %s", cpu, tt.cpu)
			}
			if mem := ctr.Resources.Requests.Memory().String(); mem != tt.mem {
				t.Errorf("memory request %s, want %s", mem, tt.mem)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range ctr.VolumeMounts {
				mounts[m.Name] = m
			}
			vols := map[string]corev1.Volume{}
			for _, v := range pod.Volumes {
				vols[v.Name] = v
			}
			for secret, path := range tt.certs {
				v := vols[secret]
				if v.Secret == nil || v.Secret.SecretName != secret || !ptr.Deref(v.Secret.Optional, false) {
					t.Errorf("secret volume %s: %+v", secret, v)
				}
				if m := mounts[secret]; m.MountPath != path || !m.ReadOnly {
					t.Errorf("mount of %s: %+v, want read-only at %s", secret, m, path)
				}
			}
			if v := vols["profile-data"]; v.EmptyDir == nil || mounts["profile-data"].MountPath != "/profile-data" {
				t.Errorf("profile-data volume %+v", v)
			}
			sc := ctr.SecurityContext
			gotDropAll := sc != nil && sc.Capabilities != nil && reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) &&
				!ptr.Deref(sc.AllowPrivilegeEscalation, true) && sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault
			if gotDropAll != tt.dropAll {
				t.Errorf("restricted container security context %v, want %v (%+v)", gotDropAll, tt.dropAll, sc)
			}
			if got := sc != nil && ptr.Deref(sc.Privileged, false); got != tt.privileged {
				t.Errorf("privileged %v, want %v", got, tt.privileged)
			}
		})
	}
}

func itoa(i int32) string {
	b, _ := json.Marshal(i)
	return string(b)
}

func TestWorkloadsControllerSidecarShimEnv(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(nil))
	env := podTemplateOf(t, objs["Deployment/virt-controller"]).Spec.Containers[0].Env
	want := []corev1.EnvVar{{Name: "SIDECAR_SHIM_IMAGE", Value: "quay.io/kubevirt/sidecar-shim:v1.5.3"}}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("env %+v, want %+v", env, want)
	}
}

func TestWorkloadsHandlerPod(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(nil))
	pod := podTemplateOf(t, objs["DaemonSet/virt-handler"]).Spec
	if !pod.HostPID {
		t.Error("hostPID is false")
	}
	if ptr.Deref(pod.TerminationGracePeriodSeconds, 0) != 330 {
		t.Errorf("grace period %v, want 330", pod.TerminationGracePeriodSeconds)
	}
	if pod.SecurityContext != nil {
		t.Errorf("pod security context %+v, want none", pod.SecurityContext)
	}
	if pod.Affinity != nil {
		t.Errorf("affinity %+v, want none without workloads placement", pod.Affinity)
	}
	if want := []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}}; !reflect.DeepEqual(pod.Tolerations, want) {
		t.Errorf("tolerations %+v, want %+v", pod.Tolerations, want)
	}
	if len(pod.Containers) != 1 {
		t.Errorf("%d containers, want 1 without pull secrets or PersistentReservation", len(pod.Containers))
	}

	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1", len(pod.InitContainers))
	}
	ic := pod.InitContainers[0]
	if ic.Name != "virt-launcher" || ic.Image != "quay.io/kubevirt/virt-launcher:v1.5.3" ||
		!reflect.DeepEqual(ic.Command, []string{"/bin/sh", "-c"}) || !reflect.DeepEqual(ic.Args, []string{"node-labeller.sh"}) {
		t.Errorf("init container %+v", ic)
	}
	if ic.SecurityContext == nil || !ptr.Deref(ic.SecurityContext.Privileged, false) {
		t.Errorf("init container not privileged")
	}
	if len(ic.VolumeMounts) != 1 || ic.VolumeMounts[0].Name != "node-labeller" || ic.VolumeMounts[0].MountPath != "/var/lib/kubevirt-node-labeller" {
		t.Errorf("init container mounts %+v", ic.VolumeMounts)
	}

	ctr := pod.Containers[0]
	if ctr.SecurityContext.SELinuxOptions == nil || ctr.SecurityContext.SELinuxOptions.Level != "s0" {
		t.Errorf("SELinux options %+v", ctr.SecurityContext.SELinuxOptions)
	}
	wantEnv := map[string]string{"NODE_NAME": "spec.nodeName", "MY_POD_IP": "status.podIP"}
	if len(ctr.Env) != len(wantEnv) {
		t.Errorf("env %+v", ctr.Env)
	}
	for _, e := range ctr.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != wantEnv[e.Name] {
			t.Errorf("env %s: %+v, want field %q", e.Name, e.ValueFrom, wantEnv[e.Name])
		}
	}

	bidi := corev1.MountPropagationBidirectional
	hostPaths := []struct {
		name, path, mount string
		propagation       *corev1.MountPropagationMode
	}{
		{"libvirt-runtimes", "/var/run/kubevirt-libvirt-runtimes", "/var/run/kubevirt-libvirt-runtimes", nil},
		{"virt-share-dir", "/var/run/kubevirt", "/var/run/kubevirt", &bidi},
		{"virt-private-dir", "/var/run/kubevirt-private", "/var/run/kubevirt-private", nil},
		{"kubelet-pods", "/var/lib/kubelet/pods", "/pods", nil},
		{"kubelet", "/var/lib/kubelet", "/var/lib/kubelet", &bidi},
		{"node-labeller", "/var/lib/kubevirt-node-labeller", "/var/lib/kubevirt-node-labeller", nil},
	}
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m
	}
	for _, h := range hostPaths {
		v := vols[h.name]
		if v.HostPath == nil || v.HostPath.Path != h.path || v.HostPath.Type != nil {
			t.Errorf("hostPath %s: %+v, want %s with no type", h.name, v.HostPath, h.path)
		}
		m := mounts[h.name]
		if m.MountPath != h.mount || !reflect.DeepEqual(m.MountPropagation, h.propagation) {
			t.Errorf("mount %s: %+v, want %s propagation %v", h.name, m, h.mount, h.propagation)
		}
	}
	if v := vols["podinfo"]; v.DownwardAPI == nil || mounts["podinfo"].MountPath != "/etc/podinfo" {
		t.Errorf("podinfo volume %+v", v)
	}
	// two cert secrets, profile-data, six host paths, podinfo
	if len(pod.Volumes) != 10 || len(ctr.VolumeMounts) != 10 {
		t.Errorf("%d volumes and %d mounts, want 10", len(pod.Volumes), len(ctr.VolumeMounts))
	}
}

func TestWorkloadsExportProxyNeedsVMExport(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(func(c *config.DeploymentConfig) { c.FeatureGates = []string{"Snapshot"} }))
	want := []string{"DaemonSet/virt-handler", "Deployment/virt-api", "Deployment/virt-controller"}
	if len(objs) != len(want) {
		t.Fatalf("rendered %v, want %v", reflect.ValueOf(objs).MapKeys(), want)
	}
	for _, k := range want {
		if objs[k] == nil {
			t.Errorf("%s missing", k)
		}
	}
}

func TestWorkloadsDefaultInfraPlacement(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(nil))
	for _, k := range []string{"Deployment/virt-api", "Deployment/virt-controller", "Deployment/virt-exportproxy"} {
		pod := podTemplateOf(t, objs[k]).Spec
		na := pod.Affinity.NodeAffinity
		if na == nil || na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Fatalf("%s: no required node affinity", k)
		}
		var keys []string
		for _, term := range na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range term.MatchExpressions {
				keys = append(keys, e.Key+" "+string(e.Operator))
			}
		}
		if want := []string{"node-role.kubernetes.io/control-plane Exists", "node-role.kubernetes.io/master Exists"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("%s: required terms %v, want %v", k, keys, want)
		}
		pref := na.PreferredDuringSchedulingIgnoredDuringExecution
		if len(pref) != 1 || pref[0].Weight != 100 || pref[0].Preference.MatchExpressions[0].Key != "node-role.kubernetes.io/worker" ||
			pref[0].Preference.MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
			t.Errorf("%s: preferred terms %+v", k, pref)
		}
		wantTol := []corev1.Toleration{
			{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
			{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		}
		if !reflect.DeepEqual(pod.Tolerations, wantTol) {
			t.Errorf("%s: tolerations %+v, want %+v", k, pod.Tolerations, wantTol)
		}
		if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}) {
			t.Errorf("%s: node selector %v", k, pod.NodeSelector)
		}
	}
}

func TestWorkloadsUserPlacement(t *testing.T) {
	infraTol := corev1.Toleration{Key: "infra", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}
	workTol := corev1.Toleration{Key: "work", Operator: corev1.TolerationOpExists}
	infraAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
		}}},
	}}
	objs := renderWorkloadsFor(t, workloadsTestConfig(func(c *config.DeploymentConfig) {
		c.Infra = config.Placement{
			NodeSelector: map[string]string{"role": "infra"},
			Tolerations:  []corev1.Toleration{infraTol},
			Affinity:     infraAffinity,
			Replicas:     ptr.To(int32(3)),
		}
		c.Workloads = config.Placement{
			NodeSelector: map[string]string{"role": "compute", "kubernetes.io/os": "linux"},
			Tolerations:  []corev1.Toleration{workTol},
		}
	}))
	critical := corev1.Toleration{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}
	for _, k := range []string{"Deployment/virt-api", "Deployment/virt-controller", "Deployment/virt-exportproxy"} {
		d := objs[k].(*appsv1.Deployment)
		pod := d.Spec.Template.Spec
		if *d.Spec.Replicas != 3 {
			t.Errorf("%s: replicas %d, want spec.infra.replicas 3", k, *d.Spec.Replicas)
		}
		if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"role": "infra", "kubernetes.io/os": "linux"}) {
			t.Errorf("%s: node selector %v", k, pod.NodeSelector)
		}
		if !reflect.DeepEqual(pod.Tolerations, []corev1.Toleration{critical, infraTol}) {
			t.Errorf("%s: tolerations %+v", k, pod.Tolerations)
		}
		if !reflect.DeepEqual(pod.Affinity.NodeAffinity, infraAffinity.NodeAffinity) {
			t.Errorf("%s: node affinity %+v, want the user's only", k, pod.Affinity.NodeAffinity)
		}
		if pod.Affinity.PodAntiAffinity == nil {
			t.Errorf("%s: user placement dropped the component's anti-affinity", k)
		}
	}
	pod := podTemplateOf(t, objs["DaemonSet/virt-handler"]).Spec
	if !reflect.DeepEqual(pod.NodeSelector, map[string]string{"role": "compute", "kubernetes.io/os": "linux"}) {
		t.Errorf("handler node selector %v", pod.NodeSelector)
	}
	if !reflect.DeepEqual(pod.Tolerations, []corev1.Toleration{critical, workTol}) {
		t.Errorf("handler tolerations %+v", pod.Tolerations)
	}
	if pod.Affinity != nil {
		t.Errorf("handler affinity %+v, want none", pod.Affinity)
	}
}

func TestWorkloadsFlagsReplaceCommand(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(func(c *config.DeploymentConfig) {
		c.Customize.Flags = map[string]config.Flags{
			"api":     {"v": "4", "Subresources-Only": ""},
			"handler": {"max-devices": "200", "console-server-port": "8190", "a": "b"},
		}
	}))
	tests := []struct {
		key           string
		command, args []string
	}{
		{
			"Deployment/virt-api",
			[]string{"virt-api", "--subresources-only", "--v", "4"},
			[]string{"--port", "8443", "--console-server-port", "8186", "--subresources-only", "-v", "2"},
		},
		{
			"DaemonSet/virt-handler",
			[]string{"virt-handler", "--a", "b", "--console-server-port", "8190", "--max-devices", "200"},
			[]string{
				"--port", "8443", "--hostname-override", "$(NODE_NAME)", "--pod-ip-address", "$(MY_POD_IP)",
				"--max-metric-requests", "3", "--console-server-port", "8186", "--graceful-shutdown-seconds", "315", "-v", "2",
			},
		},
		{
			// no flags for the controller: untouched
			"Deployment/virt-controller",
			[]string{"virt-controller"},
			[]string{
				"--launcher-image", "quay.io/kubevirt/virt-launcher:v1.5.3",
				"--exporter-image", "quay.io/kubevirt/virt-exportserver:v1.5.3",
				"--port", "8443", "-v", "2",
			},
		},
	}
	for _, tt := range tests {
		ctr := podTemplateOf(t, objs[tt.key]).Spec.Containers[0]
		if !reflect.DeepEqual(ctr.Command, tt.command) {
			t.Errorf("%s: command %q, want %q", tt.key, ctr.Command, tt.command)
		}
		if !reflect.DeepEqual(ctr.Args, tt.args) {
			t.Errorf("%s: args %q, want the defaults %q", tt.key, ctr.Args, tt.args)
		}
	}
}

func TestWorkloadsPullSecretsAndPolicy(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(func(c *config.DeploymentConfig) {
		c.ImagePullSecrets = []string{"regcred"}
		c.ImagePullPolicy = corev1.PullAlways
		c.Registry = "registry.example:5000/kv"
		c.Version = "v1.5.0"
	}))
	for k, o := range objs {
		pod := podTemplateOf(t, o).Spec
		if !reflect.DeepEqual(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
			t.Errorf("%s: pull secrets %+v", k, pod.ImagePullSecrets)
		}
		if pod.Containers[0].ImagePullPolicy != corev1.PullAlways {
			t.Errorf("%s: pull policy %q", k, pod.Containers[0].ImagePullPolicy)
		}
		if got := podTemplateOf(t, o).Labels["app.kubernetes.io/version"]; got != "v1.5.0" {
			t.Errorf("%s: version label %q", k, got)
		}
	}
	pod := podTemplateOf(t, objs["DaemonSet/virt-handler"]).Spec
	if len(pod.Containers) != 2 {
		t.Fatalf("handler has %d containers, want the launcher image holder too", len(pod.Containers))
	}
	h := pod.Containers[1]
	if h.Name != "virt-launcher-image-holder" || h.Image != "registry.example:5000/kv/virt-launcher:v1.5.0" ||
		h.ImagePullPolicy != corev1.PullIfNotPresent || !reflect.DeepEqual(h.Args, []string{"sleep infinity"}) ||
		h.Resources.Limits.Cpu().String() != "100m" || h.Resources.Limits.Memory().String() != "20Mi" {
		t.Errorf("image holder %+v", h)
	}
}

func TestWorkloadsPersistentReservation(t *testing.T) {
	objs := renderWorkloadsFor(t, workloadsTestConfig(func(c *config.DeploymentConfig) {
		c.FeatureGates = []string{"PersistentReservation"}
	}))
	pod := podTemplateOf(t, objs["DaemonSet/virt-handler"]).Spec
	if len(pod.Containers) != 2 || pod.Containers[1].Name != "pr-helper" {
		t.Fatalf("containers %d, want virt-handler and pr-helper", len(pod.Containers))
	}
	pr := pod.Containers[1]
	if pr.Image != "quay.io/kubevirt/pr-helper:v1.5.3" || !reflect.DeepEqual(pr.Args, []string{"-k", "/var/run/kubevirt/daemons/pr/pr-helper.sock"}) {
		t.Errorf("pr-helper %+v", pr)
	}
	if len(pod.Volumes) != 13 {
		t.Errorf("%d volumes, want 13 with the pr-helper ones", len(pod.Volumes))
	}
}

func TestWorkloadsDeterministic(t *testing.T) {
	c := workloadsTestConfig(func(c *config.DeploymentConfig) {
		c.Customize.Flags = map[string]config.Flags{"api": {"b": "1", "a": "", "c": "2", "d": "", "e": "3"}}
		c.Infra.NodeSelector = map[string]string{"x": "1", "y": "2", "z": "3"}
	})
	first, err := json.Marshal(renderList(t, c))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		again, _ := json.Marshal(renderList(t, c))
		if string(again) != string(first) {
			t.Fatal("two renders of one config differ")
		}
	}
}

func renderList(t *testing.T, c *config.DeploymentConfig) []client.Object {
	t.Helper()
	objs, err := renderWorkloads(c, catalog.Release{Version: c.Version})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
