package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// JSONReport is the stable JSON schema of `virtop doctor -o json`,
// documented in docs/doctor.md. Fields are only ever added.
type JSONReport struct {
	Verdict Verdict `json:"verdict"`
	// Reason explains the verdict in full: the headline, the likely
	// causes, the upgrade line and the VM line.
	Reason string `json:"reason"`
	// Headline is the verdict's own reason.
	Headline string  `json:"headline"`
	Causes   []Cause `json:"causes"`
	// Upgrade is the upgrade line ("" when no update is in progress).
	Upgrade string  `json:"upgrade"`
	VMs     JSONVMs `json:"vms"`

	// Where doctor looked.
	Kubeconfig       string   `json:"kubeconfig"`
	KubeconfigFiles  []string `json:"kubeconfigFiles"`
	KubeconfigSource string   `json:"kubeconfigSource"`
	Context          string   `json:"context"`
	ContextSource    string   `json:"contextSource"`
	Server           string   `json:"server"`
	User             string   `json:"user"`
	Namespace        string   `json:"namespace"`
	// Prometheus is the Prometheus asked; null when none was.
	Prometheus *PromSource `json:"prometheus"`

	Checks []Check `json:"checks"`
}

// JSONVMs are the VM counts of the verdict.
type JSONVMs struct {
	// Line is the verdict's VM line.
	Line          string         `json:"line"`
	VMIs          int            `json:"vmis"`
	Running       int            `json:"running"`
	ByPhase       map[string]int `json:"byPhase"`
	RunningByNode map[string]int `json:"runningByNode"`
}

// JSON is the report in its JSON schema.
func (r *Report) JSON() JSONReport {
	checks := r.Checks
	if checks == nil {
		checks = []Check{}
	}
	causes := r.Causes
	if causes == nil {
		causes = []Cause{}
	}
	files := r.Where.KubeconfigFiles
	if files == nil {
		files = []string{}
	}
	nonNil := func(m map[string]int) map[string]int {
		if m == nil {
			return map[string]int{}
		}
		return m
	}
	return JSONReport{
		Verdict: r.Verdict, Reason: r.Reason, Headline: r.Headline, Causes: causes, Upgrade: r.Upgrade,
		VMs: JSONVMs{Line: r.VMs, VMIs: r.Workloads.VMIs, Running: r.Workloads.VMIsRunning,
			ByPhase: nonNil(r.Workloads.ByPhase), RunningByNode: nonNil(r.Workloads.RunningByNode)},
		Kubeconfig: r.Where.KubeconfigFile, KubeconfigFiles: files, KubeconfigSource: r.Where.KubeconfigSource,
		Context: r.Where.Context, ContextSource: r.Where.ContextSource, Server: r.Where.Server, User: r.Where.User,
		Namespace:  r.Where.Namespace,
		Prometheus: r.Prometheus,
		Checks:     checks,
	}
}

// WriteJSON writes the report as JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.JSON())
}

// Header is the first lines of the text report: which kubeconfig file,
// context, API server, user and namespace doctor looked at, and which
// Prometheus it asked. Every field is Printable.
func (r *Report) Header() string {
	var b strings.Builder
	w := r.Where
	p := Printable
	switch {
	case w.ContextSource == ContextInCluster:
		b.WriteString("Kubeconfig: none: in-cluster configuration\n")
	default:
		file := w.KubeconfigFile
		if file == "" {
			file = strings.Join(w.KubeconfigFiles, ":")
		}
		if file == "" {
			file = "(not known)"
		}
		from := ""
		switch w.KubeconfigSource {
		case KubeconfigFromFlag:
			from = " (--kubeconfig)"
		case KubeconfigFromEnv:
			from = " (from $KUBECONFIG"
			if len(w.KubeconfigFiles) > 1 {
				from += ": " + strings.Join(w.KubeconfigFiles, ":")
			}
			from += ")"
		case KubeconfigFromDefault:
			from = " (the default file)"
		}
		fmt.Fprintf(&b, "Kubeconfig: %s%s\n", p(file), p(from))
	}
	switch w.ContextSource {
	case ContextFromFlag:
		fmt.Fprintf(&b, "Context:    %s (--context)\n", p(w.Context))
	case ContextFromCurrent:
		fmt.Fprintf(&b, "Context:    %s (only the kubeconfig's current-context: no --context given; pass --context %s to be sure of the cluster)\n", p(w.Context), p(w.Context))
	case ContextInCluster:
		fmt.Fprintf(&b, "Context:    (none: in-cluster configuration)\n")
	default:
		fmt.Fprintf(&b, "Context:    %s\n", p(w.Context))
	}
	fmt.Fprintf(&b, "API server: %s\n", p(w.Server))
	user := w.User
	if user == "" {
		user = "(none named by the context)"
	}
	fmt.Fprintf(&b, "User:       %s\n", p(user))
	fmt.Fprintf(&b, "Namespace:  %s\n", p(w.Namespace))
	fmt.Fprintf(&b, "Prometheus: %s\n", describePrometheus(r.Prometheus))
	return b.String()
}

// describePrometheus is the header's Prometheus line, its fields Printable.
func describePrometheus(src *PromSource) string {
	if src == nil {
		return describePrometheusFields(nil)
	}
	p := *src
	for _, s := range []*string{&p.URL, &p.CAFile, &p.Resource, &p.Service, &p.Version, &p.Error, &p.Trust} {
		*s = Printable(*s)
	}
	p.Tried = make([]string, len(src.Tried))
	for i, t := range src.Tried {
		p.Tried[i] = Printable(t)
	}
	return describePrometheusFields(&p)
}

func describePrometheusFields(p *PromSource) string {
	if p == nil {
		return "not asked (pass --prometheus auto to ask the one that selects KubeVirt's ServiceMonitor, or --prometheus-url)"
	}
	var b strings.Builder
	switch {
	case p.Resource != "":
		b.WriteString(p.Resource)
	case p.URL != "":
		b.WriteString(p.URL)
	default:
		b.WriteString("none found")
	}
	if p.Answered {
		b.WriteString(" answered")
		if p.Version != "" {
			b.WriteString(" (Prometheus " + p.Version + ")")
		}
	} else if p.URL != "" {
		b.WriteString(" did not answer")
	}
	switch p.Via {
	case ViaServiceProxy:
		b.WriteString(", through the API server's service proxy with the kubeconfig's credentials")
		if p.Service != "" {
			b.WriteString(" (Service " + p.Service + ")")
		}
	case ViaURL:
		switch p.Auth {
		case AuthBearer:
			b.WriteString(", with a bearer token")
		default:
			b.WriteString(", without credentials")
		}
		if p.CAFile != "" {
			b.WriteString(", its certificate verified with " + p.CAFile)
		}
	}
	if p.Resource != "" && p.URL != "" {
		b.WriteString(": " + p.URL)
	}
	if p.Error != "" {
		b.WriteString(": " + p.Error)
	}
	if p.Trust != "" {
		b.WriteString("\n            (" + p.Trust + ")")
	}
	for _, t := range p.Tried {
		b.WriteString("\n            (tried first: " + t + ")")
	}
	return b.String()
}

// WriteText writes the report for people: where doctor looked, the
// verdict with its likely causes, the upgrade and VM lines, the failing
// checks with their next commands, then the rest. Every field is
// Printable: what the cluster or Prometheus wrote into it is shown, never
// obeyed by the terminal.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	p := Printable
	b.WriteString(r.Header())
	fmt.Fprintf(&b, "\nVerdict: %s\n", p(string(r.Verdict)))
	fmt.Fprintf(&b, "  %s\n", p(r.Headline))
	for _, c := range r.Causes {
		fmt.Fprintf(&b, "  Likely cause (%s): %s\n", p(c.Check), p(c.Cause))
		if c.Hint != "" {
			fmt.Fprintf(&b, "    next: %s\n", p(c.Hint))
		}
	}
	if r.Upgrade != "" && !r.upgradeIsCause() {
		fmt.Fprintf(&b, "  Upgrade: %s\n", p(r.Upgrade))
	}
	if r.VMs != "" {
		fmt.Fprintf(&b, "  VMs: %s\n", p(r.VMs))
	}

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
	fmt.Fprintf(b, "  %-4s %s: %s\n", label(c.Status), Printable(c.Name), Printable(c.Evidence))
	if c.Hint != "" {
		fmt.Fprintf(b, "       next: %s\n", Printable(c.Hint))
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
