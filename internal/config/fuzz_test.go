package config

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// FuzzFromKubeVirt: any KubeVirt spec gives a config or an error, never a
// panic, and a config it gives survives the JSON round trip the strategy
// Job makes (Parse of its JSON gives the same deployment ID).
func FuzzFromKubeVirt(f *testing.F) {
	f.Add([]byte(`{"imageTag":"v1.9.0"}`))
	f.Add([]byte(`{"imageTag":"v1.8.4","infra":{"replicas":3,"nodePlacement":{"nodeSelector":{"a":"b"}}}}`))
	f.Add([]byte(`{"customizeComponents":{"patches":[{"resourceName":"virt-api","resourceType":"Deployment","type":"json","patch":"[{\"op\":\"remove\",\"path\":\"\"}]"}]}}`))
	f.Add([]byte(`{"configuration":{"developerConfiguration":{"featureGates":["VMExport"]}},"uninstallStrategy":"RemoveWorkloads"}`))
	f.Add([]byte(`{"imageRegistry":"example.com:5000/x","imagePullSecrets":[{"name":"s"}],"productName":"p","productVersion":"1"}`))
	f.Fuzz(func(t *testing.T, spec []byte) {
		kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
		if err := json.Unmarshal(spec, &kv.Spec); err != nil {
			return
		}
		cfg, err := FromKubeVirt(kv, Settings{})
		if err != nil {
			return
		}
		back, err := Parse([]byte(cfg.JSON()))
		if err != nil {
			t.Fatalf("the config of an accepted spec does not parse back: %v\n%s", err, cfg.JSON())
		}
		if back.ID != cfg.ID {
			t.Fatalf("deployment ID %s after the round trip, %s before", back.ID, cfg.ID)
		}
	})
}

// FuzzParse: any bytes parse to a config or an error, never a panic; a
// parsed config parses again to itself.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":"v1.9.0","namespace":"kubevirt","registry":"quay.io/kubevirt"}`))
	f.Add([]byte(`{"id":"0000","version":"v1.5.3"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Parse([]byte(c.JSON()))
		if err != nil || again.ID != c.ID {
			t.Fatalf("a parsed config does not parse again to itself: %v", err)
		}
	})
}
