package framework

import (
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountUser is the user name the API server gives a
// ServiceAccount's token, and the groups that come with it.
func ServiceAccountUser(ns, name string) (string, []string) {
	return fmt.Sprintf("system:serviceaccount:%s:%s", ns, name),
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// KubeconfigAs writes a copy of kubeconfig into dir whose current user
// impersonates user with groups, and returns its path: a process run with
// it holds only what the cluster's RBAC grants that user.
func KubeconfigAs(t testing.TB, kubeconfig, dir, user string, groups []string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		t.Fatalf("%s: no current context", kubeconfig)
	}
	auth, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		t.Fatalf("%s: context %s has no user", kubeconfig, cfg.CurrentContext)
	}
	auth.Impersonate = user
	auth.ImpersonateGroups = groups
	path := filepath.Join(dir, "kubeconfig-as-"+filepath.Base(user))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
