package rules

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// DifferencesDoc is the document, relative to the repository root, that
// lists how virtop's rules differ from upstream's (section DifferencesSection).
const (
	DifferencesDoc     = "docs/upstream-differences.md"
	DifferencesSection = "Monitoring rules"
)

// DifferenceRow is a row of one of the tables of the monitoring section of
// DifferencesDoc: the rules (or alerts) it names, the releases it applies
// to, and its other cells.
type DifferenceRow struct {
	// Names are the backticked names of the first cell.
	Names []string
	// Releases is the second cell: "all", "vX on", "vX to vY" or a
	// comma-separated list.
	Releases string
	// Cells are the row's cells after the second.
	Cells []string
	// Line is the row's line number in the document, for messages.
	Line int
}

// Applies reports whether the row covers a release of the given ones (the
// known rule sets, sorted).
func (r DifferenceRow) Applies(release string, known []string) (bool, error) {
	s := strings.TrimSpace(r.Releases)
	idx := func(v string) (int, error) {
		i := slices.Index(known, v)
		if i < 0 {
			return 0, fmt.Errorf("line %d: release %q is not a rule set (have %s)", r.Line, v, strings.Join(known, ", "))
		}
		return i, nil
	}
	at, err := idx(release)
	if err != nil {
		return false, err
	}
	switch {
	case s == "all":
		return true, nil
	case strings.HasSuffix(s, " on"):
		from, err := idx(strings.TrimSuffix(s, " on"))
		return err == nil && at >= from, err
	case strings.Contains(s, " to "):
		a, b, _ := strings.Cut(s, " to ")
		from, err := idx(strings.TrimSpace(a))
		if err != nil {
			return false, err
		}
		to, err := idx(strings.TrimSpace(b))
		return err == nil && at >= from && at <= to, err
	}
	for _, v := range strings.Split(s, ",") {
		if _, err := idx(strings.TrimSpace(v)); err != nil {
			return false, err
		}
		if strings.TrimSpace(v) == release {
			return true, nil
		}
	}
	return false, nil
}

var backtickedName = regexp.MustCompile("`([^`]+)`")

// ReadDifferences reads the tables of the monitoring section of the
// document: each table under the section is keyed by its first header
// cell ("Rule", "Alert", "Release", ...). Tables whose second header cell
// is "Where" (the strategy fidelity rows) are left out.
func ReadDifferences(path string) (map[string][]DifferenceRow, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string][]DifferenceRow{}
	in := false
	var key string
	for i, line := range strings.Split(string(raw), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			in = strings.TrimSpace(h) == DifferencesSection
			key = ""
			continue
		}
		if !in {
			continue
		}
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			key = ""
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		switch {
		case key == "" && len(cells) >= 2:
			key = cells[0]
			if cells[1] == "Where" {
				key = "-"
			}
			continue
		case strings.HasPrefix(cells[0], "---") || key == "-" || len(cells) < 2:
			continue
		}
		r := DifferenceRow{Releases: cells[1], Cells: cells[2:], Line: i + 1}
		for _, m := range backtickedName.FindAllStringSubmatch(cells[0], -1) {
			r.Names = append(r.Names, m[1])
		}
		if key != "Release" && len(r.Names) == 0 {
			return nil, fmt.Errorf("%s:%d: the first cell names no rule in backticks", path, i+1)
		}
		if key == "Release" {
			r.Names = []string{cells[0]}
		}
		out[key] = append(out[key], r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no tables under ## %s", path, DifferencesSection)
	}
	return out, nil
}
