package devcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/virtop-dev/virtop/internal/tools/netns"
	"github.com/virtop-dev/virtop/internal/tools/proc"
)

// The local cluster is sealed: every process of it (kwokctl's components,
// the operator `up` starts) runs in a network namespace of its own whose only
// interface is loopback. There the API server's dials to a webhook's Service
// ClusterIP, to a fake pod's IP (webhooks, APIServices, the service proxy)
// fail at once with "network is unreachable" instead of following the
// machine's default route out. The machine reaches the API server through a
// forwarder: a listener on the machine's loopback at the API server's port,
// handed to a process inside the namespace that dials the same port there.
// So the kubeconfig's https://127.0.0.1:<port> works from both sides.

// ForwardCommand is the (hidden) virtop command a forwarder runs.
const ForwardCommand = "netns-forward"

// Netns is the cluster's network namespace: virtop-<name>-<8 hex digits of
// the state directory>, so that two clusters of one name under two state
// roots (two users, two test suites) never share one.
func (c *Cluster) Netns() netns.NS {
	sum := sha256.Sum256([]byte(c.StateDir))
	return netns.Named("virtop-" + c.Name + "-" + hex.EncodeToString(sum[:4]))
}

// PodCIDR is the range kwok gives this cluster's fake pods their IPs from:
// a /24 in 10.128.0.0/10 picked by the state directory, so that two local
// clusters on one machine do not share pod IPs (kwok's default is one
// 10.0.0.0/24 for all), and clear of the Service range 10.96.0.0/12. None
// of it is reachable: it exists only in the cluster's objects.
func (c *Cluster) PodCIDR() string {
	a, b := c.addressBlock()
	return fmt.Sprintf("10.%d.%d.0/24", 128+a, b)
}

// NodeIP is the address kwok reports for this cluster's fake nodes, in
// 10.192.0.0/10 (picked like PodCIDR), as unreachable as the pods'.
func (c *Cluster) NodeIP() string {
	a, b := c.addressBlock()
	return fmt.Sprintf("10.%d.%d.1", 192+a, b)
}

// NodePodCIDR is the range the real node's pods take their IPs from: the
// subnet of the bridge in the cluster's namespace (picked like PodCIDR, beside
// it). Its first address is the bridge's: the real node's address and the
// API server's advertised one (Gateway).
func (c *Cluster) NodePodCIDR() string {
	a, b := c.addressBlock()
	return fmt.Sprintf("10.%d.%d.0/24", 128+a, (b+128)%256)
}

// Gateway is the first address of NodePodCIDR, held by the bridge in the
// cluster's namespace: the address the API server advertises for the
// kubernetes Service (pods of the real node reach it there) and the real
// node's.
func (c *Cluster) Gateway() string {
	a, b := c.addressBlock()
	return fmt.Sprintf("10.%d.%d.1", 128+a, (b+128)%256)
}

// addressBlock picks the cluster's block from its state directory: the
// second octet's offset (0-63) and the third octet.
func (c *Cluster) addressBlock() (int, int) {
	sum := sha256.Sum256([]byte("pods " + c.StateDir))
	return int(sum[0]) % 64, int(sum[1])
}

// ForwarderPIDFile is the path of the forwarder's pidfile.
func (c *Cluster) ForwarderPIDFile() string { return filepath.Join(c.StateDir, "forward.pid") }

// ForwarderLog is the path of the forwarder's log.
func (c *Cluster) ForwarderLog() string { return filepath.Join(c.StateDir, "forward.log") }

// APIServerAddr is host:port of the API server as the kubeconfig names it.
func (c *Cluster) APIServerAddr() (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", c.Kubeconfig(), err)
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(host, port), nil
}

// ensureForwarder makes sure the machine's namespace reaches the API server:
// nothing to do when the caller already runs inside the cluster's namespace
// (the end-to-end suites do); otherwise a live forwarder is reused or one is
// started from the virtop binary virtop.
func (c *Cluster) ensureForwarder(virtop string) error {
	ns := c.Netns()
	if ns.Inside() {
		return nil
	}
	if pid, err := proc.ReadPID(c.ForwarderPIDFile()); err == nil && proc.Alive(pid) && refersTo(procDesc(pid), c.StateDir) {
		return nil
	}
	if virtop == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		virtop = exe
	}
	// A test binary would run its tests instead of the command.
	if strings.HasSuffix(filepath.Base(virtop), ".test") {
		return fmt.Errorf("%s is a test binary, not virtop: pass a virtop binary as ClusterOptions.Forwarder to reach cluster %s from outside its network namespace", virtop, c.Name)
	}
	addr, err := c.APIServerAddr()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(c.ForwarderLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := ns.Command(virtop, ForwardCommand, "--to", addr, "--cluster-state", c.StateDir)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Nothing of the caller's environment: the forwarder needs none, and a
	// test harness's variables must not steer it.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := netns.StartForwarder(cmd, addr); err != nil {
		return fmt.Errorf("starting the forwarder from the machine's %s into network namespace %s: %w", addr, ns.Name, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := os.WriteFile(c.ForwarderPIDFile(), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	// A binary without the command exits at once: say so rather than let
	// the API server look unreachable.
	select {
	case err := <-exited:
		return fmt.Errorf("the forwarder (%s %s) exited at once: %v\n%s", virtop, ForwardCommand, err, proc.Tail(c.ForwarderLog(), 10))
	case <-time.After(300 * time.Millisecond):
	}
	return nil
}

// stopForwarder stops the forwarder named by the pidfile.
func (c *Cluster) stopForwarder(ctx context.Context) error {
	pid, err := proc.ReadPID(c.ForwarderPIDFile())
	if err == nil && proc.Alive(pid) && refersTo(procDesc(pid), c.StateDir) {
		if err := proc.Terminate(ctx, pid, 5*time.Second); err != nil {
			return err
		}
	}
	if err := os.Remove(c.ForwarderPIDFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
