//go:build !faults

package faultpoint

import "testing"

// In a normal build no point kills, whatever the environment says.
func TestHitIsANoOpWithoutTheTag(t *testing.T) {
	t.Setenv(EnvVar, "p")
	if Enabled {
		t.Fatal("Enabled in a build without -tags faults")
	}
	for range 3 {
		Hit("p")
	}
}
