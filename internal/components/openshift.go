package components

// OpenShift objects of KubeVirt v1.5.3: the SecurityContextConstraints
// kubevirt-handler and kubevirt-controller (components/scc.go) and the
// virt-exportproxy Route (components/routes.go). v1.5.0 renders the same.
//
// go.mod has no Go types for OpenShift kinds, so the few fields used are
// typed here, mirroring github.com/openshift/api's JSON names and omitempty
// choices, and the objects go out as unstructured. Upstream applies both
// kinds only on OpenShift; here the API gates decide that at plan time.

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register("openshift", renderOpenShift) }

// OpenShift API versions and strategy values.
const (
	sccAPIVersion   = "security.openshift.io/v1"
	routeAPIVersion = "route.openshift.io/v1"
	sccRunAsAny     = "RunAsAny"
	// sccAllVolumes allows every volume type.
	sccAllVolumes = "*"
	// routeTerminationReencrypt terminates TLS at the router and opens a
	// new TLS connection to the Service; routeInsecureRedirect sends plain
	// HTTP clients to HTTPS.
	routeTerminationReencrypt = "reencrypt"
	routeInsecureRedirect     = "Redirect"
)

// securityContextConstraints is the part of OpenShift's
// security.openshift.io/v1 SecurityContextConstraints that KubeVirt sets.
// Fields without omitempty lack it in OpenShift's type too, so nil lists
// and priority are written as null, as upstream's strategy writes them
// (OpenShift's type marks them nullable; most are not optional).
type securityContextConstraints struct {
	metav1.TypeMeta          `json:",inline"`
	metav1.ObjectMeta        `json:"metadata,omitempty"`
	Priority                 *int32      `json:"priority"`
	AllowPrivilegedContainer bool        `json:"allowPrivilegedContainer"`
	DefaultAddCapabilities   []string    `json:"defaultAddCapabilities"`
	RequiredDropCapabilities []string    `json:"requiredDropCapabilities"`
	AllowedCapabilities      []string    `json:"allowedCapabilities"`
	AllowHostDirVolumePlugin bool        `json:"allowHostDirVolumePlugin"`
	Volumes                  []string    `json:"volumes"`
	AllowHostNetwork         bool        `json:"allowHostNetwork"`
	AllowHostPorts           bool        `json:"allowHostPorts"`
	AllowHostPID             bool        `json:"allowHostPID"`
	AllowHostIPC             bool        `json:"allowHostIPC"`
	SELinuxContext           sccStrategy `json:"seLinuxContext,omitempty"`
	RunAsUser                sccStrategy `json:"runAsUser,omitempty"`
	ReadOnlyRootFilesystem   bool        `json:"readOnlyRootFilesystem"`
	Users                    []string    `json:"users"`
	SeccompProfiles          []string    `json:"seccompProfiles,omitempty"`
}

// sccStrategy is an SCC strategy with only its type (RunAsAny needs no
// options).
type sccStrategy struct {
	Type string `json:"type,omitempty"`
}

// route is the part of OpenShift's route.openshift.io/v1 Route that
// KubeVirt sets. No host: the router assigns one.
type route struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              routeSpec `json:"spec"`
}

type routeSpec struct {
	To  routeTarget     `json:"to"`
	TLS *routeTLSConfig `json:"tls,omitempty"`
}

// routeTarget's weight has no omitempty in OpenShift's type; unset, the
// router uses 100.
type routeTarget struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Weight *int32 `json:"weight"`
}

// routeTLSConfig: destinationCACertificate (the KubeVirt CA bundle, which
// upstream fills in at apply time) is for the certificate code to inject.
type routeTLSConfig struct {
	Termination                   string `json:"termination"`
	DestinationCACertificate      string `json:"destinationCACertificate,omitempty"`
	InsecureEdgeTerminationPolicy string `json:"insecureEdgeTerminationPolicy,omitempty"`
}

// renderOpenShift renders the two SCCs (stage rbac, gated on the SCC API)
// and, with the VMExport feature gate only, the virt-exportproxy Route
// (stage virt-exportproxy, gated on the Route API). Upstream keeps the
// Route in its strategy and deletes it at apply time without the gate;
// virtop leaves it out, as it does virt-exportproxy's Deployment.
func renderOpenShift(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	var objs []client.Object
	for _, scc := range []*securityContextConstraints{newHandlerSCC(c.Namespace), newControllerSCC(c.Namespace)} {
		u, err := toUnstructured(scc)
		if err != nil {
			return nil, err
		}
		stage.Set(u, stage.RBAC, stage.SCCAPI)
		objs = append(objs, u)
	}
	if c.HasFeatureGate(VMExportFeatureGate) {
		u, err := toUnstructured(exportProxyRoute(c.Namespace))
		if err != nil {
			return nil, err
		}
		stage.Set(u, stage.VirtExportProxy, stage.RouteAPI)
		objs = append(objs, u)
	}
	return objs, nil
}

func serviceAccountUser(ns, sa string) string {
	return "system:serviceaccount:" + ns + ":" + sa
}

// newHandlerSCC lets virt-handler run privileged with the host's PID and IPC
// namespaces, host ports, host paths and any volume, user and SELinux
// context.
func newHandlerSCC(ns string) *securityContextConstraints {
	return &securityContextConstraints{
		TypeMeta:                 metav1.TypeMeta{APIVersion: sccAPIVersion, Kind: "SecurityContextConstraints"},
		ObjectMeta:               metav1.ObjectMeta{Name: handlerSCC},
		AllowPrivilegedContainer: true,
		AllowHostPID:             true,
		AllowHostPorts:           true,
		AllowHostIPC:             true,
		RunAsUser:                sccStrategy{Type: sccRunAsAny},
		SELinuxContext:           sccStrategy{Type: sccRunAsAny},
		Volumes:                  []string{sccAllVolumes},
		AllowHostDirVolumePlugin: true,
		Users:                    []string{serviceAccountUser(ns, vocab.HandlerServiceAccount)},
	}
}

// newControllerSCC is named for, and granted to, virt-controller's account:
// the pods it admits are the virt-launcher pods virt-controller creates
// (any user and SELinux context, KubeVirt's seccomp profile, SYS_NICE for
// CPU affinity and NET_BIND_SERVICE for DHCP/slirp, host paths), never
// privileged.
func newControllerSCC(ns string) *securityContextConstraints {
	return &securityContextConstraints{
		TypeMeta:                 metav1.TypeMeta{APIVersion: sccAPIVersion, Kind: "SecurityContextConstraints"},
		ObjectMeta:               metav1.ObjectMeta{Name: controllerSCCName},
		AllowPrivilegedContainer: false,
		RunAsUser:                sccStrategy{Type: sccRunAsAny},
		SELinuxContext:           sccStrategy{Type: sccRunAsAny},
		SeccompProfiles:          []string{"runtime/default", "unconfined", "localhost/kubevirt/kubevirt.json"},
		AllowedCapabilities:      []string{"SYS_NICE", "NET_BIND_SERVICE"},
		AllowHostDirVolumePlugin: true,
		Users:                    []string{serviceAccountUser(ns, vocab.ControllerServiceAccount)},
	}
}

// exportProxyRoute exposes the virt-exportproxy Service, re-encrypting TLS
// and redirecting plain HTTP. Upstream puts it in the operator's
// namespace, which is the install namespace.
func exportProxyRoute(ns string) *route {
	return &route{
		TypeMeta:   metav1.TypeMeta{APIVersion: routeAPIVersion, Kind: "Route"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.VirtExportProxy},
		Spec: routeSpec{
			To: routeTarget{Kind: "Service", Name: vocab.VirtExportProxy},
			TLS: &routeTLSConfig{
				Termination:                   routeTerminationReencrypt,
				InsecureEdgeTerminationPolicy: routeInsecureRedirect,
			},
		},
	}
}

// controllerSCCName is the SCC granted to virt-controller's account
// (virt-handler's, handlerSCC, is named in workloads.go).
const controllerSCCName = "kubevirt-controller"

// toUnstructured converts a typed object to the unstructured form the
// strategy carries for kinds the scheme does not know, without the
// server-written creationTimestamp.
func toUnstructured(obj interface{}) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	return &unstructured.Unstructured{Object: m}, nil
}
