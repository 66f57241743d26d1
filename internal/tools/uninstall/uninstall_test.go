package uninstall

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

const finalizer = "test.virtop.dev/operator"

func create(t *testing.T, c client.Client, ns string) *kvv1.KubeVirt {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt", Finalizers: []string{finalizer}}}
	if err := c.Create(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestRunWaitsForTheOperator: the resource is deleted, Run waits while its
// finalizer holds it (the operator removing the control plane) and returns
// once it is gone.
func TestRunWaitsForTheOperator(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	kv := create(t, env.Client, ns)
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- Run(context.Background(), env.Client, &out, Options{Namespace: ns, Timeout: 2 * time.Minute, Every: time.Second})
	}()
	// The "operator": once the deletion is requested, let the resource go.
	deadline := time.Now().Add(time.Minute)
	for {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(kv), kv); err != nil {
			t.Fatal(err)
		}
		if kv.DeletionTimestamp != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not delete the KubeVirt resource")
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Run returned %v while the finalizer still holds the resource", err)
	case <-time.After(2 * time.Second):
	}
	kv.Finalizers = nil
	if err := env.Client.Update(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after the resource was gone")
	}
	if !strings.Contains(out.String(), "No KubeVirt resource is left in "+ns) {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestRunTimesOut: with nobody removing the finalizer Run gives up and
// says what holds the resource.
func TestRunTimesOut(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	kv := create(t, env.Client, ns)
	t.Cleanup(func() {
		kv.Finalizers = nil
		_ = env.Client.Update(context.Background(), kv)
	})
	err := Run(context.Background(), env.Client, &bytes.Buffer{}, Options{Namespace: ns, Timeout: 3 * time.Second})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), finalizer) {
		t.Fatalf("Run: %v, want ErrTimeout naming the finalizer %s", err, finalizer)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(kv), kv); err != nil || kv.DeletionTimestamp == nil {
		t.Fatalf("the resource: %v, deletion %v", err, kv.DeletionTimestamp)
	}
}

func TestRunWithNothingToDelete(t *testing.T) {
	env := testenv.Get(t)
	var out bytes.Buffer
	if err := Run(context.Background(), env.Client, &out, Options{Namespace: env.Namespace(t), Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to delete") {
		t.Errorf("output: %s", out.String())
	}
}
