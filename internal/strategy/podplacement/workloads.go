package podplacement

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
)

// PlaceWorkloads places virt-handler's pods by the user's workloads
// placement. Upstream has no default for them (virt-handler runs on every
// node that may run VMs), so with none only kubernetes.io/os: linux is
// added to the node selector.
func PlaceWorkloads(pod *corev1.PodSpec, workloads config.Placement) {
	Place(pod, workloads, config.Placement{})
}
