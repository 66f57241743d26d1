// Package devcluster creates and deletes virtop's local cluster: a kwokctl
// cluster with the binary runtime (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok-controller as host
// processes, from the tools cache), fake Nodes that run Deployments and
// DaemonSets to Ready without containers, what the release manifest would
// install, optionally a Prometheus stack, and virtop's operator as a detached
// host process.
//
// Everything a cluster owns lives in its state directory,
// ${XDG_STATE_HOME:-$HOME/.local/state}/virtop/<name>/:
//
//	kubeconfig     the cluster's kubeconfig (~/.kube/config is never touched)
//	operator.log   the operator's output
//	operator.pid   the operator's PID
//	kwok/          kwokctl's work directory (KWOK_WORKDIR): binaries, pids, logs, etcd data
//	node/          the real node's (internal/tools/realnode): containerd, kubelet, logs
//
// With a real node (the default of `virtop up`), KubeVirt's control plane
// runs there as real containers (RealNodeNote); without one, no pod serves
// anything: webhooks and APIServices have no backend (Note).
package devcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// DefaultName is the cluster name `virtop up` uses without --name.
const DefaultName = "virtop"

// InstallNamespace is where the operator runs and KubeVirt is installed.
const InstallNamespace = "kubevirt"

// Note is what a user must know about a local cluster; `up` prints it.
const Note = `On this cluster no pod runs a container, so nothing serves webhooks or APIServices:
  - KubeVirt's webhooks are applied with failurePolicy: Ignore and a short timeout
    (through customizeComponents), so requests they match are not rejected;
  - KubeVirt's APIServices stay unregistered, because virt-api does not answer.`

// RealNodeNote is what a user must know about a local cluster with a real
// node; `up` prints it.
const RealNodeNote = `On this cluster KubeVirt's control plane runs for real: virt-api, virt-controller,
virt-exportproxy (and the synchronization controller) run as containers on the real node,
from images built from upstream's source at the installed release; every webhook keeps the
failurePolicy its release renders and the APIServices are served by virt-api.
virt-handler stays on the fake nodes (type=kwok): VMs get their launcher pods there, faked.
(virtop up --vms puts virt-handler on the real node too, where VMs boot under emulation.)`

// VMsNote is what a user must know about a local cluster whose real node
// runs VMs (up --vms); `up` prints it.
const VMsNote = `On this cluster KubeVirt runs for real on the real node: virt-api, virt-controller,
virt-exportproxy, the synchronization controller and virt-handler run as containers there,
from images built from upstream's source at the installed release (virt-handler and
virt-launcher on Debian's QEMU and libvirt); every webhook keeps its release's failurePolicy.
Software emulation is on (spec.configuration.developerConfiguration.useEmulation): a VM
whose pod lands on the real node boots under QEMU's TCG; on the fake nodes virt-handler's
pods and launcher pods are faked. up starts one VM there, default/testvm (a guest made from
Debian's kernel and busybox); virtctl console testvm reaches its serial console.`

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)

// Cluster names one local cluster and where its state lives. It holds no
// connection; methods open what they need.
type Cluster struct {
	// Name is the cluster's name (kwokctl's too; its kubeconfig context is kwok-<Name>).
	Name string
	// StateDir is ${XDG_STATE_HOME:-$HOME/.local/state}/virtop/<Name>.
	StateDir string
	// AuditPolicy, when set before the cluster is created, is the path of
	// an audit policy file (audit.k8s.io/v1 Policy) the API server runs
	// with, writing JSON lines to AuditLog. Off (empty) by default; a
	// cluster created without it has no audit log.
	AuditPolicy string
}

// AuditLog is where the API server writes its audit events (JSON lines)
// when the cluster was created with an AuditPolicy.
func (c *Cluster) AuditLog() string { return filepath.Join(c.StateDir, "audit.log") }

// StateRoot is the directory holding every cluster's state directory.
func StateRoot() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the state directory: XDG_STATE_HOME is unset and %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "virtop"), nil
}

// New returns the cluster called name (DefaultName if empty) with its state
// under StateRoot. It creates nothing.
func New(name string) (*Cluster, error) {
	root, err := StateRoot()
	if err != nil {
		return nil, err
	}
	return NewAt(name, root)
}

// NewAt is New with an explicit state root (tests use a temporary one).
func NewAt(name, stateRoot string) (*Cluster, error) {
	if name == "" {
		name = DefaultName
	}
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("invalid cluster name %q: use lower-case letters, digits and '-', at most 40 characters", name)
	}
	root, err := filepath.Abs(stateRoot)
	if err != nil {
		return nil, err
	}
	// Processes are recognised by the state directory in their command
	// lines, so it must be spelled the same way every time.
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	return &Cluster{Name: name, StateDir: filepath.Join(root, name)}, nil
}

// Kubeconfig is the path of the cluster's kubeconfig.
func (c *Cluster) Kubeconfig() string { return filepath.Join(c.StateDir, "kubeconfig") }

// OperatorLog is the path of the operator's log.
func (c *Cluster) OperatorLog() string { return filepath.Join(c.StateDir, "operator.log") }

// OperatorPIDFile is the path of the operator's pidfile.
func (c *Cluster) OperatorPIDFile() string { return filepath.Join(c.StateDir, "operator.pid") }

// KwokWorkdir is kwokctl's work directory (KWOK_WORKDIR) for this cluster.
func (c *Cluster) KwokWorkdir() string { return filepath.Join(c.StateDir, "kwok") }

// KwokClusterDir is where kwokctl keeps this cluster's files (its config,
// copied binaries, pids/, logs/, etcd data).
func (c *Cluster) KwokClusterDir() string {
	return filepath.Join(c.KwokWorkdir(), "clusters", c.Name)
}

// Exists reports whether kwokctl has a cluster of this name in the state
// directory (running or not).
func (c *Cluster) Exists() bool {
	_, err := os.Stat(filepath.Join(c.KwokClusterDir(), "kwok.yaml"))
	return err == nil
}

// errNotExist is returned by operations needing an existing cluster.
var errNotExist = errors.New("cluster does not exist")

// since formats a duration for humans, rounded to 0.1 s.
func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }
