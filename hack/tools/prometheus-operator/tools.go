//go:build tools

// Package tools pins prometheus-operator, which hack/tools/build.sh builds
// (its cmd/operator) for the end-to-end test that reads the Prometheus
// configuration it generates.
package tools

import _ "github.com/prometheus-operator/prometheus-operator/cmd/operator"
