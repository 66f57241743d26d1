package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

const deadKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: dead
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: dead-ctx
  context:
    cluster: dead
    user: nobody
current-context: dead-ctx
users:
- name: nobody
  user:
    token: x
`

// doctor exits 2 when it cannot run: a bad flag, an unreadable kubeconfig,
// an API server that does not answer. (Its verdicts are tested in
// internal/tools/doctor against envtest.)
func TestDoctorCouldNotRun(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(deadKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad output", []string{"doctor", "--kubeconfig", kc, "-o", "yaml"}, "-o must be text or json"},
		{"missing kubeconfig", []string{"doctor", "--kubeconfig", filepath.Join(dir, "nope")}, "load kubeconfig"},
		{"unknown context", []string{"doctor", "--kubeconfig", kc, "--context", "other"}, "other"},
		{"unreachable server", []string{"doctor", "--kubeconfig", kc, "--timeout", "20s"}, "https://127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(tc.args, &out, &errb)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stdout %q stderr %q", code, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("a run that could not run printed a report: %q", out.String())
			}
		})
	}
}

func TestDoctorWhere(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(deadKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := &cobra.Command{Use: "doctor"}
	kube := addClusterFlags(cmd)
	if err := cmd.ParseFlags([]string{"--kubeconfig", kc, "-n", "kv"}); err != nil {
		t.Fatal(err)
	}
	_, where, err := doctorConfig(doctorOptions{kube: kube})
	if err != nil {
		t.Fatal(err)
	}
	if where.Context != "dead-ctx" || where.Server != "https://127.0.0.1:1" || where.Namespace != "kv" || where.Kubeconfig != kc {
		t.Errorf("where = %+v", where)
	}
}
