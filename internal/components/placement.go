package components

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
)

// PlaceInfraPod places a pod the way infra components are placed: by the
// user's infra placement when there is one, else by upstream's default
// (required on a control-plane or master node, preferring one that is not a
// worker, tolerating their NoSchedule taints). The node selector always
// gains kubernetes.io/os: linux. The dump-install-strategy Job uses it.
func PlaceInfraPod(pod *corev1.PodSpec, infra config.Placement) {
	placePod(pod, infra, controlPlanePlacement())
}
