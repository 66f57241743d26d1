package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/proc"
)

// OperatorBuilt reports whether the virtop binary has the `operator`
// subcommand: `virtop operator --help` exits 0 only if it has (cobra rejects
// an unknown command with a non-zero exit).
func OperatorBuilt(ctx context.Context, virtop string) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, virtop, "operator", "--help")
	out, err := cmd.CombinedOutput()
	return err == nil && strings.Contains(string(out), "operator")
}

// OperatorArgs is the command line (after the binary) the operator runs
// with: leader election off (the operator's default is on), so that a
// host process started again after a SIGKILL does not wait out the dead
// one's Lease; a later --leader-elect turns it on. It names upstream's
// monitor namespaces in --prometheus-namespaces: `up --prometheus late`
// creates namespace monitoring after the KubeVirt resource, which the
// default setting does not trust (docs/security.md); this cluster is the
// user's own.
func (c *Cluster) OperatorArgs() []string {
	return c.operatorArgs(false)
}

func (c *Cluster) operatorArgs(leaderElect bool) []string {
	return []string{"operator", "--kubeconfig", c.Kubeconfig(), "--namespace", InstallNamespace, fmt.Sprintf("--leader-elect=%t", leaderElect),
		"--prometheus-namespaces=" + MonitoringNamespace + ",openshift-monitoring"}
}

// UpOperatorArgs is the command line of the operator `virtop up` starts:
// OperatorArgs with leader election on, so that its Lease virt-operator
// says who leads, as a production operator's does (virtop doctor and
// upstream's alerts read it); the host process has no pod to tell that it
// runs.
func (c *Cluster) UpOperatorArgs() []string {
	return c.operatorArgs(true)
}

// HostOperatorFlags are the flags an operator running as a host process
// needs: no fixed metrics or probe ports (several clusters may run on one
// host), and its validating webhook served on webhookAddr and registered by
// URL, since the API server cannot reach it through a Service.
func HostOperatorFlags(webhookAddr string) []string {
	return []string{"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-bind-address", webhookAddr, "--webhook-url-host", webhookAddr}
}

// FreeLoopbackAddr returns a 127.0.0.1 address with a port nothing listens
// on right now and that it has not returned in the last handedOutFor. The
// kernel may hand a port it just gave out, closed, to the next bind of port
// 0: two processes started one after the other were given the same port
// before the first had bound it (prometheus-operator's web address and
// kube-state-metrics' telemetry port, in CI on 6 December: `bind: address
// already in use`).
func FreeLoopbackAddr() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	now := time.Now()
	for p, at := range handedOut.ports {
		if now.Sub(at) > handedOutFor {
			delete(handedOut.ports, p)
		}
	}
	// Listeners held until a new port is found, so the kernel offers
	// another each time.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if _, recent := handedOut.ports[port]; !recent {
			handedOut.ports[port] = now
			return l.Addr().String(), nil
		}
	}
	return "", fmt.Errorf("no loopback port that was not handed out in the last %s", handedOutFor)
}

// handedOutFor is how long FreeLoopbackAddr does not return a port again:
// longer than any process takes to bind the port it was given.
const handedOutFor = 10 * time.Minute

var handedOut = struct {
	sync.Mutex
	ports map[int]time.Time
}{ports: map[int]time.Time{}}

// OperatorPID returns the PID in the operator's pidfile and whether that
// process is alive and is this cluster's operator (its command line names
// the cluster's kubeconfig, which guards against a reused PID).
func (c *Cluster) OperatorPID() (int, bool) {
	pid, err := proc.ReadPID(c.OperatorPIDFile())
	if err != nil {
		return 0, false
	}
	if !proc.Alive(pid) {
		return pid, false
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return pid, false
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	isOp := false
	for i, a := range args {
		if a == "operator" {
			isOp = true
		}
		if isOp && (a == "--kubeconfig="+c.Kubeconfig() || (a == "--kubeconfig" && i+1 < len(args) && args[i+1] == c.Kubeconfig())) {
			return pid, true
		}
	}
	return pid, false
}

// OperatorProcess is an operator started by StartOperator.
type OperatorProcess struct {
	PID int
	// Reused is true when an operator was already running.
	Reused bool
	// exited is closed when a process started by this call exits; code then
	// holds its exit code (-1 when killed by a signal).
	exited chan struct{}
	code   int
}

// Exited reports whether the operator started by this process has exited,
// and its exit code.
func (o *OperatorProcess) Exited() (bool, int) {
	if o == nil || o.exited == nil {
		return false, 0
	}
	select {
	case <-o.exited:
		return true, o.code
	default:
		return false, 0
	}
}

// StartOperator starts `<virtop> operator --kubeconfig <state>/kubeconfig
// --namespace kubevirt --leader-elect` (UpOperatorArgs) as a detached process in the cluster's network namespace (its own
// session, so it outlives the caller), logging to operator.log and writing operator.pid.
// If the pidfile names a live operator of this cluster, it is reused.
func (c *Cluster) StartOperator(virtop string) (*OperatorProcess, error) {
	if pid, ok := c.OperatorPID(); ok {
		return &OperatorProcess{PID: pid, Reused: true}, nil
	}
	if err := os.MkdirAll(c.StateDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(c.OperatorLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	hook, err := FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	args := append(c.UpOperatorArgs(), HostOperatorFlags(hook)...)
	fmt.Fprintf(logf, "---- %s: starting %s %s\n", time.Now().Format(time.RFC3339), virtop, strings.Join(args, " "))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	// In the cluster's namespace: the API server calls its webhook on the
	// namespace's loopback.
	ns := c.Netns()
	if err := ns.Ensure(); err != nil {
		return nil, err
	}
	cmd := ns.Command(virtop, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the operator: %w", err)
	}
	op := &OperatorProcess{PID: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		// Reap it if it exits while the caller lives; once the caller exits,
		// init adopts it.
		err := cmd.Wait()
		op.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			op.code = ee.ExitCode()
		}
		close(op.exited)
	}()
	if err := os.WriteFile(c.OperatorPIDFile(), []byte(strconv.Itoa(op.PID)+"\n"), 0o644); err != nil {
		return op, err
	}
	return op, nil
}

// StopOperator stops the operator named by the pidfile: SIGTERM, then
// SIGKILL after grace. It reports the PID stopped (0 if none was running)
// and removes the pidfile.
func (c *Cluster) StopOperator(ctx context.Context, grace time.Duration) (int, error) {
	pid, ok := c.OperatorPID()
	if ok {
		if err := proc.Terminate(ctx, pid, grace); err != nil {
			return pid, fmt.Errorf("stopping the operator (pid %d): %w", pid, err)
		}
	} else {
		// Dead, or a live process that is not this cluster's operator (a
		// reused PID): nothing to stop.
		pid = 0
	}
	if err := os.Remove(c.OperatorPIDFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return pid, err
	}
	return pid, nil
}
