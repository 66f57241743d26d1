package ruletest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit writes results as JUnit XML, the report format CI systems read: one
// testsuite per test file, one testcase per test group (classname the file),
// a failure element holding the group's errors. Test cases and suites count
// test groups, as promtool's own --junit report does.
func JUnit(w io.Writer, results []Result) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Failure   *failure `xml:"failure,omitempty"`
	}
	type testsuite struct {
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	type testsuites struct {
		XMLName  xml.Name    `xml:"testsuites"`
		Name     string      `xml:"name,attr"`
		Tests    int         `xml:"tests,attr"`
		Failures int         `xml:"failures,attr"`
		Suites   []testsuite `xml:"testsuite"`
	}
	out := testsuites{Name: "virtop rules test"}
	for _, r := range results {
		s := testsuite{Name: r.File}
		for _, t := range r.Tests {
			c := testcase{Name: t.Name, Classname: r.File}
			if !t.Passed() {
				var failed []string
				for _, tc := range t.Cases {
					if !tc.Passed() {
						failed = append(failed, tc.String())
					}
				}
				var text []string
				for _, e := range t.Errors {
					text = append(text, e.Error())
				}
				c.Failure = &failure{
					Message: fmt.Sprintf("%d of %d expectations failed: %s", len(failed), len(t.Cases), strings.Join(failed, "; ")),
					Type:    "RuleTestFailure",
					Text:    strings.Join(text, "\n"),
				}
				s.Failures++
			}
			s.Cases = append(s.Cases, c)
			s.Tests++
		}
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Suites = append(out.Suites, s)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
