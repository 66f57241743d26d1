// Command image builds, pushes and (for tests) serves virtop's OCI image,
// without a container engine.
//
//	build     an OCI image index (one image per platform: the static virtop
//	          binary, a CA bundle, /etc/passwd with the non-root user, LICENSE
//	          and NOTICE), with an SPDX SBOM attached as an OCI 1.1 referrer,
//	          written as an OCI image layout in a tar file. Reproducible: the
//	          same binaries give the same digest (fixed timestamps, ownership
//	          and order).
//	push      the index and its SBOM from such a tar to a registry.
//	peer      a one-binary image written as a docker-archive tar (for
//	          `ctr images import`), named REGISTRY/REPOSITORY:TAG: a test
//	          peer built from upstream's source (hack/tools/kubevirt.sh) or
//	          the pod sandbox's pause (pause/), for a node that reaches no
//	          registry. Reproducible like build.
//	rootfs    a directory packed as a one-layer image, docker-archive like
//	          peer: the root file systems of KubeVirt's node images
//	          (virt-handler, virt-launcher) that hack/tools/kubevirt-node.sh
//	          assembles from Debian's packages and upstream's binaries.
//	          File capabilities (security.capability) are kept.
//	registry  an in-memory registry on a loopback address (referrers API
//	          on), for tests; it prints its address and serves until killed.
//
// See `make image`, `make image-push REGISTRY=…`, `make node-images` and
// test/packaging.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = buildMain(os.Args[2:])
	case "push":
		err = pushMain(os.Args[2:])
	case "registry":
		err = registryMain(os.Args[2:])
	case "peer":
		err = peerMain(os.Args[2:])
	case "rootfs":
		err = rootfsMain(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		if _, ok := err.(usageError); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: image build|push|peer|rootfs|registry [flags] (image <command> -h lists the flags)")
	os.Exit(2)
}

// usageError is a wrong or missing flag: exit 2.
type usageError string

func (e usageError) Error() string { return string(e) }

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError(err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("%s: unexpected arguments %q", fs.Name(), fs.Args()))
	}
	return nil
}
