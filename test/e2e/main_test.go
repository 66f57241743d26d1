// Package e2e holds virtop's end-to-end tests. They run on a local kwok
// cluster created once for the suite (see framework.Main) and need the tool
// binaries (`make tools`). Run them with `make test-e2e`, or:
//
//	go test ./test/e2e/... -p 1 -timeout 30m
//
// Under -short they skip.
package e2e

import (
	"os"
	"testing"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
