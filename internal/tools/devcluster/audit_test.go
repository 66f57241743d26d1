package devcluster

import (
	"strings"
	"testing"
)

// TestAuditLogOptIn: the API server writes an audit log only for a cluster
// given an AuditPolicy; otherwise its flags are as before.
func TestAuditLogOptIn(t *testing.T) {
	c, err := NewAt("audit", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.componentPatches(); strings.Contains(p, "audit-") {
		t.Errorf("a cluster without an AuditPolicy has audit flags:\n%s", p)
	}
	c.AuditPolicy = "/some/policy.yaml"
	p := c.componentPatches()
	for _, want := range []string{
		"  - key: audit-policy-file\n    value: \"/some/policy.yaml\"\n",
		"  - key: audit-log-path\n    value: \"" + c.AuditLog() + "\"\n",
		"  - key: audit-log-format\n    value: \"json\"\n",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("componentsPatches lack %q:\n%s", want, p)
		}
	}
	// On kube-apiserver, not another component.
	api := p[strings.Index(p, "- name: "+ComponentKubeAPIServer):]
	if next := strings.Index(api[1:], "- name: "); next > 0 {
		api = api[:next+1]
	}
	if !strings.Contains(api, "audit-policy-file") {
		t.Errorf("the audit flags are not kube-apiserver's:\n%s", p)
	}
}
