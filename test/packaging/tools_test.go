//go:build packaging

package packaging

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
)

// requireTool returns a packaging tool's path: skipped under -short, a
// failure naming `make tools-packaging` when missing.
func requireTool(t *testing.T, b toolpaths.Binary) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("packaging tests run %s; skipped under -short (run `make test-packaging`)", b.Name)
	}
	p, err := b.Require()
	if err != nil {
		t.Fatalf("%v (the packaging tools are built by `make tools-packaging`)", err)
	}
	return p
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// run runs a command in the repository root and returns its stdout.
func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot(t)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, errb.String())
	}
	return out.Bytes()
}

// decodeStream decodes a YAML stream into objects, skipping empty
// documents; numbers come out as JSON would give them.
func decodeStream(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]interface{}
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		// Round trip through JSON so that equal values compare equal
		// whatever their Go type.
		b, _ := json.Marshal(m)
		var n map[string]interface{}
		_ = json.Unmarshal(b, &n)
		out = append(out, &unstructured.Unstructured{Object: n})
	}
}

// withoutMakeEnv drops the variables a parent make (`make test-packaging`)
// passes down, so that a child make sees only its own command line.
func withoutMakeEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == "MAKEFLAGS" || name == "MFLAGS" || name == "MAKELEVEL" || name == "MAKEOVERRIDES"
	})
}
