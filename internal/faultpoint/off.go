//go:build !faults

package faultpoint

// Enabled is true in builds with -tags faults.
const Enabled = false

// Hit does nothing in normal builds.
func Hit(string) {}
