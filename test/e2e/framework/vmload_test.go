package framework

import (
	"errors"
	"testing"
	"time"
)

// TestVMLoadJudgesEachAttempt: a valid create or a delete that failed is a
// failure; an invalid VM is right only when upstream's validator itself
// denied it — accepted, or refused because its webhook could not be
// called, is a failure.
func TestVMLoadJudgesEachAttempt(t *testing.T) {
	at := time.Unix(0, 0)
	denied := errors.New(`admission webhook "` + InvalidVMValidator + `" denied the request: spec.template.spec.domain.devices.disks[1].name 'orphan' not found.`)
	unreachable := errors.New(`Internal error occurred: failed calling webhook "` + InvalidVMValidator + `": failed to call webhook: Post "https://virt-api.kubevirt.svc:443/...": dial tcp 10.0.0.1:443: connect: connection refused`)
	refused := errors.New(`Internal error occurred: failed calling webhook "virtualmachines-mutator.kubevirt.io": context deadline exceeded`)
	attempts := []Attempt{
		{At: at, Op: OpCreate, Name: "a-0"},
		{At: at, Op: OpDelete, Name: "a-0"},
		{At: at, Op: OpCreateInvalid, Name: "a-0-invalid", Err: denied},
		{At: at, Op: OpCreate, Name: "a-1", Err: refused},
		{At: at, Op: OpCreateInvalid, Name: "a-1-invalid", Err: unreachable},
		{At: at, Op: OpCreate, Name: "a-2"},
		{At: at, Op: OpDelete, Name: "a-2", Err: errors.New("timeout")},
		{At: at, Op: OpCreateInvalid, Name: "a-2-invalid"},
	}
	got := Summarize(attempts)
	want := VMLoadSummary{Creates: 3, CreatesRefused: 1, Deletes: 2, DeletesFailed: 1, Invalid: 3, InvalidAccepted: 1, InvalidNotByValidator: 1}
	if got != want {
		t.Errorf("Summarize:\n got %s\nwant %s", got, want)
	}
	var names []string
	for _, a := range Failures(attempts) {
		names = append(names, string(a.Op)+" "+a.Name)
	}
	wantNames := []string{"create a-1", "create-invalid a-1-invalid", "delete a-2", "create-invalid a-2-invalid"}
	if len(names) != len(wantNames) {
		t.Fatalf("Failures: %q, want %q", names, wantNames)
	}
	for i := range names {
		if names[i] != wantNames[i] {
			t.Errorf("Failures: %q, want %q", names, wantNames)
			break
		}
	}
}
