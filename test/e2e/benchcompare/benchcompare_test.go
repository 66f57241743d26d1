package benchcompare

import (
	"math"
	"strings"
	"testing"
	"time"
)

const sa = "system:serviceaccount:kubevirt:kubevirt-operator"

func TestAuditPolicy(t *testing.T) {
	p := AuditPolicy(sa)
	for _, want := range []string{"kind: Policy", "omitStages: [RequestReceived]", "- level: Metadata\n  users:\n  - \"" + sa + "\"", "- level: None\n"} {
		if !strings.Contains(p, want) {
			t.Errorf("policy lacks %q:\n%s", want, p)
		}
	}
	// None must come last: the first matching rule wins.
	if strings.Index(p, "level: None") < strings.Index(p, "level: Metadata") {
		t.Errorf("level None before the operator's rule:\n%s", p)
	}
}

func TestReadAuditAndCount(t *testing.T) {
	log := `{"auditID":"a","stage":"ResponseComplete","verb":"get","user":{"username":"` + sa + `"},"objectRef":{"resource":"kubevirts"},"requestReceivedTimestamp":"2026-01-01T00:00:01.000000Z"}
{"auditID":"w","stage":"ResponseStarted","verb":"watch","user":{"username":"` + sa + `"},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}
{"auditID":"b","stage":"ResponseComplete","verb":"patch","user":{"username":"` + sa + `"},"requestReceivedTimestamp":"2026-01-01T00:00:03.000000Z"}

{"auditID":"c","stage":"ResponseComplete","verb":"create","user":{"username":"someone-else"},"requestReceivedTimestamp":"2026-01-01T00:00:03.500000Z"}
{"auditID":"d","stage":"ResponseComplete","verb":"deletecollection","user":{"username":"` + sa + `"},"requestReceivedTimestamp":"2026-01-01T00:00:04.000000Z"}
{"auditID":"w","stage":"ResponseComplete","verb":"watch","user":{"username":"` + sa + `"},"requestReceivedTimestamp":"2026-01-01T00:00:02.000000Z"}
{"auditID":"e","stage":"ResponseComplete","verb":"update","user":{"username":"` + sa + `"},"requestReceivedTimestamp":"2026-01-01T00:00:05.000000Z"}
`
	evs, err := ReadAudit(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 6 {
		t.Fatalf("%d events, want 6 (the watch once)", len(evs))
	}
	at := func(s int) time.Time { return time.Date(2026, 1, 1, 0, 0, s, 0, time.UTC) }
	// [1s, 5s): get, watch, patch, deletecollection; not the other user's
	// create, not the update at 5s.
	c := Count(evs, []string{sa}, at(1), at(5))
	if c.Requests != 4 || c.Writes != 2 || c.ByVerb["watch"] != 1 || c.ByVerb["create"] != 0 {
		t.Errorf("Count = %s, want 4 requests, 2 writes (patch, deletecollection), 1 watch", c)
	}
	lease := Counts{Writes: 9, ByResource: map[string]int{"update leases": 6, "get leases": 4, "patch services": 3}}
	if n := lease.LeaseWrites(); n != 6 {
		t.Errorf("LeaseWrites = %d, want 6 (the updates, not the gets)", n)
	}
	if c.ByResource["get kubevirts"] != 1 || c.ByResource["patch (no object)"] != 1 {
		t.Errorf("Count by resource = %v", c.ByResource)
	}
	if c := Count(evs, []string{sa}, at(6), at(9)); c.Requests != 0 {
		t.Errorf("an empty window counts %s", c)
	}
	if _, err := ReadAudit(strings.NewReader("{not json\n")); err == nil {
		t.Error("a broken line was accepted")
	}
}

// TestIsWrite: the write verbs write, reads do not, and a TokenReview is a
// create that stores nothing (as bench-e2e counts them).
func TestIsWrite(t *testing.T) {
	for verb, want := range map[string]bool{"create": true, "update": true, "patch": true, "delete": true, "deletecollection": true, "get": false, "list": false, "watch": false} {
		if isWrite(verb, "secrets", "") != want {
			t.Errorf("isWrite(%s secrets) = %v", verb, !want)
		}
	}
	if isWrite("create", "tokenreviews", "authentication.k8s.io") {
		t.Error("a TokenReview counted as a write")
	}
	if !isWrite("update", "leases", "coordination.k8s.io") {
		t.Error("a Lease renewal not counted as a write")
	}
}

func TestMedianRatioOrder(t *testing.T) {
	if m := Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("Median odd = %v", m)
	}
	if m := Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("Median even = %v", m)
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing is not NaN")
	}
	if r := Ratio(1, 4); r != "0.25×" {
		t.Errorf("Ratio = %s", r)
	}
	if r := Ratio(1, 0); r != "–" {
		t.Errorf("Ratio over 0 = %s", r)
	}
	got := strings.Join(Order(2), " ")
	if got != "upstream virtop virtop upstream" {
		t.Errorf("Order(2) = %s", got)
	}
}

func TestMarkdown(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rep := Report{Machine: "2 CPUs", RunsEach: 1, IdleSeconds: 60, PromBound: "2m0s", From: "v1.8.4", To: "v1.9.0",
		Runs: []Run{
			{Operator: Upstream, N: 1, Available: f(100), Install: &Counts{Requests: 40, Writes: 10}, PrometheusNote: "not within 2m", Upgrade: f(300),
				Idle: &Counts{Requests: 20, Writes: 9, ByResource: map[string]int{"update leases": 6, "patch services": 3}}},
			{Operator: Virtop, N: 2, Available: f(50), Install: &Counts{Requests: 10, Writes: 5}, Prometheus: f(1.5), Error: "boom | bang"},
			{Operator: Virtop, N: 3, Available: f(70), Install: &Counts{Requests: 12, Writes: 7}, Prometheus: f(2.5)},
		},
		Notes: []string{"a note"}}
	md := rep.Markdown()
	for _, want := range []string{
		"| KubeVirt created → Available (s) | 100.0 | 60.0 | 0.60× |",
		"| API requests, created → Available | 40 | 11 | 0.28× |",
		"| operator RSS after the idle window (MiB) | – | – | – |",
		"| KubeVirt created → Available (s) | 100.0 | 50.0, 70.0 |",
		"| API writes, idle 60s after Available | 9 | – | – |",
		"| API writes, idle 60s after Available, leader-election leases left out | 3 | – | – |",
		"| Prometheus created → ServiceMonitor and PrometheusRule selected (s) | not within 2m | 2.0 | – |",
		"| Prometheus created → ServiceMonitor and PrometheusRule selected (s) | not within 2m | 1.5, 2.5 |",
		"| upgrade v1.8.4 → v1.9.0 → Available, rolled out (s) | 300.0 | – | – |",
		"**stopped early**: boom \\| bang",
		"- a note",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestProcessMatching(t *testing.T) {
	uid := "0b6f1c2e-1111-2222-3333-444455556666"
	if !InPod("4:memory:/virtop-node/kubepods/besteffort/pod"+uid+"/abc\n", uid) {
		t.Error("cgroupfs path not matched")
	}
	if !InPod("0::/kubepods.slice/kubepods-pod"+strings.ReplaceAll(uid, "-", "_")+".slice/cri-containerd-abc.scope\n", uid) {
		t.Error("systemd path not matched")
	}
	if InPod("4:memory:/kubepods/podffffffff-1111-2222-3333-444455556666/abc\n", uid) || InPod("4:memory:/kubepods/podabc/x\n", "") {
		t.Error("another pod matched")
	}
	for _, c := range []struct {
		op   string
		argv []string
		want bool
	}{
		{Upstream, []string{"virt-operator", "--port", "8443"}, true},
		{Upstream, []string{"/usr/bin/virt-operator"}, true},
		{Upstream, []string{"/pause"}, false},
		{Virtop, []string{"/virtop", "operator", "--leader-elect"}, true},
		{Virtop, []string{"/virtop", "doctor"}, false},
		{Virtop, []string{"/pause"}, false},
		{Virtop, nil, false},
	} {
		if got := IsOperatorCmdline(c.op, c.argv); got != c.want {
			t.Errorf("IsOperatorCmdline(%s, %q) = %v", c.op, c.argv, got)
		}
	}
	rss, hwm, err := Memory("Name:\tvirt-operator\nVmHWM:\t  81234 kB\nVmRSS:\t   61234 kB\n")
	if err != nil || rss != 61234 || hwm != 81234 {
		t.Errorf("Memory = %v, %v, %v", rss, hwm, err)
	}
	if _, _, err := Memory("Name:\tx\nVmRSS:\t1 kB\n"); err == nil {
		t.Error("a status without VmHWM was accepted")
	}
}
