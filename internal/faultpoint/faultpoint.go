// Package faultpoint names the places in the operator where the fault
// suite (test/e2e/long) crashes it on purpose. In normal builds Hit does
// nothing; in builds with -tags faults, Hit kills the process with SIGKILL
// when the environment variable VIRTOP_FAULT_POINT names the point it is
// called with ("name", or "name#n" for its n-th hit in this process).
//
// Release builds never carry the faults tag: the fault suite builds a
// binary of its own with it.
package faultpoint

import (
	"fmt"
	"strconv"
	"strings"
)

// EnvVar names the armed point.
const EnvVar = "VIRTOP_FAULT_POINT"

// Spec is an armed point: its name and which hit kills (1 for the first).
type Spec struct {
	Name string
	N    int
}

// String is the spec as VIRTOP_FAULT_POINT takes it.
func (s Spec) String() string {
	if s.N <= 1 {
		return s.Name
	}
	return fmt.Sprintf("%s#%d", s.Name, s.N)
}

// Parse reads a VIRTOP_FAULT_POINT value: "name" or "name#n" with n >= 1.
// The empty string arms nothing (zero Spec).
func Parse(v string) (Spec, error) {
	if v == "" {
		return Spec{}, nil
	}
	name, count, hasCount := strings.Cut(v, "#")
	if name == "" {
		return Spec{}, fmt.Errorf("%s=%q: empty point name", EnvVar, v)
	}
	s := Spec{Name: name, N: 1}
	if hasCount {
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			return Spec{}, fmt.Errorf("%s=%q: the hit after # must be a positive integer", EnvVar, v)
		}
		s.N = n
	}
	return s, nil
}
