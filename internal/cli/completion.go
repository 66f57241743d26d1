package cli

import (
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// Completion of flag values: contexts, clusters and users from the
// kubeconfig, namespaces from the cluster (best effort, a short timeout),
// catalog versions.

func registerClusterCompletions(cmd *cobra.Command, f *clusterFlags) {
	fromKubeconfig := func(pick func(f *clusterFlags) []string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return pick(f), cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = cmd.RegisterFlagCompletionFunc("context", fromKubeconfig(func(f *clusterFlags) []string {
		raw, err := f.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil
		}
		return slices.Sorted(maps.Keys(raw.Contexts))
	}))
	_ = cmd.RegisterFlagCompletionFunc("cluster", fromKubeconfig(func(f *clusterFlags) []string {
		raw, err := f.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil
		}
		return slices.Sorted(maps.Keys(raw.Clusters))
	}))
	_ = cmd.RegisterFlagCompletionFunc("user", fromKubeconfig(func(f *clusterFlags) []string {
		raw, err := f.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil
		}
		return slices.Sorted(maps.Keys(raw.AuthInfos))
	}))
	_ = cmd.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return completeNamespaces(cmd, f, prefix), cobra.ShellCompDirectiveNoFileComp
	})
}

func completeNamespaces(cmd *cobra.Command, f *clusterFlags, prefix string) []string {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil
	}
	cfg.Timeout = 5e9 // 5 s: completion must not hang on an unreachable cluster
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	list, err := cs.CoreV1().Namespaces().List(contextOf(cmd), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, ns := range list.Items {
		if ns.Status.Phase != corev1.NamespaceTerminating && strings.HasPrefix(ns.Name, prefix) {
			out = append(out, ns.Name)
		}
	}
	return out
}

// completeVersions completes the catalog's KubeVirt versions.
func completeVersions(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return release.Builtin().Versions(), cobra.ShellCompDirectiveNoFileComp
}

// completeClusterNames lists the local clusters that have a state
// directory (virtop up --name, virtop down --name).
func completeClusterNames(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	root, err := devcluster.StateRoot()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeVersionFlags gives every command's --version flag (dump, rules,
// diff's version: operands) the catalog's versions, where the command did
// not register its own completion.
func completeVersionFlags(c *cobra.Command) {
	if c.Flags().Lookup("version") != nil {
		if _, ok := c.GetFlagCompletionFunc("version"); !ok {
			_ = c.RegisterFlagCompletionFunc("version", completeVersions)
		}
	}
	for _, sub := range c.Commands() {
		completeVersionFlags(sub)
	}
}
