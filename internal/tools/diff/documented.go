package diff

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Documented is one row of docs/upstream-differences.md: a difference
// between virtop's rendering of a release and upstream's that virtop made
// on purpose, with where it occurs.
type Documented struct {
	// What is the row's first cell.
	What string
	// Section is the heading (##) the row is under.
	Section  string
	patterns []*regexp.Regexp
}

var backticked = regexp.MustCompile("`([^`]+)`")

// ReadDocumented parses the rows of every table of the document whose
// second cell holds backticked patterns: `Kind/name` (the object, or any
// field of it) or `Kind/name path`, with * matching anything.
func ReadDocumented(file string) ([]*Documented, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var rows []*Documented
	section := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section = strings.TrimSpace(h)
		}
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			continue
		}
		ms := backticked.FindAllStringSubmatch(cells[1], -1)
		if len(ms) == 0 {
			continue
		}
		r := &Documented{What: strings.TrimSpace(cells[0]), Section: section}
		for _, m := range ms {
			q := strings.ReplaceAll(regexp.QuoteMeta(m[1]), `\*`, `.*`)
			if !strings.Contains(m[1], " ") {
				q += `( .*)?`
			}
			r.patterns = append(r.patterns, regexp.MustCompile("^"+q+"$"))
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s has no rows with patterns", file)
	}
	return rows, nil
}

// Matches reports whether the row names a difference, written as
// "Kind/name" for an object one side lacks or "Kind/name path" for a field.
func (d *Documented) Matches(item string) bool {
	return slices.ContainsFunc(d.patterns, func(p *regexp.Regexp) bool { return p.MatchString(item) })
}

// Items lists a result's differences in the rows' terms: objects one side
// lacks, then every differing field.
func (r Result) Items() []string {
	var out []string
	for _, o := range r.Added {
		out = append(out, o.Kind+"/"+o.Name)
	}
	for _, o := range r.Removed {
		out = append(out, o.Kind+"/"+o.Name)
	}
	for _, d := range r.Changed {
		for _, f := range d.Fields {
			out = append(out, d.Kind+"/"+d.Name+" "+f.Path)
		}
	}
	return out
}
