package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
)

func jobConfig(t *testing.T, version string) *config.DeploymentConfig {
	t.Helper()
	return kvtest.Config(t, version)
}

// TestDumpInstallStrategyErrors checks the exit codes and messages of the
// failures; the success path runs as a host process against a real API
// server in internal/strategystore's operator test.
func TestDumpInstallStrategyErrors(t *testing.T) {
	// A cluster that refuses connections.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)

	good := jobConfig(t, "v1.5.3")
	tampered := *good
	tampered.Namespace = "elsewhere"
	tests := []struct {
		name   string
		env    string
		key    string // "" means a valid key
		code   int
		stderr []string
	}{
		{"no signing key", good.JSON(), "-", 2, []string{"$VIRTOP_STRATEGY_SIGNING_KEY holds 0 bytes", "virtop-strategy-signing-key"}},
		{"short signing key", good.JSON(), "abc", 2, []string{"$VIRTOP_STRATEGY_SIGNING_KEY holds 3 bytes, fewer than 32"}},
		{"no config", "", "", 2, []string{"$VIRTOP_DEPLOYMENT_CONFIG is empty"}},
		{"bad JSON", "{not json", "", 2, []string{"$VIRTOP_DEPLOYMENT_CONFIG", "parse deployment config"}},
		{"ID does not match", tampered.JSON(), "", 2, []string{"does not match its content"}},
		{"version outside the catalog", jobConfig(t, "v9.9.9").JSON(), "", 2, []string{"render the install strategy of v9.9.9", "not in this virtop's catalog"}},
		{"cluster unreachable", good.JSON(), "", 1, []string{"write ConfigMap kubevirt/kubevirt-install-strategy-" + good.ID[:10]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("VIRTOP_DEPLOYMENT_CONFIG", tt.env)
			switch tt.key {
			case "":
				t.Setenv("VIRTOP_STRATEGY_SIGNING_KEY", strings.Repeat("0123456789abcdef", 4))
			case "-":
				t.Setenv("VIRTOP_STRATEGY_SIGNING_KEY", "")
			default:
				t.Setenv("VIRTOP_STRATEGY_SIGNING_KEY", tt.key)
			}
			var stdout, stderr bytes.Buffer
			code := Main([]string{"dump-install-strategy"}, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
	}
}
