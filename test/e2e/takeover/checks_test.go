package takeover

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// errors is a testing.TB that records Errorf and drops Logf; any other
// method panics.
type errors struct {
	testing.TB
	msgs []string
}

func (e *errors) Helper()             {}
func (e *errors) Logf(string, ...any) {}
func (e *errors) Errorf(format string, args ...any) {
	e.msgs = append(e.msgs, fmt.Sprintf(format, args...))
}

// TestSnapshotChecks: the checks of the switch find an object replaced or
// gone, a workload rolled and a certificate re-issued, and find nothing
// when nothing changed. (They run in make test: no cluster needed.)
func TestSnapshotChecks(t *testing.T) {
	before := snapshot{
		uids:      map[string]types.UID{"Service kubevirt/virt-api": "1", "Secret kubevirt/kubevirt-ca": "2", "ConfigMap kubevirt/kubevirt-ca": "3"},
		labels:    map[string]string{},
		certs:     map[string]string{"kubevirt-ca": "10", "kubevirt-virt-api-certs": "11"},
		revisions: map[string]int{"Deployment virt-api": 1, "DaemonSet virt-handler": 1},
	}
	kept := snapshot{
		uids:      map[string]types.UID{"Service kubevirt/virt-api": "1", "Secret kubevirt/kubevirt-ca": "2", "ConfigMap kubevirt/kubevirt-ca": "3"},
		labels:    map[string]string{"Service kubevirt/virt-api": vocab.ManagedByValue, "Secret kubevirt/kubevirt-ca": vocab.ManagedByValue, "ConfigMap kubevirt/kubevirt-ca": vocab.UpstreamManagedByValue},
		certs:     map[string]string{"kubevirt-ca": "10", "kubevirt-virt-api-certs": "11"},
		revisions: map[string]int{"Deployment virt-api": 1, "DaemonSet virt-handler": 1},
	}
	e := &errors{}
	virtops, upstreams := checkSameUIDs(e, before, kept, "the switch")
	checkNoRollout(e, before.revisions, kept.revisions, "the switch")
	checkCertificatesKept(e, before.certs, kept.certs, "the switch")
	if len(e.msgs) > 0 || virtops != 2 || len(upstreams) != 1 {
		t.Errorf("nothing changed: %d errors %q, %d virtop's, upstream's %v; want none, 2, [ConfigMap kubevirt/kubevirt-ca]", len(e.msgs), e.msgs, virtops, upstreams)
	}

	changed := snapshot{
		uids:      map[string]types.UID{"Service kubevirt/virt-api": "9", "Secret kubevirt/kubevirt-ca": "2"},
		labels:    map[string]string{"Service kubevirt/virt-api": vocab.ManagedByValue, "Secret kubevirt/kubevirt-ca": vocab.ManagedByValue},
		certs:     map[string]string{"kubevirt-ca": "10", "kubevirt-virt-api-certs": "12"},
		revisions: map[string]int{"Deployment virt-api": 1, "DaemonSet virt-handler": 2},
	}
	e = &errors{}
	checkSameUIDs(e, before, changed, "the switch")
	checkNoRollout(e, before.revisions, changed.revisions, "the switch")
	checkCertificatesKept(e, before.certs, changed.certs, "the switch")
	for _, want := range []string{
		"ConfigMap kubevirt/kubevirt-ca: upstream's object is gone",
		"Service kubevirt/virt-api was recreated during the switch (UID 1 → 9)",
		"DaemonSet virt-handler rolled during the switch: revision 1 → 2",
		"1 of 2 certificates re-issued (or gone) during the switch: kubevirt-virt-api-certs",
	} {
		found := false
		for _, m := range e.msgs {
			found = found || strings.HasPrefix(m, want)
		}
		if !found {
			t.Errorf("no error %q among %q", want, e.msgs)
		}
	}
	if len(e.msgs) != 4 {
		t.Errorf("%d errors, want 4: %q", len(e.msgs), e.msgs)
	}
}
