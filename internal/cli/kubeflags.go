package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
)

// clusterFlags are kubectl's connection flags (client-go's clientcmd
// override flags, the ones kubectl's own come from: --kubeconfig,
// --context, --cluster, --user, -n/--namespace, -s/--server, --token, --as,
// --as-group, --as-uid, --request-timeout, TLS and the rest), on every
// command that talks to a cluster (TestClusterFlags). The namespace is
// KubeVirt's install namespace: -n, else kubevirt (not the context's
// namespace, which is rarely KubeVirt's). (k8s.io/cli-runtime's
// ConfigFlags gives the same flags but links kustomize and its embedded
// OpenAPI documents into the binary the operator runs from:
// docs/benchmarks.md.)
type clusterFlags struct {
	rules     clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	// defaultNamespace is used when -n is not given.
	defaultNamespace string

	loader clientcmd.ClientConfig
}

// addClusterFlags adds the connection flags to cmd, with completion of
// contexts, clusters, users and namespaces from the kubeconfig.
func addClusterFlags(cmd *cobra.Command) *clusterFlags {
	f := &clusterFlags{rules: *clientcmd.NewDefaultClientConfigLoadingRules(), defaultNamespace: config.DefaultNamespace}
	fs := cmd.Flags()
	fs.StringVar(&f.rules.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests.")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&f.overrides, fs, names)
	// Where to look: KubeVirt's install namespace.
	if ns := fs.Lookup("namespace"); ns != nil {
		ns.Usage = "KubeVirt's install namespace (default " + config.DefaultNamespace + ")"
	}
	registerClusterCompletions(cmd, f)
	return f
}

// ToRawKubeConfigLoader is the kubeconfig as the flags select it (made
// once, after the flags are parsed).
func (f *clusterFlags) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	if f.loader == nil {
		f.loader = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&f.rules, &f.overrides)
	}
	return f.loader
}

// ToRESTConfig is the client configuration of the flags and the
// kubeconfig, or the in-cluster account when there is no kubeconfig.
func (f *clusterFlags) ToRESTConfig() (*rest.Config, error) {
	return f.ToRawKubeConfigLoader().ClientConfig()
}

// Namespace is -n, else the default install namespace.
func (f *clusterFlags) Namespace() string {
	if f.overrides.Context.Namespace != "" {
		return f.overrides.Context.Namespace
	}
	return f.defaultNamespace
}

// RESTConfig is the client configuration the flags and the kubeconfig
// (or the in-cluster account) give.
func (f *clusterFlags) RESTConfig() (*rest.Config, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("kubeconfig: %w", err)}
	}
	return cfg, nil
}

// Context is the kubeconfig context in use ("" in cluster).
func (f *clusterFlags) Context() string {
	if f.overrides.CurrentContext != "" {
		return f.overrides.CurrentContext
	}
	raw, err := f.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return ""
	}
	return raw.CurrentContext
}

// Kubeconfig is --kubeconfig as given ("" for the default rules).
func (f *clusterFlags) Kubeconfig() string { return f.rules.ExplicitPath }

// RequestTimeout is --request-timeout as a duration (0: none).
func (f *clusterFlags) RequestTimeout() (time.Duration, error) {
	t := f.overrides.Timeout
	if t == "" || t == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, &ExitError{Code: 2, Err: fmt.Errorf("--request-timeout %q: %w", t, err)}
	}
	return d, nil
}

// ExplicitContext is --context as given ("" when the kubeconfig's current
// context is used), so a report can say the context was only the default.
func (f *clusterFlags) ExplicitContext() string { return f.overrides.CurrentContext }

// Client is a client for the flags' cluster (a connection error is a
// usage or connection error: exit 2).
func (f *clusterFlags) Client() (client.Client, *rest.Config, error) {
	cfg, err := f.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := clientFor(cfg)
	return c, cfg, err
}

// clientFor is a client for cfg (a connection error is exit 2).
func clientFor(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("connect to %s: %w", cfg.Host, err)}
	}
	return c, nil
}

// clusterExit maps the error of a command that acts on a cluster to its
// exit status, one mapping for them all: nil is 0; an error that is one
// of refused (the command refused, or would not go ahead, and changed
// nothing) is 1; anything else, a usage or connection error, is 2.
func clusterExit(err error, refused ...error) error {
	if err == nil {
		return nil
	}
	var exit *ExitError
	if errors.As(err, &exit) {
		return err
	}
	for _, r := range refused {
		if errors.Is(err, r) {
			return &ExitError{Code: 1, Err: err}
		}
	}
	return &ExitError{Code: 2, Err: err}
}
