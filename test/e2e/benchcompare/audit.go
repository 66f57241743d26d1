// Package benchcompare compares upstream KubeVirt's own virt-operator with
// virtop's operator on fresh local clusters with the real node (issue 33):
// the benchmark itself is built only with the tag bench (`make
// bench-compare`); this file and report.go hold its pure helpers, the
// audit-log counting and the report, unit-tested in CI.
package benchcompare

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// AuditPolicy is an audit.k8s.io/v1 Policy that records the requests of
// users at level Metadata (without their RequestReceived stage) and
// nothing else.
func AuditPolicy(users ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n")
	if len(users) > 0 {
		b.WriteString("- level: Metadata\n  users:\n")
		for _, u := range users {
			fmt.Fprintf(&b, "  - %q\n", u)
		}
	}
	b.WriteString("- level: None\n")
	return b.String()
}

// AuditEvent is the part of an audit event (audit.k8s.io/v1 Event, one
// JSON line of the log) the counts need.
type AuditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ReadAudit parses an audit log of JSON lines into one event per request:
// a request logged at several stages (a watch: ResponseStarted, then
// ResponseComplete when it ends) is kept once, at its first line.
func ReadAudit(r io.Reader) ([]AuditEvent, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	seen := map[string]bool{}
	var out []AuditEvent
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var ev AuditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %d: %w", n, err)
		}
		if ev.AuditID != "" {
			if seen[ev.AuditID] {
				continue
			}
			seen[ev.AuditID] = true
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// isWrite says whether an audited request writes, as bench-e2e counts
// the operator's own requests (framework.IsWrite: a review is a create that
// stores nothing), with the resource named as the operator's metrics name
// it (<resource>.<group>, core resources bare).
func isWrite(verb, resource, group string) bool {
	if group != "" {
		resource += "." + group
	}
	return framework.IsWrite(verb, resource)
}

// Counts are the requests of a time window.
type Counts struct {
	Requests int            `json:"requests"`
	Writes   int            `json:"writes"`
	ByVerb   map[string]int `json:"byVerb,omitempty"`
	// ByResource counts by "verb resource[/subresource]".
	ByResource map[string]int `json:"byResource,omitempty"`
}

// String is "N requests (W writes; verb n, ...)".
func (c Counts) String() string {
	verbs := make([]string, 0, len(c.ByVerb))
	for v := range c.ByVerb {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	parts := make([]string, len(verbs))
	for i, v := range verbs {
		parts[i] = fmt.Sprintf("%s %d", v, c.ByVerb[v])
	}
	return fmt.Sprintf("%d requests (%d writes; %s)", c.Requests, c.Writes, strings.Join(parts, ", "))
}

// Count counts the events of users received in [from, to).
func Count(events []AuditEvent, users []string, from, to time.Time) Counts {
	c := Counts{ByVerb: map[string]int{}, ByResource: map[string]int{}}
	for _, ev := range events {
		if !contains(users, ev.User.Username) || ev.RequestReceivedTimestamp.Before(from) || !ev.RequestReceivedTimestamp.Before(to) {
			continue
		}
		c.Requests++
		c.ByVerb[ev.Verb]++
		res, group := "(no object)", ""
		if o := ev.ObjectRef; o != nil {
			res, group = o.Resource, o.APIGroup
			if o.Subresource != "" {
				res += "/" + o.Subresource
			}
		}
		c.ByResource[ev.Verb+" "+res]++
		if isWrite(ev.Verb, res, group) {
			c.Writes++
		}
	}
	return c
}

// LeaseWrites are the writes to Leases among the counts (an operator's
// leader election renews one every few seconds).
func (c Counts) LeaseWrites() int {
	n := 0
	for k, v := range c.ByResource {
		verb, res, _ := strings.Cut(k, " ")
		if res == "leases" && isWrite(verb, res, "coordination.k8s.io") {
			n += v
		}
	}
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
