package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/release"
)

// clusterCommands talk to a cluster; they and only they take kubectl's
// connection flags. (up and down make their own cluster and kubeconfig.)
var clusterCommands = []string{"adopt", "doctor", "dump-install-strategy", "handback", "operator", "uninstall"}

// configFlags are the connection flags (clientcmd's) that users know
// from kubectl, with their shorthands.
var configFlags = map[string]string{
	"kubeconfig": "", "context": "", "cluster": "", "user": "", "namespace": "n", "server": "s",
	"token": "", "as": "", "as-group": "", "as-uid": "", "request-timeout": "",
	"certificate-authority": "", "client-certificate": "", "client-key": "",
	"insecure-skip-tls-verify": "", "tls-server-name": "",
}

// walk visits every command of the tree but cobra's help.
func walk(c *cobra.Command, visit func(*cobra.Command)) {
	if c.Name() == "help" {
		return
	}
	visit(c)
	for _, sub := range c.Commands() {
		walk(sub, visit)
	}
}

func name(c *cobra.Command) string { return strings.TrimPrefix(c.CommandPath(), "virtop ") }

// TestClusterFlags walks every command: those that talk to a cluster have
// every connection flag of kubectl (with -n and -s), the others none.
func TestClusterFlags(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	seen := 0
	walk(root, func(c *cobra.Command) {
		if slices.Contains(clusterCommands, name(c)) {
			seen++
			for flag, short := range configFlags {
				f := c.Flags().Lookup(flag)
				if f == nil {
					t.Errorf("virtop %s has no --%s", name(c), flag)
					continue
				}
				if f.Shorthand != short {
					t.Errorf("virtop %s --%s: shorthand %q, want %q", name(c), flag, f.Shorthand, short)
				}
			}
			return
		}
		for _, flag := range []string{"kubeconfig", "context", "as", "token", "server"} {
			if c.Flags().Lookup(flag) != nil {
				t.Errorf("virtop %s has --%s but is not a command that talks to a cluster (clusterCommands)", name(c), flag)
			}
		}
	})
	if seen != len(clusterCommands) {
		t.Errorf("found %d of the commands %v", seen, clusterCommands)
	}
}

// TestOutputFlags walks every command: each -o is --output with one of the
// two sets (objects: yaml|json; reports: text|json), the set's first as
// default, its values completed, and a value outside the set is a usage
// error (exit 2).
func TestOutputFlags(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	var with []string
	walk(root, func(c *cobra.Command) {
		f := c.Flags().ShorthandLookup("o")
		if f == nil {
			if c.Flags().Lookup("output") != nil {
				t.Errorf("virtop %s: --output without -o", name(c))
			}
			return
		}
		with = append(with, name(c))
		if f.Name != "output" {
			t.Errorf("virtop %s: -o is --%s", name(c), f.Name)
		}
		var set []string
		switch f.DefValue {
		case objectFormats[0]:
			set = objectFormats
		case reportFormats[0]:
			set = reportFormats
		default:
			t.Errorf("virtop %s: -o defaults to %q, want %s or %s", name(c), f.DefValue, objectFormats[0], reportFormats[0])
			return
		}
		for _, format := range set {
			if !strings.Contains(f.Usage, format) {
				t.Errorf("virtop %s: -o usage %q does not offer %s", name(c), f.Usage, format)
			}
		}
		if c.Name() != "rules" && c.Parent().Name() != "rules" { // the monitoring helper's own -o values
			got := complete(t, strings.Fields(name(c)), "-o", "")
			if !slices.Equal(got, set) {
				t.Errorf("virtop %s: -o completes %v, want %v", name(c), got, set)
			}
		}
		args := append(strings.Fields(name(c)), "-o", "bogus")
		if name(c) == "diff" {
			args = append(args, "version:"+release.Default, "version:"+release.Default)
		}
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "bogus") {
			t.Errorf("virtop %v: exit %d, stderr %q; want exit 2 naming the value", args, code, errb.String())
		}
	})
	for _, want := range []string{"diff", "doctor", "dump", "rules", "version"} {
		if !slices.Contains(with, want) {
			t.Errorf("virtop %s has no -o (commands with -o: %v)", want, with)
		}
	}
}

// complete asks cobra's completion for the values of a flag.
func complete(t *testing.T, args []string, flag, prefix string) []string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := Main(append(append([]string{cobra.ShellCompRequestCmd}, args...), flag, prefix), &out, &errb); code != 0 {
		t.Fatalf("completion of %v %s: exit %d: %s", args, flag, code, errb.String())
	}
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, ":") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
	}
	return got
}

// TestFlagValueCompletion: versions, kinds, contexts, Prometheus modes.
func TestFlagValueCompletion(t *testing.T) {
	if got := complete(t, []string{"dump"}, "--version", ""); !slices.Equal(got, release.Builtin().Versions()) {
		t.Errorf("dump --version completes %v, want the catalog %v", got, release.Builtin().Versions())
	}
	if got := complete(t, []string{"rules"}, "--version", ""); !slices.Equal(got, release.Builtin().Versions()) {
		t.Errorf("rules --version completes %v", got)
	}
	if got := complete(t, []string{"dump"}, "--kind", ""); !slices.Contains(got, "Deployment") || !slices.Contains(got, "DaemonSet") || !slices.Contains(got, "CustomResourceDefinition") {
		t.Errorf("dump --kind completes %v", got)
	}
	if got := complete(t, []string{"up"}, "--prometheus", ""); !slices.Equal(got, []string{"none", "before", "late"}) {
		t.Errorf("up --prometheus completes %v", got)
	}
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: east, cluster: {server: "https://127.0.0.1:1"}}, {name: west, cluster: {server: "https://127.0.0.1:2"}}]
users: [{name: admin, user: {token: t}}]
contexts: [{name: prod-east, context: {cluster: east, user: admin}}, {name: prod-west, context: {cluster: west, user: admin}}]
current-context: prod-east
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range clusterCommands {
		if got := complete(t, []string{cmd, "--kubeconfig", kc}, "--context", ""); !slices.Equal(got, []string{"prod-east", "prod-west"}) {
			t.Errorf("%s --context completes %v", cmd, got)
		}
	}
	if got := complete(t, []string{"doctor", "--kubeconfig", kc}, "--cluster", ""); !slices.Equal(got, []string{"east", "west"}) {
		t.Errorf("doctor --cluster completes %v", got)
	}
}

// TestExitCodes: 0 ok, 1 a finding or a difference, 2 a usage or input
// error, the same for every command.
func TestExitCodes(t *testing.T) {
	dead := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(dead, []byte(deadKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"--version"}, 0},
		{[]string{"dump", "--kind", "Deployment"}, 0},
		{[]string{"dump", "--kind", "nosuch"}, 2},
		{[]string{"dump", "--version", "v0.0.1"}, 2},
		{[]string{"dump", "--kubevirt", "/nonexistent.yaml"}, 2},
		{[]string{"dump", "--nosuchflag"}, 2},
		{[]string{"diff", "version:" + release.Default, "version:" + release.Default}, 0},
		{[]string{"diff", "version:v1.5.0", "version:v1.5.3"}, 1},
		{[]string{"diff", "version:" + release.Default}, 2},
		{[]string{"rules", "--version", "v0.0.1"}, 2},
		{[]string{"up", "--nodes", "0"}, 2},
		{[]string{"up", "--prometheus", "sometimes"}, 2},
		{[]string{"doctor", "--kubeconfig", "/nonexistent"}, 2},
		{[]string{"doctor", "--kubeconfig", dead, "--request-timeout", "soon"}, 2},
		{[]string{"uninstall", "--kubeconfig", "/nonexistent"}, 2},
		{[]string{"nosuchcommand"}, 2},
	} {
		var out, errb bytes.Buffer
		if code := Main(tc.args, &out, &errb); code != tc.code {
			t.Errorf("virtop %v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, errb.String())
		}
	}
}

// TestOperatorRefusesNonPositiveClientLimits: a zero or negative client
// rate limit is refused before anything starts, naming both flags.
func TestOperatorRefusesNonPositiveClientLimits(t *testing.T) {
	for _, args := range [][]string{{"--client-qps", "0"}, {"--client-burst", "-1"}} {
		var out, errb bytes.Buffer
		code := Main(append([]string{"operator", "--kubeconfig", "/nonexistent"}, args...), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "both must be positive") {
			t.Errorf("virtop operator %v: exit %d, stderr %q; want 2 and the limits refused", args, code, errb.String())
		}
	}
}

// Leader election is on unless turned off: two operators of a namespace
// (a Deployment scaled up, a second install of the chart) must not both
// reconcile with one field manager.
func TestOperatorElectsALeaderByDefault(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	op, _, err := root.Find([]string{"operator"})
	if err != nil {
		t.Fatal(err)
	}
	f := op.Flags().Lookup("leader-elect")
	if f == nil || f.DefValue != "true" {
		t.Fatalf("--leader-elect default %v, want true", f)
	}
}

// Only the Prometheus resources of upstream's default monitor namespaces
// are trusted unless the operator is told otherwise; "" and "*" parse to
// "only spec.monitorNamespace" and "every namespace".
func TestOperatorTrustsDefaultMonitorNamespaces(t *testing.T) {
	f := newOperatorCommand().Flags().Lookup("prometheus-namespaces")
	if f == nil || f.DefValue != "[monitoring,openshift-monitoring]" {
		t.Fatalf("--prometheus-namespaces default %v, want [monitoring,openshift-monitoring]", f)
	}
	for value, want := range map[string][]string{"": {}, "*": {"*"}, "obs,monitoring": {"obs", "monitoring"}} {
		fs := newOperatorCommand().Flags()
		if err := fs.Set("prometheus-namespaces", value); err != nil {
			t.Fatal(err)
		}
		got, err := fs.GetStringSlice("prometheus-namespaces")
		if err != nil || got == nil || !slices.Equal(got, want) {
			t.Errorf("--prometheus-namespaces=%q: %#v, %v; want %#v", value, got, err, want)
		}
	}
}
