package doctor

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestDocListsEveryCheck holds docs/doctor.md and the code together: a
// heading "### `<name>`" for every check of CheckNames, in its order, and
// none for a check the code does not have.
func TestDocListsEveryCheck(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "doctor.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^### `([^`]+)`$").FindAllStringSubmatch(string(raw), -1) {
		documented = append(documented, m[1])
	}
	names := CheckNames()
	for i := 0; i < len(names) || i < len(documented); i++ {
		var code, doc string
		if i < len(names) {
			code = names[i]
		}
		if i < len(documented) {
			doc = documented[i]
		}
		if code != doc {
			t.Fatalf("check %d: the code has %q, docs/doctor.md %q (code %v, doc %v)", i, code, doc, names, documented)
		}
	}
}
