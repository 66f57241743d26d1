package strategystore

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The Job's pod side: what `virtop dump-install-strategy` does in the pod
// the Runner's Job starts (internal/cli parses its flags and environment
// and calls these two).

// RenderForJob renders the install strategy of raw, the deployment config
// as JSON the operator writes into the Job ($EnvDeploymentConfig), with
// this binary's catalog, signs it with signingKey and returns its
// ConfigMap. namespace, when not empty, must be the config's (the
// command's -n). Every error it returns is one a retry cannot fix.
func RenderForJob(raw, signingKey, namespace string, log io.Writer) (*corev1.ConfigMap, error) {
	if raw == "" {
		return nil, fmt.Errorf("$%s is empty: it must hold the deployment config as JSON", EnvDeploymentConfig)
	}
	if len(signingKey) < strategy.MinSigningKeyLen {
		return nil, fmt.Errorf("$%s holds %d bytes, fewer than %d: it must hold the key of Secret %s (the operator loads no unsigned strategy)",
			vocab.EnvStrategySigningKey, len(signingKey), strategy.MinSigningKeyLen, vocab.StrategySigningKeySecret)
	}
	cfg, err := config.Parse([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("$%s: %w", EnvDeploymentConfig, err)
	}
	if namespace != "" && namespace != cfg.Namespace {
		return nil, fmt.Errorf("-n %s: the deployment config's namespace is %s", namespace, cfg.Namespace)
	}
	start := time.Now()
	st, err := strategy.Generate(cfg)
	if err != nil {
		return nil, fmt.Errorf("render the install strategy of %s: %w", cfg.Version, err)
	}
	cm, err := st.ConfigMap(cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("encode the install strategy of %s: %w", cfg.Version, err)
	}
	if err := strategy.Sign(cm, []byte(signingKey)); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "Rendered the install strategy of KubeVirt %s (deployment %s): %d objects, %d bytes encoded, in %s\n",
		cfg.Version, cfg.ID, len(st.Objects), len(cm.Data[vocab.ManifestsKey]), time.Since(start).Round(time.Millisecond))
	return cm, nil
}

// CreateFromJob creates the strategy ConfigMap RenderForJob returned. A
// plain create: the Job's Role grants create on ConfigMaps and no patch (a
// server-side apply is a patch), so its account cannot change any existing
// ConfigMap of the namespace (kubevirt-ca among them). A ConfigMap that
// exists already (an earlier attempt wrote it) is success, created false:
// the operator checks its signature as it checks any other.
func CreateFromJob(ctx context.Context, c client.Client, cm *corev1.ConfigMap) (created bool, err error) {
	err = c.Create(ctx, cm, client.FieldOwner(vocab.FieldManager))
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}
