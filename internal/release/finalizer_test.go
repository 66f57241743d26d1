package release

import (
	"testing"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestKubeVirtFinalizer: the finalizer's name at each release, as
// upstream's operator of the release sets it (pkg/virt-operator/util's
// KubeVirtFinalizer).
func TestKubeVirtFinalizer(t *testing.T) {
	for v, want := range map[string]string{
		"v1.5.0": vocab.LegacyKubeVirtFinalizer, "v1.5.3": vocab.LegacyKubeVirtFinalizer,
		"v1.6.6": vocab.LegacyKubeVirtFinalizer, "v1.7.4": vocab.LegacyKubeVirtFinalizer,
		"v1.8.4": vocab.LegacyKubeVirtFinalizer, "v1.9.0": vocab.KubeVirtFinalizer,
		"v1.9.1": vocab.KubeVirtFinalizer, "v1.10.0": vocab.KubeVirtFinalizer,
	} {
		if got := KubeVirtFinalizer(v); got != want {
			t.Errorf("%s: %q, want %q", v, got, want)
		}
	}
}
