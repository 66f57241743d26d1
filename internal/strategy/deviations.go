package strategy

// virtop's deliberate deviations from what upstream's operator renders.
// Each corresponds to one row of docs/upstream-differences.md (the fidelity
// test, fidelity_test.go, checks the table against the render); add a row
// with every new one.

import (
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// handlerPodGracePeriod is virt-handler's pod grace period: the
// --graceful-shutdown-seconds its template passes (315) plus 15 s.
const handlerPodGracePeriod = 330

// deviations run after the config transforms.
func deviations(rel *release.Release) []transform {
	return []transform{
		{"virt-handler grace period", handlerGracePeriod},
		{"one declaration per container port", singleContainerPort},
		{"certificate placeholders", certificatePlaceholders(rel)},
	}
}

// handlerGracePeriod gives virt-handler the 330 s grace period upstream's
// code intends: upstream sets it on a copy of the pod template, so its pods
// get the default 30 s and are killed long before the 315 s of graceful
// shutdown virt-handler is told it has.
func handlerGracePeriod(_ *config.DeploymentConfig, objs []client.Object) error {
	for _, o := range objs {
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == vocab.VirtHandler {
			ds.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(handlerPodGracePeriod))
		}
	}
	return nil
}

// singleContainerPort keeps one declaration of a container port that
// upstream declares twice under two names (virt-api's "virt-api" and
// "metrics", virt-exportproxy's "exportproxy" and "metrics"): server-side
// apply refuses two ports with the same number and protocol, the list's
// merge key. The "metrics" one stays, the name the metrics Service targets;
// the component Services target the number.
func singleContainerPort(_ *config.DeploymentConfig, objs []client.Object) error {
	for _, o := range objs {
		pt := podTemplate(o)
		if pt == nil {
			continue
		}
		for ci := range pt.Spec.Containers {
			c := &pt.Spec.Containers[ci]
			var kept []corev1.ContainerPort
			for _, p := range c.Ports {
				dup := -1
				for i, k := range kept {
					if k.ContainerPort == p.ContainerPort && cmpProto(k.Protocol) == cmpProto(p.Protocol) {
						dup = i
					}
				}
				switch {
				case dup < 0:
					kept = append(kept, p)
				case p.Name == "metrics":
					kept[dup] = p
				}
			}
			c.Ports = kept
		}
	}
	return nil
}

func cmpProto(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// certificatePlaceholders: certificate Secrets are rendered with empty
// tls.crt and tls.key (a kubernetes.io/tls Secret must have both; the
// certificate code fills them at apply time) and carry their spec.
func certificatePlaceholders(rel *release.Release) func(*config.DeploymentConfig, []client.Object) error {
	return func(_ *config.DeploymentConfig, objs []client.Object) error {
		for _, o := range objs {
			s, ok := o.(*corev1.Secret)
			if !ok {
				continue
			}
			spec, ok := rel.Certificate(s.Name)
			if !ok {
				continue
			}
			b, err := json.Marshal(spec)
			if err != nil {
				return err
			}
			ann := s.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[vocab.CertificateAnnotation] = string(b)
			s.SetAnnotations(ann)
			s.Type = corev1.SecretTypeTLS
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
				if _, ok := s.Data[k]; !ok {
					s.Data[k] = []byte{}
				}
			}
		}
		return nil
	}
}
