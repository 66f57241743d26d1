package framework

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

// VMGVR and VMIGVR are KubeVirt's VirtualMachines and their instances.
var VMGVR, VMIGVR = devcluster.VMGVR, devcluster.VMIGVR

// InvalidVMValidator is the webhook of upstream's virt-api that refuses
// the invalid VM VM(…, true) builds.
const InvalidVMValidator = "virtualmachine-validator.kubevirt.io"

// VM is a VirtualMachine in namespace default with one containerDisk;
// withBadDisk adds a disk that names no volume, which upstream's validator
// refuses.
func VM(name, runStrategy string, withBadDisk bool) *unstructured.Unstructured {
	disks := []any{map[string]any{"name": "containerdisk", "disk": map[string]any{"bus": "virtio"}}}
	volumes := []any{map[string]any{"name": "containerdisk", "containerDisk": map[string]any{"image": "quay.io/kubevirt/cirros-container-disk-demo:v1.9.0"}}}
	if withBadDisk {
		// A disk without a volume of its name: upstream's validator refuses it.
		disks = append(disks, map[string]any{"name": "orphan", "disk": map[string]any{"bus": "virtio"}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"runStrategy": runStrategy,
			"template": map[string]any{
				"spec": map[string]any{
					"domain": map[string]any{
						"devices":   map[string]any{"disks": disks},
						"resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}},
					},
					"volumes": volumes,
				},
			},
		},
	}}
}

// Op is what one attempt of a VMLoad did.
type Op string

const (
	// OpCreate creates a valid VM (halted).
	OpCreate Op = "create"
	// OpDelete deletes the VM the create before made.
	OpDelete Op = "delete"
	// OpCreateInvalid tries a VM upstream's validator refuses.
	OpCreateInvalid Op = "create-invalid"
)

// Attempt is one request of a VMLoad, with its time and result.
type Attempt struct {
	At   time.Time
	Op   Op
	Name string
	Took time.Duration
	Err  error
}

func (a Attempt) String() string {
	res := "ok"
	if a.Err != nil {
		res = a.Err.Error()
	}
	return fmt.Sprintf("%s %s %s (%s): %s", a.At.Format("15:04:05.000"), a.Op, a.Name, a.Took.Round(time.Millisecond), res)
}

// RefusedByValidator says whether an invalid VM's attempt was refused by
// upstream's validator itself (the webhook answered and denied it), not
// by a webhook that could not be called.
func (a Attempt) RefusedByValidator() bool {
	return a.Op == OpCreateInvalid && a.Err != nil && strings.Contains(a.Err.Error(), InvalidVMValidator) &&
		strings.Contains(a.Err.Error(), "denied the request")
}

// VMLoadOptions shape a VMLoad.
type VMLoadOptions struct {
	// Prefix names the VMs, <Prefix>-<n>.
	Prefix string
	// DryRun sends the creates as dry runs (through every webhook, nothing
	// stored), and nothing else.
	DryRun bool
	// Cycle makes each round a real create of a valid VM, its delete, and
	// an attempt at an invalid VM (which must be refused).
	Cycle bool
	// Interval is the pause between rounds (default 250 ms).
	Interval time.Duration
}

// VMLoad is a client that sends VM requests through the API server (and
// so through virt-api's webhooks, which fail closed) until stopped,
// recording every attempt with its time and result.
type VMLoad struct {
	done     chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	attempts []Attempt
}

// StartVMLoad starts a VMLoad against the suite's cluster.
func (e *Env) StartVMLoad(o VMLoadOptions) *VMLoad {
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	l := &VMLoad{done: make(chan struct{})}
	vms := e.Clients.Dynamic.Resource(VMGVR).Namespace("default")
	do := func(op Op, name string, f func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := f(ctx)
		l.mu.Lock()
		l.attempts = append(l.attempts, Attempt{At: start, Op: op, Name: name, Took: time.Since(start), Err: err})
		l.mu.Unlock()
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-l.done:
				return
			case <-time.After(o.Interval):
			}
			name := fmt.Sprintf("%s-%d", o.Prefix, i)
			if !o.Cycle {
				opts := metav1.CreateOptions{}
				if o.DryRun {
					opts.DryRun = []string{metav1.DryRunAll}
				}
				do(OpCreate, name, func(ctx context.Context) error {
					_, err := vms.Create(ctx, VM(name, "Halted", false), opts)
					return err
				})
				continue
			}
			created := false
			do(OpCreate, name, func(ctx context.Context) error {
				_, err := vms.Create(ctx, VM(name, "Halted", false), metav1.CreateOptions{})
				created = err == nil
				return err
			})
			if created {
				do(OpDelete, name, func(ctx context.Context) error { return vms.Delete(ctx, name, metav1.DeleteOptions{}) })
			}
			bad := name + "-invalid"
			do(OpCreateInvalid, bad, func(ctx context.Context) error {
				_, err := vms.Create(ctx, VM(bad, "Halted", true), metav1.CreateOptions{})
				if err == nil {
					// Accepted: remove it, the record says what happened.
					_ = vms.Delete(context.Background(), bad, metav1.DeleteOptions{})
				}
				return err
			})
		}
	}()
	return l
}

// Stop ends the load and returns every attempt, in order.
func (l *VMLoad) Stop() []Attempt {
	close(l.done)
	l.wg.Wait()
	return l.Attempts()
}

// Attempts returns the attempts so far.
func (l *VMLoad) Attempts() []Attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Attempt(nil), l.attempts...)
}

// VMLoadSummary counts a load's attempts.
type VMLoadSummary struct {
	// Creates and CreatesRefused are the valid VMs' creates and those refused.
	Creates, CreatesRefused int
	// Deletes and DeletesFailed are the deletes of the created VMs.
	Deletes, DeletesFailed int
	// Invalid, InvalidAccepted and InvalidNotByValidator are the invalid
	// VMs' attempts, those accepted, and those refused other than by
	// upstream's validator (a webhook that could not be called).
	Invalid, InvalidAccepted, InvalidNotByValidator int
}

// Summarize counts attempts.
func Summarize(attempts []Attempt) VMLoadSummary {
	var s VMLoadSummary
	for _, a := range attempts {
		switch a.Op {
		case OpCreate:
			s.Creates++
			if a.Err != nil {
				s.CreatesRefused++
			}
		case OpDelete:
			s.Deletes++
			if a.Err != nil {
				s.DeletesFailed++
			}
		case OpCreateInvalid:
			s.Invalid++
			switch {
			case a.Err == nil:
				s.InvalidAccepted++
			case !a.RefusedByValidator():
				s.InvalidNotByValidator++
			}
		}
	}
	return s
}

func (s VMLoadSummary) String() string {
	return fmt.Sprintf("%d valid creates (%d refused), %d deletes (%d failed), %d invalid (%d accepted, %d refused other than by %s)",
		s.Creates, s.CreatesRefused, s.Deletes, s.DeletesFailed, s.Invalid, s.InvalidAccepted, s.InvalidNotByValidator, InvalidVMValidator)
}

// Failures are the attempts that went wrong: a valid create refused, a
// delete failed, an invalid VM accepted or refused other than by upstream's
// validator.
func Failures(attempts []Attempt) []Attempt {
	var out []Attempt
	for _, a := range attempts {
		bad := a.Err != nil
		if a.Op == OpCreateInvalid {
			bad = !a.RefusedByValidator()
		}
		if bad {
			out = append(out, a)
		}
	}
	return out
}

// PrepareFakeNodesForVMs does for kwok's fake nodes what a real
// virt-handler does for its node, so that a VM's virt-launcher pod can be
// scheduled there: labels the node schedulable for VMs (and its machine
// type, as virt-handler's node labeller would), and advertises the devices
// a virt-launcher pod requests (/dev/kvm, tun, vhost-net, which its device
// plugins would) and ephemeral storage.
func (e *Env) PrepareFakeNodesForVMs(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	nodes, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
	if err != nil {
		t.Fatal(err)
	}
	devices := `{"devices.kubevirt.io/kvm":"1k","devices.kubevirt.io/tun":"1k","devices.kubevirt.io/vhost-net":"1k","ephemeral-storage":"100Gi"}`
	for _, n := range nodes.Items {
		patch := []byte(`{"metadata":{"labels":{"kubevirt.io/schedulable":"true","machine-type.node.kubevirt.io/q35":"true"}}}`)
		if _, err := e.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		status := []byte(`{"status":{"capacity":` + devices + `,"allocatable":` + devices + `}}`)
		if _, err := e.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
}
