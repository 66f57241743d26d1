package doctor

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func writeKubeconfig(t *testing.T, path, current string, contexts ...string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, c := range contexts {
		cfg.Clusters[c] = &clientcmdapi.Cluster{Server: "https://" + c + ".example:6443"}
		cfg.AuthInfos[c+"-admin"] = &clientcmdapi.AuthInfo{Token: "secret"}
		cfg.Contexts[c] = &clientcmdapi.Context{Cluster: c, AuthInfo: c + "-admin"}
	}
	cfg.CurrentContext = current
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

func locate(t *testing.T, rules *clientcmd.ClientConfigLoadingRules, named Explicit) Where {
	t.Helper()
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: named.Context})
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return Locate(loader, named, cfg)
}

func TestLocate(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeKubeconfig(t, a, "staging", "staging")
	writeKubeconfig(t, b, "", "prod")

	// --kubeconfig, no --context: the current context, said to be only
	// the default.
	w := locate(t, &clientcmd.ClientConfigLoadingRules{ExplicitPath: a}, Explicit{Kubeconfig: a})
	if w.Context != "staging" || w.ContextSource != ContextFromCurrent || !w.ContextDefaulted() || w.KubeconfigFile != a ||
		w.KubeconfigSource != KubeconfigFromFlag || w.Server != "https://staging.example:6443" || w.User != "staging-admin" {
		t.Errorf("explicit file, default context: %+v", w)
	}

	// $KUBECONFIG with two files, --context from the second: the file
	// named is the one that holds the context.
	t.Setenv("KUBECONFIG", a+string(os.PathListSeparator)+b)
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	w = locate(t, rules, Explicit{Context: "prod"})
	if w.Context != "prod" || w.ContextSource != ContextFromFlag || w.ContextDefaulted() || w.KubeconfigFile != b ||
		w.KubeconfigSource != KubeconfigFromEnv || len(w.KubeconfigFiles) != 2 || w.Server != "https://prod.example:6443" || w.User != "prod-admin" {
		t.Errorf("$KUBECONFIG, --context: %+v", w)
	}

	// --user and impersonation are said.
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: "prod"})
	cfg, err := loader.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate.UserName = "system:serviceaccount:kubevirt:doctor"
	w = Locate(loader, Explicit{Context: "prod", User: "other"}, cfg)
	if w.User != "other as system:serviceaccount:kubevirt:doctor" {
		t.Errorf("user: %q", w.User)
	}

	// No loader (a REST config from elsewhere): in-cluster.
	w = Locate(nil, Explicit{}, &rest.Config{Host: "https://10.96.0.1:443"})
	if w.ContextSource != ContextInCluster || w.Server != "https://10.96.0.1:443" || w.User != "the pod's service account" {
		t.Errorf("in-cluster: %+v", w)
	}
}
