package components

// The control-plane workloads: the virt-api, virt-controller and
// virt-exportproxy Deployments and the virt-handler DaemonSet, as KubeVirt
// v1.5.3 renders them (components/deployments.go and daemonsets.go), with the
// placement upstream injects at apply time (apply/reconcile.go
// InjectPlacementMetadata) and the customizeComponents flags (apply/patches.go)
// folded in, since both come from the config and so belong to the strategy.
//
// The four differ only in data: workloadSpecs describes each, and one builder
// turns a spec into a pod template. Only virt-handler needs more than data (an
// init container, host paths, optional extra containers), which its spec's
// extend hook adds.

import (
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register("workloads", renderWorkloads) }

// PersistentReservationFeatureGate adds the pr-helper container to
// virt-handler.
const PersistentReservationFeatureGate = "PersistentReservation"

// Values shared by the workloads.
const (
	// workloadPort is where every component serves its API, health and
	// metrics.
	workloadPort = 8443
	// workloadVerbosity is upstream's fixed -v value ("not configurable
	// yet" in v1.5.3).
	workloadVerbosity = "2"
	// defaultInfraReplicas is the replica count of the Deployments in the
	// strategy; the plan sets virt-api's from the node count unless the
	// user set spec.infra.replicas.
	defaultInfraReplicas = 2
	// handlerPodGracePeriod gives virt-handler 15 s beyond its own graceful
	// shutdown (--graceful-shutdown-seconds) before SIGKILL.
	handlerPodGracePeriod = 330
	handlerShutdownGrace  = handlerPodGracePeriod - 15

	nodeLabellerPath    = "/var/lib/kubevirt-node-labeller"
	prHelperSocketDir   = "/var/run/kubevirt/daemons/pr"
	sccRestrictedV2     = "restricted-v2"
	handlerSCC          = "kubevirt-handler"
	controlPlaneRoleKey = "node-role.kubernetes.io/control-plane"
	masterRoleKey       = "node-role.kubernetes.io/master"
	workerRoleKey       = "node-role.kubernetes.io/worker"
)

// workloadSpec is what distinguishes one component's workload.
type workloadSpec struct {
	name  string // object name and kubevirt.io label value
	stage stage.Stage
	// daemonSet renders a DaemonSet placed by spec.workloads; otherwise a
	// Deployment placed by spec.infra.
	daemonSet      bool
	serviceAccount string
	scc            string // openshift.io/required-scc
	// antiAffinity is the kubevirt.io value whose pods this one avoids per
	// host (preferred); "" for none.
	antiAffinity string
	// flagsKey names the customizeComponents.flags entry for this
	// component; "" when upstream offers none.
	flagsKey    string
	podSecurity *corev1.PodSecurityContext
	// certs are secret volumes mounted read-only into the main container,
	// in order, before the profile-data volume.
	certs []secretMount
	// main is the main container without image, pull policy, volume mounts
	// and security context defaults: the builder adds those.
	main   corev1.Container
	extend func(c *config.DeploymentConfig, pod *corev1.PodSpec)
}

type secretMount struct{ secret, path string }

// renderWorkloads renders the component Deployments and the DaemonSet.
func renderWorkloads(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	var out []client.Object
	for _, w := range workloadSpecs(c) {
		tmpl := workloadPodTemplate(c, w)
		meta := metav1.ObjectMeta{Name: w.name, Namespace: c.Namespace, Labels: map[string]string{vocab.AppLabel: w.name}}
		selector := &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppLabel: w.name}}
		var obj client.Object
		if w.daemonSet {
			obj = &appsv1.DaemonSet{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
				ObjectMeta: meta,
				Spec: appsv1.DaemonSetSpec{
					Selector:       selector,
					Template:       tmpl,
					UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
				},
			}
		} else {
			meta.Labels[vocab.AppNameLabel] = w.name
			replicas := int32(defaultInfraReplicas)
			if c.Infra.Replicas != nil {
				replicas = *c.Infra.Replicas
			}
			obj = &appsv1.Deployment{
				TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: meta,
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To(replicas),
					Selector: selector,
					Template: tmpl,
				},
			}
		}
		stage.Set(obj, w.stage)
		out = append(out, obj)
	}
	return out, nil
}

// workloadSpecs lists the components of this config: virt-exportproxy only
// with the VMExport feature gate (upstream renders it always and deletes it
// at apply time when the gate is off).
func workloadSpecs(c *config.DeploymentConfig) []workloadSpec {
	port := strconv.Itoa(workloadPort)
	restrictedPod := &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	restrictedContainer := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	specs := []workloadSpec{
		{
			name: vocab.VirtAPI, stage: stage.VirtAPI, serviceAccount: vocab.APIServiceAccount,
			scc: sccRestrictedV2, antiAffinity: vocab.VirtAPI, flagsKey: "api",
			podSecurity: restrictedPod,
			certs: []secretMount{
				{"kubevirt-virt-api-certs", "/etc/virt-api/certificates"},
				{"kubevirt-virt-handler-certs", "/etc/virt-handler/clientcertificates"},
			},
			main: corev1.Container{
				Name:    vocab.VirtAPI,
				Image:   c.Image(vocab.VirtAPI),
				Command: []string{vocab.VirtAPI},
				Args:    []string{"--port", port, "--console-server-port", "8186", "--subresources-only", "-v", workloadVerbosity},
				Ports:   metricsPort(),
				ReadinessProbe: workloadProbe("/apis/subresources.kubevirt.io/v1/healthz", probeTiming{
					delay: 15, period: 10,
				}),
				Resources:       workloadRequests("5m", "500Mi"),
				SecurityContext: restrictedContainer,
			},
		},
		{
			name: vocab.VirtController, stage: stage.VirtController, serviceAccount: vocab.ControllerServiceAccount,
			scc: sccRestrictedV2, antiAffinity: vocab.VirtController, flagsKey: "controller",
			podSecurity: restrictedPod,
			certs: []secretMount{
				{"kubevirt-controller-certs", "/etc/virt-controller/certificates"},
				{"kubevirt-export-ca", "/etc/virt-controller/exportca"},
			},
			main: corev1.Container{
				Name:    vocab.VirtController,
				Image:   c.Image(vocab.VirtController),
				Command: []string{vocab.VirtController},
				Args: []string{
					"--launcher-image", c.Image("virt-launcher"),
					"--exporter-image", c.Image("virt-exportserver"),
					"--port", port, "-v", workloadVerbosity,
				},
				Env:             []corev1.EnvVar{{Name: "SIDECAR_SHIM_IMAGE", Value: c.Image("sidecar-shim")}},
				Ports:           metricsPort(),
				LivenessProbe:   workloadProbe("/healthz", probeTiming{delay: 15, timeout: 10, failures: 8}),
				ReadinessProbe:  workloadProbe("/leader", probeTiming{delay: 15, timeout: 10}),
				Resources:       workloadRequests("10m", "275Mi"),
				SecurityContext: restrictedContainer,
			},
		},
		{
			name: vocab.VirtHandler, stage: stage.VirtHandler, daemonSet: true, serviceAccount: vocab.HandlerServiceAccount,
			scc: handlerSCC, flagsKey: "handler",
			certs: []secretMount{
				{"kubevirt-virt-handler-certs", "/etc/virt-handler/clientcertificates"},
				{"kubevirt-virt-handler-server-certs", "/etc/virt-handler/servercertificates"},
			},
			main: corev1.Container{
				Name:    vocab.VirtHandler,
				Image:   c.Image(vocab.VirtHandler),
				Command: []string{vocab.VirtHandler},
				Args: []string{
					"--port", port,
					"--hostname-override", "$(NODE_NAME)",
					"--pod-ip-address", "$(MY_POD_IP)",
					"--max-metric-requests", "3",
					"--console-server-port", "8186",
					"--graceful-shutdown-seconds", strconv.Itoa(handlerShutdownGrace),
					"-v", workloadVerbosity,
				},
				Env: []corev1.EnvVar{
					envFromField("NODE_NAME", "spec.nodeName"),
					envFromField("MY_POD_IP", "status.podIP"),
				},
				Ports:          metricsPort(),
				LivenessProbe:  workloadProbe("/healthz", probeTiming{delay: 15, timeout: 10, period: 45, failures: 3}),
				ReadinessProbe: workloadProbe("/healthz", probeTiming{delay: 15, timeout: 10, period: 20}),
				// 325Mi base plus 32Mi for verifying containerdisk checksums.
				Resources: workloadRequests("10m", "357Mi"),
				SecurityContext: &corev1.SecurityContext{
					Privileged:     ptr.To(true),
					SELinuxOptions: &corev1.SELinuxOptions{Level: "s0"},
				},
			},
			extend: extendHandler,
		},
	}
	if c.HasFeatureGate(VMExportFeatureGate) {
		specs = append(specs, workloadSpec{
			name: vocab.VirtExportProxy, stage: stage.VirtExportProxy, serviceAccount: vocab.ExportProxyServiceAccount,
			scc: sccRestrictedV2,
			// Upstream avoids virt-api pods here, not virt-exportproxy ones;
			// kept as upstream renders it.
			antiAffinity: vocab.VirtAPI,
			// Upstream v1.5.3 sets only runAsNonRoot for virt-exportproxy: no
			// seccomp profile and no container security context.
			podSecurity: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			certs:       []secretMount{{"kubevirt-exportproxy-certs", "/etc/virt-exportproxy/certificates"}},
			main: corev1.Container{
				Name: "exportproxy", // the component name is too long for upstream's taste
				// Upstream puts the flags in the command and sets no args.
				Image:          c.Image(vocab.VirtExportProxy),
				Command:        []string{vocab.VirtExportProxy, "--port", port, "-v", workloadVerbosity},
				Ports:          metricsPort(),
				ReadinessProbe: workloadProbe("/healthz", probeTiming{delay: 15, period: 10}),
				Resources:      workloadRequests("5m", "150Mi"),
			},
		})
	}
	return specs
}

// workloadPodTemplate builds a component's pod template: labels, the SCC
// annotation, service account, priority class, placement, pull secrets,
// security context, the main container and its certificate and profile
// volumes.
func workloadPodTemplate(c *config.DeploymentConfig, w workloadSpec) corev1.PodTemplateSpec {
	labels := map[string]string{vocab.AppLabel: w.name, vocab.PrometheusLabel: vocab.PrometheusLabelValue}
	// Upstream's strategy labels pod templates with the product labels; the
	// product version defaults to the KubeVirt version.
	labels[vocab.AppVersionLabel] = c.Version
	if c.ProductVersion != "" {
		labels[vocab.AppVersionLabel] = c.ProductVersion
	}
	if c.ProductName != "" {
		labels[vocab.AppPartOfLabel] = c.ProductName
	}
	if c.ProductComponent != "" {
		labels[vocab.AppComponentLabel] = c.ProductComponent
	}

	main := *w.main.DeepCopy()
	main.ImagePullPolicy = c.ImagePullPolicy
	if flags := c.Customize.Flags[w.flagsKey]; w.flagsKey != "" && len(flags) > 0 {
		main.Command = customizedCommand(main.Command[0], flags)
	}

	pod := corev1.PodSpec{
		ServiceAccountName: w.serviceAccount,
		PriorityClassName:  vocab.PriorityClassName,
		SecurityContext:    w.podSecurity.DeepCopy(),
		Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		Containers:         []corev1.Container{main},
	}
	if w.antiAffinity != "" {
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 1,
				PodAffinityTerm: corev1.PodAffinityTerm{
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
						Key: vocab.AppLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{w.antiAffinity},
					}}},
					TopologyKey: corev1.LabelHostname,
				},
			}},
		}}
	}
	for _, s := range c.ImagePullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	for _, m := range w.certs {
		addMountedVolume(&pod, corev1.Volume{Name: m.secret, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: m.secret, Optional: ptr.To(true)},
		}}, corev1.VolumeMount{Name: m.secret, MountPath: m.path, ReadOnly: true})
	}
	addMountedVolume(&pod, corev1.Volume{Name: "profile-data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.VolumeMount{Name: "profile-data", MountPath: "/profile-data"})
	if w.extend != nil {
		w.extend(c, &pod)
	}
	if w.daemonSet {
		placePod(&pod, c.Workloads, config.Placement{})
	} else {
		placePod(&pod, c.Infra, controlPlanePlacement())
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Name:        w.name,
			Labels:      labels,
			Annotations: map[string]string{vocab.RequiredSCCAnnotation: w.scc},
		},
		Spec: pod,
	}
}

// extendHandler adds what only virt-handler has: the host PID namespace, a
// longer grace period, the node-labeller init container, its host paths,
// the podinfo volume, and the optional image holder and pr-helper
// containers.
func extendHandler(c *config.DeploymentConfig, pod *corev1.PodSpec) {
	launcher := c.Image("virt-launcher")
	pod.HostPID = true
	pod.TerminationGracePeriodSeconds = ptr.To(int64(handlerPodGracePeriod))
	// Upstream sets no pull policy on the init container.
	pod.InitContainers = []corev1.Container{{
		Name:            "virt-launcher",
		Image:           launcher,
		Command:         []string{"/bin/sh", "-c"},
		Args:            []string{"node-labeller.sh"},
		SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "node-labeller", MountPath: nodeLabellerPath}},
	}}

	bidirectional := ptr.To(corev1.MountPropagationBidirectional)
	for _, h := range []struct {
		name, hostPath, mountPath string
		propagation               *corev1.MountPropagationMode
	}{
		{"libvirt-runtimes", "/var/run/kubevirt-libvirt-runtimes", "/var/run/kubevirt-libvirt-runtimes", nil},
		{"virt-share-dir", "/var/run/kubevirt", "/var/run/kubevirt", bidirectional},
		{"virt-private-dir", "/var/run/kubevirt-private", "/var/run/kubevirt-private", nil},
		// Short mount path: unix socket paths must stay under 108 bytes.
		{"kubelet-pods", "/var/lib/kubelet/pods", "/pods", nil},
		{"kubelet", "/var/lib/kubelet", "/var/lib/kubelet", bidirectional},
		{"node-labeller", nodeLabellerPath, nodeLabellerPath, nil},
	} {
		addMountedVolume(pod, corev1.Volume{Name: h.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: h.hostPath}}},
			corev1.VolumeMount{Name: h.name, MountPath: h.mountPath, MountPropagation: h.propagation})
	}
	// Unused since upstream moved off it, but kept there (kubevirt#10632)
	// so a downgrade to a handler that mounts it does not crash-loop.
	addMountedVolume(pod, corev1.Volume{Name: "podinfo", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{
			Path:     "network-status",
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['k8s.v1.cni.cncf.io/network-status']"},
		}},
	}}}, corev1.VolumeMount{Name: "podinfo", MountPath: "/etc/podinfo"})

	// With pull secrets the launcher image is likely private: a sleeping
	// container keeps it pulled on every node without handing the secrets
	// to virt-launcher pods.
	if len(c.ImagePullSecrets) > 0 {
		pod.Containers = append(pod.Containers, corev1.Container{
			Name:            "virt-launcher-image-holder",
			Image:           launcher,
			ImagePullPolicy: corev1.PullIfNotPresent,
			Command:         []string{"/bin/sh", "-c"},
			Args:            []string{"sleep infinity"},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("20Mi"),
			}},
		})
	}

	if c.HasFeatureGate(PersistentReservationFeatureGate) {
		orCreate := ptr.To(corev1.HostPathDirectoryOrCreate)
		pod.Volumes = append(pod.Volumes,
			corev1.Volume{Name: "pr-helper-socket-vol", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: prHelperSocketDir, Type: orCreate}}},
			corev1.Volume{Name: "dev-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/dev"}}},
			corev1.Volume{Name: "etc-multipath", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc/multipath", Type: orCreate}}},
		)
		pod.Containers = append(pod.Containers, corev1.Container{
			Name:            "pr-helper",
			Image:           c.Image("pr-helper"),
			ImagePullPolicy: c.ImagePullPolicy,
			Command:         []string{"/entrypoint.sh"},
			Args:            []string{"-k", prHelperSocketDir + "/pr-helper.sock"},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "pr-helper-socket-vol", MountPath: prHelperSocketDir, MountPropagation: bidirectional},
				{Name: "dev-dir", MountPath: "/dev", MountPropagation: ptr.To(corev1.MountPropagationHostToContainer)},
				{Name: "etc-multipath", MountPath: "/etc/multipath", MountPropagation: bidirectional},
			},
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(0)), Privileged: ptr.To(true)},
		})
	}
}

// customizedCommand applies customizeComponents.flags as upstream does
// (apply/patches.go flagsToPatches): a strategic merge patch REPLACES the
// main container's command with the binary followed by the flags
// (--<lowercased name> [value]), while the container's default args are left
// in place and still follow. Upstream emits the flags in map order; here
// they are sorted by name so the strategy is deterministic. As upstream, a
// custom flag that the default args also set loses to the later default.
func customizedCommand(binary string, flags config.Flags) []string {
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	sort.Strings(names)
	cmd := []string{binary}
	for _, n := range names {
		cmd = append(cmd, "--"+strings.ToLower(n))
		if v := flags[n]; v != "" {
			cmd = append(cmd, v)
		}
	}
	return cmd
}

// controlPlanePlacement is upstream's default for infra components when the
// user gives no placement (since v1.3.0): required on a control-plane (or
// legacy master) node, preferring one that is not also a worker, tolerating
// their NoSchedule taints.
func controlPlanePlacement() config.Placement {
	exists := func(key string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpExists}}}
	}
	return config.Placement{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{exists(controlPlaneRoleKey), exists(masterRoleKey)},
			},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: workerRoleKey, Operator: corev1.NodeSelectorOpDoesNotExist,
				}}},
			}},
		}},
		Tolerations: []corev1.Toleration{
			{Key: controlPlaneRoleKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			{Key: masterRoleKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
	}
}

// placePod merges a placement into a pod spec the way upstream's
// InjectPlacementMetadata does: with no placement the default applies; the
// node selector gains kubernetes.io/os: linux unless the placement names an
// OS, and keys the pod already has win; affinity terms are added to the
// pod's own; tolerations are appended after the pod's.
func placePod(pod *corev1.PodSpec, p, def config.Placement) {
	if p.IsZero() {
		p = def
	}
	selector := map[string]string{corev1.LabelOSStable: "linux"}
	for k, v := range p.NodeSelector {
		selector[k] = v
	}
	if pod.NodeSelector == nil {
		pod.NodeSelector = map[string]string{}
	}
	for k, v := range selector {
		if _, ok := pod.NodeSelector[k]; !ok {
			pod.NodeSelector[k] = v
		}
	}
	if p.Affinity != nil {
		pod.Affinity = mergeAffinity(pod.Affinity, p.Affinity.DeepCopy())
	}
	for _, t := range p.Tolerations {
		pod.Tolerations = append(pod.Tolerations, *t.DeepCopy())
	}
}

// mergeAffinity adds the terms of extra to those of pod; extra is owned by
// the caller's result.
func mergeAffinity(pod, extra *corev1.Affinity) *corev1.Affinity {
	if pod == nil {
		return extra
	}
	if na := extra.NodeAffinity; na != nil {
		if pod.NodeAffinity == nil {
			pod.NodeAffinity = na
		} else {
			if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
				if pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
					pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = req
				} else {
					own := pod.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
					own.NodeSelectorTerms = append(own.NodeSelectorTerms, req.NodeSelectorTerms...)
				}
			}
			pod.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(
				pod.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, na.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	if pa := extra.PodAffinity; pa != nil {
		if pod.PodAffinity == nil {
			pod.PodAffinity = pa
		} else {
			pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, pa.RequiredDuringSchedulingIgnoredDuringExecution...)
			pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(pod.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	if paa := extra.PodAntiAffinity; paa != nil {
		if pod.PodAntiAffinity == nil {
			pod.PodAntiAffinity = paa
		} else {
			pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(pod.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, paa.RequiredDuringSchedulingIgnoredDuringExecution...)
			pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(pod.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, paa.PreferredDuringSchedulingIgnoredDuringExecution...)
		}
	}
	return pod
}

// addMountedVolume adds a volume to the pod and its mount to the main container.
func addMountedVolume(pod *corev1.PodSpec, v corev1.Volume, m corev1.VolumeMount) {
	pod.Volumes = append(pod.Volumes, v)
	pod.Containers[0].VolumeMounts = append(pod.Containers[0].VolumeMounts, m)
}

// probeTiming holds a probe's numbers; zero leaves the Kubernetes default.
type probeTiming struct{ delay, period, timeout, failures int32 }

// workloadProbe is a GET over HTTPS on the component port.
func workloadProbe(path string, t probeTiming) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Scheme: corev1.URISchemeHTTPS,
			Port:   intstr.FromInt32(workloadPort),
			Path:   path,
		}},
		InitialDelaySeconds: t.delay,
		PeriodSeconds:       t.period,
		TimeoutSeconds:      t.timeout,
		FailureThreshold:    t.failures,
	}
}

// metricsPort is the component port. Upstream serves API and metrics
// on one port and declares it twice for virt-api ("virt-api" and "metrics")
// and virt-exportproxy ("exportproxy" and "metrics"); server-side apply
// refuses two container ports with the same number and protocol (they are
// the list's merge key), so virtop declares it once, as "metrics", the name
// the metrics Service targets. The virt-api and virt-exportproxy Services
// target the port by number, so nothing else changes.
func metricsPort() []corev1.ContainerPort {
	return []corev1.ContainerPort{{Name: "metrics", Protocol: corev1.ProtocolTCP, ContainerPort: workloadPort}}
}

func workloadRequests(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory),
	}}
}

func envFromField(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}
