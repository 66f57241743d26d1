package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
)

// registryMain serves an in-memory OCI registry (with the referrers API)
// on a loopback address and prints "listening on HOST:PORT" once it
// accepts connections. For tests: it keeps nothing and serves until it is
// killed.
func registryMain(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on (port 0: any free port)")
	if err := parse(fs, args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageError(fmt.Sprintf("registry: -addr %q: %v", *addr, err))
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError(fmt.Sprintf("registry: -addr %q is not a loopback address", *addr))
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	quiet := log.New(os.Stderr, "registry: ", 0)
	h := registry.New(registry.WithReferrersSupport(true), registry.Logger(quiet))
	fmt.Printf("listening on %s\n", ln.Addr())
	srv := &http.Server{Handler: h, ErrorLog: quiet}
	err = srv.Serve(ln)
	if err != nil && !strings.Contains(err.Error(), "closed") {
		return err
	}
	return nil
}
