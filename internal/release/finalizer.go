package release

import "github.com/virtop-dev/virtop/internal/vocab"

// KubeVirtFinalizer is the name upstream's operator of a release gives the
// KubeVirt resource's finalizer: kubevirt.io/foregroundDeleteKubeVirt from
// v1.9.0 (vocab.KubeVirtFinalizerSince), foregroundDeleteKubeVirt before.
// A version outside the catalog is placed by its number.
func KubeVirtFinalizer(version string) string {
	if Less(version, vocab.KubeVirtFinalizerSince) {
		return vocab.LegacyKubeVirtFinalizer
	}
	return vocab.KubeVirtFinalizer
}
