package config

import (
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/version"
)

// TestRunbookURLTemplateFor: a released virtop links the runbooks of its
// tag, any other build those of main.
func TestRunbookURLTemplateFor(t *testing.T) {
	const base = "https://github.com/virtop-dev/virtop/blob/"
	for v, ref := range map[string]string{
		"v0.3.1":              "v0.3.1",
		"v1.0.0-rc.2":         "v1.0.0-rc.2",
		"v0.1.0-dev":          "main",
		"v0.3.1-4-gabcdef0":   "main",
		"v0.3.1-dirty":        "main",
		"abcdef0":             "main",
		"":                    "main",
		"v0.3.1/../../../etc": "main",
	} {
		if got, want := RunbookURLTemplateFor(v), base+ref+"/docs/runbooks/%s.md"; got != want {
			t.Errorf("version %q: %s, want %s", v, got, want)
		}
	}
	if want := RunbookURLTemplateFor(version.Version); DefaultRunbookURLTemplate != want || !strings.Contains(want, "%s") {
		t.Errorf("default %s, want the template of this build (%s)", DefaultRunbookURLTemplate, want)
	}
}
