package stage

import (
	"slices"
	"testing"
)

// The components of an update roll out virt-handler first and virt-api
// last (upstream's order); of an install, all at once, virt-api last.
func TestComponents(t *testing.T) {
	for _, c := range []struct {
		o    Order
		want []string
	}{
		{Update, []string{"virt-handler", "virt-controller", "virt-exportproxy", "virt-api"}},
		{Install, []string{"virt-controller", "virt-handler", "virt-exportproxy", "virt-api"}},
	} {
		if got := c.o.Components(); !slices.Equal(got, c.want) {
			t.Errorf("%s: Components() = %v, want %v", c.o.Name, got, c.want)
		}
	}
}
