//go:build tools

// Package tools pins etcd, which hack/tools/build.sh builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
