package strategy

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestSignature(t *testing.T) {
	key := []byte(strings.Repeat("k", MinSigningKeyLen))
	good, err := generateFor(t, nil).ConfigMap("kubevirt")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSignature(good, key); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("unsigned ConfigMap: %v, want ErrUnsigned", err)
	}
	if err := Sign(good, key); err != nil {
		t.Fatal(err)
	}
	if err := CheckSignature(good, key); err != nil {
		t.Fatalf("the signed ConfigMap: %v", err)
	}
	if err := Sign(good.DeepCopy(), key[:MinSigningKeyLen-1]); err == nil {
		t.Error("Sign took a short key")
	}
	// Every signed field, changed, fails the check; so does another key.
	cases := map[string]func(*corev1.ConfigMap) []byte{
		"manifests": func(cm *corev1.ConfigMap) []byte { cm.Data[vocab.ManifestsKey] += "A"; return key },
		"version": func(cm *corev1.ConfigMap) []byte {
			cm.Annotations[vocab.InstallStrategyVersionAnnotation] = "v1.9.1"
			return key
		},
		"registry": func(cm *corev1.ConfigMap) []byte {
			cm.Annotations[vocab.InstallStrategyRegistryAnnotation] = "evil.example"
			return key
		},
		"identifier": func(cm *corev1.ConfigMap) []byte {
			cm.Annotations[vocab.InstallStrategyIdentifierAnnotation] += "0"
			return key
		},
		"encoding removed": func(cm *corev1.ConfigMap) []byte {
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			return key
		},
		"namespace": func(cm *corev1.ConfigMap) []byte { cm.Namespace = "other"; return key },
		"name":      func(cm *corev1.ConfigMap) []byte { cm.Name += "x"; return key },
		"garbled signature": func(cm *corev1.ConfigMap) []byte {
			cm.Annotations[vocab.StrategySignatureAnnotation] = "sha1:00"
			return key
		},
		"another key": func(*corev1.ConfigMap) []byte { return []byte(strings.Repeat("j", MinSigningKeyLen)) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cm := good.DeepCopy()
			k := mutate(cm)
			if err := CheckSignature(cm, k); err == nil {
				t.Fatal("the check passed")
			}
		})
	}
}
