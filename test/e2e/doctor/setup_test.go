package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// installed is the suite's KubeVirt installation: the operator running as
// a host child process, a kube-prometheus-stack-shaped Prometheus resource
// (so the monitoring objects are applied) and the control plane Available.
type installed struct {
	env *framework.Env
	c   client.Client
	op  *framework.Process
	ns  string
}

// install installs KubeVirt as `virtop up --prometheus before` does
// (devcluster.Up: the monitoring CRDs and Prometheus, then the sample
// KubeVirt resource prepared for the local cluster), with the operator run
// by the test instead, with leader election so it holds the Lease
// virt-operator like a production operator.
func install(t *testing.T) *installed {
	t.Helper()
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	const upTimeout = 10 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	s := &installed{env: env, c: env.Client(t), ns: devcluster.InstallNamespace}
	start := time.Now()
	var out bytes.Buffer
	// The release before the newest, so that the stuck-upgrade case has a
	// next release to upgrade to (upstream supports one minor at a time,
	// forward).
	versions := release.Builtin().Versions()
	installAt := versions[len(versions)-2]
	err := env.Cluster.Up(ctx, &out, devcluster.UpOptions{
		ClusterOptions: devcluster.ClusterOptions{Nodes: env.Nodes},
		Prometheus:     devcluster.PrometheusBefore,
		Version:        installAt,
		// No Virtop: the test runs the operator itself.
	})
	t.Logf("devcluster.Up (Prometheus before; given no operator binary, it says the operator is not built: the test starts it):\n%s", out.String())
	if err != nil {
		t.Fatalf("devcluster.Up (within %s): %v", upTimeout, err)
	}
	s.op = env.Operator(t, append(framework.HostOperatorArgs(t), "--leader-elect")...).Start()
	framework.WaitKubeVirt(t, s.c, "Available at "+installAt, 5*time.Minute, framework.RolledOutAt(installAt))
	framework.WaitKubeVirt(t, s.c, "MonitoringReady", 3*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		c := kv.Status.Condition("MonitoringReady")
		return c.Status == corev1.ConditionTrue, fmt.Sprintf("MonitoringReady %s %s: %s", c.Status, c.Reason, c.Message)
	})
	t.Logf("MEASURE install (Prometheus, operator, KubeVirt Available with monitoring): %s", time.Since(start).Round(100*time.Millisecond))
	return s
}

// report is the JSON schema of `virtop doctor -o json`, as documented
// (decoded independently of the doctor package, so a renamed field fails).
type report struct {
	Verdict          string      `json:"verdict"`
	Reason           string      `json:"reason"`
	Headline         string      `json:"headline"`
	Causes           []cause     `json:"causes"`
	Upgrade          string      `json:"upgrade"`
	VMs              vms         `json:"vms"`
	Kubeconfig       string      `json:"kubeconfig"`
	KubeconfigFiles  []string    `json:"kubeconfigFiles"`
	KubeconfigSource string      `json:"kubeconfigSource"`
	Context          string      `json:"context"`
	ContextSource    string      `json:"contextSource"`
	Server           string      `json:"server"`
	User             string      `json:"user"`
	Namespace        string      `json:"namespace"`
	Prometheus       *prometheus `json:"prometheus"`
	Checks           []check     `json:"checks"`
}

type cause struct {
	Check string `json:"check"`
	Cause string `json:"cause"`
	Hint  string `json:"hint"`
}

type vms struct {
	Line          string         `json:"line"`
	VMIs          int            `json:"vmis"`
	Running       int            `json:"running"`
	ByPhase       map[string]int `json:"byPhase"`
	RunningByNode map[string]int `json:"runningByNode"`
}

type prometheus struct {
	URL      string   `json:"url"`
	Via      string   `json:"via"`
	Auth     string   `json:"auth"`
	CAFile   string   `json:"caFile"`
	Resource string   `json:"resource"`
	Service  string   `json:"service"`
	Answered bool     `json:"answered"`
	Version  string   `json:"version"`
	Error    string   `json:"error"`
	Tried    []string `json:"tried"`
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

func clientcmdLoad(path string) (*clientcmdapi.Config, error) { return clientcmd.LoadFromFile(path) }

type check struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Evidence string `json:"evidence"`
	Hint     string `json:"hint"`
}

// run is one run of the doctor binary.
type run struct {
	report report
	code   int
	stdout string
	stderr string
}

func (r *run) check(name string) (check, bool) {
	for _, c := range r.report.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return check{}, false
}

// summary is one line per check that is not ok.
func (r *run) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict %s (exit %d): %s", r.report.Verdict, r.code, r.report.Reason)
	for _, c := range r.report.Checks {
		if c.Status != "ok" {
			fmt.Fprintf(&b, "\n  %s %s: %s", c.Status, c.Name, c.Evidence)
		}
	}
	return b.String()
}

// doctor runs the built `virtop doctor -o json` against the suite's
// cluster (plus args) and decodes its report (not when it exits 2: it
// could not run, and says why on stderr).
func (s *installed) doctor(ctx context.Context, args ...string) (*run, error) {
	return s.exec(ctx, true, append([]string{"-o", "json"}, args...))
}

// exec runs `virtop doctor --kubeconfig <the suite's> --namespace kubevirt`
// with args after them (a flag given again wins).
func (s *installed) exec(ctx context.Context, decode bool, args []string) (*run, error) {
	argv := append([]string{"doctor", "--kubeconfig", s.env.Cluster.Kubeconfig(), "--namespace", s.ns}, args...)
	// virtop doctor starts no process (it leaves nothing holding its
	// output), so ctx alone bounds the run; framework.Command also bounds
	// the wait for its output, as for every command the suite runs.
	cmd := framework.Command(ctx, s.env.VirtopBin, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := &run{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		r.code = ee.ExitCode()
	default:
		return r, fmt.Errorf("running virtop %s: %v (stderr: %s)", strings.Join(argv, " "), err, r.stderr)
	}
	if !decode || r.code == 2 {
		return r, nil
	}
	if err := json.Unmarshal(stdout.Bytes(), &r.report); err != nil {
		return r, fmt.Errorf("doctor's output (exit %d) is not its JSON report: %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return r, nil
}

// logDoctor keeps the doctor's report in the suite's log directory.
func (s *installed) logDoctor(t *testing.T, r *run) {
	t.Helper()
	dir := s.env.LogDir()
	_ = os.MkdirAll(dir, 0o755)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.doctor.%d.json", name, time.Now().UnixNano())), []byte(r.stdout+r.stderr), 0o644)
}
