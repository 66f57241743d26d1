// Package runbooks holds the checks on virtop's runbooks, the Markdown
// files under docs/runbooks at the repository root: one file per alert that
// virtop ships, named after the alert, in the Meaning / Impact / Diagnosis /
// Mitigation form that KubeVirt's own runbooks use. The files live outside
// this directory (Go cannot embed files from a parent directory), so the
// tests read them from the source tree.
package runbooks

// Dir is the runbooks directory, relative to the repository root.
const Dir = "docs/runbooks"

// Sections are the level-two headings every runbook has, in this order and
// no others.
var Sections = []string{"Meaning", "Impact", "Diagnosis", "Mitigation"}
