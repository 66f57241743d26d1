package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// HandlerTLSFinal says whether the live virt-handler runs the final form
// of the staged TLS rollout (--migration-cn-types migration, no old client
// certificate volume) and has rolled it out; the message says where it
// stands.
func HandlerTLSFinal(ctx context.Context, c client.Client) (bool, string) {
	ds := &appsv1.DaemonSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: vocab.VirtHandler}, ds); err != nil {
		return false, err.Error()
	}
	ctr := ds.Spec.Template.Spec.Containers[0]
	args := strings.Join(ctr.Args, " ") + " " + strings.Join(ctr.Command, " ")
	flag := strings.Contains(args, plan.MigrationCNTypesFlag+" "+plan.MigrationCNTypesValue) || strings.Contains(args, plan.MigrationCNTypesFlag+"="+plan.MigrationCNTypesValue)
	oldVolume := slices.ContainsFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == plan.OldHandlerClientCertVolume })
	st := ds.Status
	rolled := st.ObservedGeneration >= ds.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled
	return flag && !oldVolume && rolled, fmt.Sprintf("flag %v, old volume %v, generation %d observed %d, updated %d available %d of %d",
		flag, oldVolume, ds.Generation, st.ObservedGeneration, st.UpdatedNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled)
}

// StoredVersions is the live CRD's status.storedVersions.
func StoredVersions(t testing.TB, c client.Client, name string) []string {
	t.Helper()
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	return live.Status.StoredVersions
}
