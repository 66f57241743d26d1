package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// JSONReport is the stable JSON schema of `virtop doctor -o json`.
type JSONReport struct {
	Verdict Verdict `json:"verdict"`
	// Reason explains the verdict (the broken links, what could not be
	// read).
	Reason    string  `json:"reason"`
	Context   string  `json:"context"`
	Server    string  `json:"server"`
	Namespace string  `json:"namespace"`
	Checks    []Check `json:"checks"`
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	checks := r.Checks
	if checks == nil {
		checks = []Check{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(JSONReport{
		Verdict: r.Verdict, Reason: r.Reason,
		Context: r.Where.Context, Server: r.Where.Server, Namespace: r.Where.Namespace,
		Checks: checks,
	})
}

// WriteText writes the report for people: where doctor looked, the
// verdict, the failing checks with their next commands, then the rest.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	ctx := r.Where.Context
	if ctx == "" {
		ctx = "(none: in-cluster or default config)"
	}
	fmt.Fprintf(&b, "Context:    %s\n", ctx)
	fmt.Fprintf(&b, "API server: %s\n", r.Where.Server)
	fmt.Fprintf(&b, "Namespace:  %s\n", r.Where.Namespace)
	if r.Where.PrometheusURL != "" {
		fmt.Fprintf(&b, "Prometheus: %s\n", r.Where.PrometheusURL)
	} else {
		fmt.Fprintf(&b, "Prometheus: not queried (pass --prometheus-url to check targets, rules and alerts)\n")
	}
	fmt.Fprintf(&b, "\nVerdict: %s\n", r.Verdict)
	fmt.Fprintf(&b, "  %s\n", r.Reason)

	var problems, rest []Check
	for _, c := range r.Checks {
		if c.Status == Fail || c.Status == Warn {
			problems = append(problems, c)
		} else {
			rest = append(rest, c)
		}
	}
	// Failures first, then warnings, each in check order.
	ordered := make([]Check, 0, len(problems))
	for _, want := range []Status{Fail, Warn} {
		for _, c := range problems {
			if c.Status == want {
				ordered = append(ordered, c)
			}
		}
	}
	if len(ordered) > 0 {
		b.WriteString("\nProblems:\n")
		for _, c := range ordered {
			writeCheck(&b, c)
		}
	}
	if len(rest) > 0 {
		b.WriteString("\nOther checks:\n")
		for _, c := range rest {
			writeCheck(&b, c)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeCheck(b *strings.Builder, c Check) {
	fmt.Fprintf(b, "  %-4s %s: %s\n", label(c.Status), c.Name, c.Evidence)
	if c.Hint != "" {
		fmt.Fprintf(b, "       next: %s\n", c.Hint)
	}
}

func label(s Status) string {
	switch s {
	case Fail:
		return "FAIL"
	case Warn:
		return "WARN"
	case Skipped:
		return "skip"
	default:
		return "ok"
	}
}
