//go:build long

// Package long is virtop's fault suite: the operator killed at crash points
// over an install and an upgrade, the API server and etcd stopped, a leader
// killed mid-rollout, managed objects and the strategy ConfigMap tampered
// with by hand. Every case ends with the control plane Available, every
// managed object present exactly once, nothing left that virtop no longer
// wants, and the operator alive unless the test killed it.
//
// It takes minutes, so it only builds with -tags long: `make test-e2e-long`.
package long

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
