package strategy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/vocab"
)

const signaturePrefix = "hmac-sha256:"

// MinSigningKeyLen is the shortest key Sign and CheckSignature take.
const MinSigningKeyLen = 32

// ErrUnsigned is the error of CheckSignature for a ConfigMap without a
// signature (for example one a person or another program wrote).
var ErrUnsigned = errors.New("it carries no " + vocab.StrategySignatureAnnotation + " annotation, so virtop's strategy Job did not write it")

// Sign sets the ConfigMap's signature annotation: an HMAC-SHA256, with
// key, of its namespace, name, the strategy annotations and the
// manifests, so that none of them can change without the signature
// failing.
func Sign(cm *corev1.ConfigMap, key []byte) error {
	if len(key) < MinSigningKeyLen {
		return fmt.Errorf("the strategy signing key has %d bytes, fewer than %d", len(key), MinSigningKeyLen)
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[vocab.StrategySignatureAnnotation] = signaturePrefix + hex.EncodeToString(mac(cm, key))
	return nil
}

// CheckSignature says whether the ConfigMap's signature is the one Sign
// gives with key. It reads nothing of the manifests beyond hashing them,
// so a ConfigMap that fails is never decoded.
func CheckSignature(cm *corev1.ConfigMap, key []byte) error {
	if len(key) < MinSigningKeyLen {
		return fmt.Errorf("the strategy signing key has %d bytes, fewer than %d", len(key), MinSigningKeyLen)
	}
	sig, ok := cm.Annotations[vocab.StrategySignatureAnnotation]
	if !ok {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(strings.TrimPrefix(sig, signaturePrefix))
	if !strings.HasPrefix(sig, signaturePrefix) || err != nil {
		return fmt.Errorf("its %s annotation is not %s<hex>", vocab.StrategySignatureAnnotation, signaturePrefix)
	}
	if !hmac.Equal(got, mac(cm, key)) {
		return errors.New("its signature does not match its content: it was changed after virtop's strategy Job wrote it, or signed with another key")
	}
	return nil
}

// mac hashes every signed field length-prefixed, so that no two different
// field lists hash alike.
func mac(cm *corev1.ConfigMap, key []byte) []byte {
	h := hmac.New(sha256.New, key)
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field("virtop strategy ConfigMap v1")
	field(cm.Namespace)
	field(cm.Name)
	for _, a := range []string{
		vocab.InstallStrategyVersionAnnotation,
		vocab.InstallStrategyRegistryAnnotation,
		vocab.InstallStrategyIdentifierAnnotation,
		vocab.InstallStrategyEncodingAnnotation,
	} {
		// Absent and empty differ.
		if v, ok := cm.Annotations[a]; ok {
			field("1" + v)
		} else {
			field("0")
		}
	}
	field(cm.Data[vocab.ManifestsKey])
	return h.Sum(nil)
}
