package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// upward matches a path that climbs (../x, ../../x) in prose or code. The
// docs name paths from the repository's root, so any such path leaves it. A
// quoted value ("../v1.5.3", an input in a table of bad inputs) is not a
// path.
var upward = regexp.MustCompile(`(?:^|[\s\x60<=/])((?:\.\./)+[^\s)\x60"'>]*)`)

// link matches a Markdown link's target.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// pages lists the repository's Markdown files, skipping build output and
// test data (copies of other projects' files).
func pages(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "dist", "bin", "testdata", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// problems returns what is wrong with one page of the repository at dir:
// paths that leave it, relative links to files that do not exist. Links
// resolve from the page's directory, as Markdown renders them; other paths
// from the root.
func problems(dir, page string, text []byte) []string {
	absRoot, _ := filepath.Abs(dir)
	absPage, _ := filepath.Abs(page)
	inside := func(p string) bool {
		rel, err := filepath.Rel(absRoot, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	}
	var out []string
	for i, line := range strings.Split(string(text), "\n") {
		at := "line " + strconv.Itoa(i+1) + ": "
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Join(filepath.Dir(absPage), target)
			if !inside(p) {
				out = append(out, at+"link "+m[1]+" leads outside the repository")
			} else if _, err := os.Stat(p); err != nil {
				out = append(out, at+"link "+m[1]+" leads to no file")
			}
		}
		for _, m := range upward.FindAllStringSubmatch(link.ReplaceAllString(line, "]"), -1) {
			out = append(out, at+m[1]+" is outside the repository")
		}
	}
	return out
}

// TestDocsStayInTheRepository: no Markdown page of the repository names a
// path outside it (a clone has none of them), and its relative links lead
// to files.
func TestDocsStayInTheRepository(t *testing.T) {
	ps := pages(t, root)
	if len(ps) < 10 {
		t.Fatalf("found %d Markdown pages under %s; expected the README, DEVELOPMENT.md and docs/", len(ps), root)
	}
	for _, p := range ps {
		text, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range problems(root, p, text) {
			t.Errorf("%s: %s", strings.TrimPrefix(p, root+"/"), pr)
		}
	}
}

// TestProblemsCatches: the check finds a path that climbs out of the
// repository and a dead link, and passes what stays inside.
func TestProblemsCatches(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "b.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "docs", "a.md")
	for text, want := range map[string]int{
		"see `../shared/design/architecture.md`":                           1,
		"reads ../../etc/passwd":                                           1,
		"<checkout>/../shared/upstream-src":                                1,
		"[b](b.md), [doctor](../docs/b.md#x), [web](https://kubevirt.io/)": 0,
		"[gone](c.md)":               1,
		"[out](../../x.md)":          1,
		`spec.imageTag: "../v1.5.3"`: 0,
	} {
		if got := problems(dir, page, []byte(text)); len(got) != want {
			t.Errorf("%q: %d problems %q, want %d", text, len(got), got, want)
		}
	}
}
