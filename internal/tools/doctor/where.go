package doctor

import (
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Where the context came from (Where.ContextSource).
const (
	// ContextFromFlag: --context named it.
	ContextFromFlag = "flag"
	// ContextFromCurrent: no --context; the kubeconfig's current-context,
	// which may have changed since the user last looked.
	ContextFromCurrent = "current-context"
	// ContextInCluster: no kubeconfig; the pod's service account.
	ContextInCluster = "in-cluster"
)

// Where the kubeconfig files came from (Where.KubeconfigSource).
const (
	KubeconfigFromFlag    = "flag"
	KubeconfigFromEnv     = "$KUBECONFIG"
	KubeconfigFromDefault = "default"
)

// Where says which cluster, as whom, and which namespace doctor looked at:
// the runbook's first lesson is that a command answers about whatever
// cluster the current context names.
type Where struct {
	// Kubeconfig is the file named by --kubeconfig (empty: the default
	// loading rules); repeated in hints so they act on the same cluster.
	Kubeconfig string
	// KubeconfigFile is the file the context was read from (empty
	// in-cluster).
	KubeconfigFile string
	// KubeconfigFiles are the files loaded, in precedence order, and
	// KubeconfigSource says who named them (KubeconfigFrom*).
	KubeconfigFiles  []string
	KubeconfigSource string
	Context          string
	// ContextSource is ContextFromFlag, ContextFromCurrent or
	// ContextInCluster.
	ContextSource string
	Server        string
	// User is the kubeconfig user (AuthInfo) of the context, with "as X"
	// when requests are impersonated.
	User      string
	Namespace string
	// PrometheusURL is --prometheus-url, empty when not given.
	PrometheusURL string
}

// ContextDefaulted says the context was not named on the command line.
func (w Where) ContextDefaulted() bool { return w.ContextSource == ContextFromCurrent }

// Explicit is what the command line named, for Locate: each empty when not
// given.
type Explicit struct {
	Kubeconfig string
	Context    string
	// User is --user (a kubeconfig AuthInfo other than the context's).
	User string
}

// Locate describes where a command looks from the kubeconfig loader it
// used (clientcmd's deferred loader, as the CLI's connection flags
// build it), what the command line named, and
// the REST config the loader produced. It reads files only through the
// loader.
func Locate(loader clientcmd.ClientConfig, named Explicit, cfg *rest.Config) Where {
	w := Where{Kubeconfig: named.Kubeconfig}
	if cfg != nil {
		w.Server = cfg.Host
	}
	if loader != nil {
		if access := loader.ConfigAccess(); access != nil {
			w.KubeconfigFiles = access.GetLoadingPrecedence()
			switch {
			case access.IsExplicitFile():
				w.KubeconfigSource = KubeconfigFromFlag
			case os.Getenv(clientcmd.RecommendedConfigPathEnvVar) != "":
				w.KubeconfigSource = KubeconfigFromEnv
			default:
				w.KubeconfigSource = KubeconfigFromDefault
			}
		}
	}
	var raw struct {
		ok   bool
		user string
		file string
		ctx  string
	}
	if loader != nil {
		if rc, err := loader.RawConfig(); err == nil {
			raw.ctx = rc.CurrentContext
			if named.Context != "" {
				raw.ctx = named.Context
			}
			if c, found := rc.Contexts[raw.ctx]; found && c != nil {
				raw.ok = true
				raw.user = c.AuthInfo
				raw.file = c.LocationOfOrigin
			}
		}
	}
	switch {
	case named.Context != "":
		w.Context, w.ContextSource = named.Context, ContextFromFlag
	case raw.ok:
		w.Context, w.ContextSource = raw.ctx, ContextFromCurrent
	default:
		w.ContextSource = ContextInCluster
	}
	w.KubeconfigFile = raw.file
	if w.KubeconfigFile == "" && w.ContextSource != ContextInCluster && len(w.KubeconfigFiles) == 1 {
		w.KubeconfigFile = w.KubeconfigFiles[0]
	}
	w.User = raw.user
	if named.User != "" {
		w.User = named.User
	}
	if w.ContextSource == ContextInCluster {
		w.User = "the pod's service account"
		w.KubeconfigFiles = nil
		w.KubeconfigSource = ""
	}
	if cfg != nil && cfg.Impersonate.UserName != "" {
		w.User = strings.TrimSpace(w.User + " as " + cfg.Impersonate.UserName)
	}
	return w
}
