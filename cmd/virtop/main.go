// Command virtop installs and runs the KubeVirt control plane and its
// monitoring. Every subcommand lives in internal/cli; main only runs it.
package main

import (
	"os"

	"github.com/virtop-dev/virtop/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
