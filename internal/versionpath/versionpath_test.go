package versionpath

import (
	"slices"
	"strings"
	"testing"
)

var catalog = []string{"v1.5.0", "v1.5.3", "v1.6.6", "v1.7.4", "v1.8.4", "v1.9.0"}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		running, target string
		allowed         bool
		reason, next    string
	}{
		{"", "v1.9.0", true, "", ""},
		{"v1.9.0", "v1.9.0", true, "", ""},
		{"v1.5.0", "v1.5.3", true, "", ""},
		{"v1.5.3", "v1.5.0", true, "", ""},
		{"v1.5.3", "v1.6.6", true, "", ""},
		{"v1.6.6", "v1.7.4", true, "", ""},
		{"v1.7.4", "v1.8.4", true, "", ""},
		{"v1.8.4", "v1.9.0", true, "", ""},
		// Any patch of the next minor, also one outside the catalog (the
		// strategy Job renders it).
		{"v1.8.4", "v1.9.1", true, "", ""},
		{"v1.5.3", "v1.7.4", false, ReasonSkipsMinor, "v1.6.6"},
		{"v1.5.3", "v1.9.0", false, ReasonSkipsMinor, "v1.6.6"},
		{"v1.5.0", "v1.9.0", false, ReasonSkipsMinor, "v1.6.6"},
		{"v1.7.4", "v1.9.0", false, ReasonSkipsMinor, "v1.8.4"},
		// No v1.10 release in the catalog: nothing to name.
		{"v1.9.0", "v1.11.0", false, ReasonSkipsMinor, ""},
		{"v1.9.0", "v1.8.4", false, ReasonDowngrade, "v1.9.0"},
		{"v1.6.6", "v1.5.3", false, ReasonDowngrade, "v1.6.6"},
		{"v1.9.0", "v2.0.0", false, ReasonMajor, ""},
		// Tags that do not order are not judged.
		{"v1.5.3", "latest", true, "", ""},
		{"devel", "v1.9.0", true, "", ""},
		{"v1.5.3", "v1.9.0-rc.1", false, ReasonSkipsMinor, "v1.6.6"},
		{"v1.8.4", "v1.9.0-rc.1", true, "", ""},
	} {
		d := Check(c.running, c.target, catalog)
		if d.Allowed != c.allowed || d.Reason != c.reason || d.Next != c.next {
			t.Errorf("%s -> %s: %+v; want allowed %v, reason %q, next %q", c.running, c.target, d, c.allowed, c.reason, c.next)
		}
		if !d.Allowed && (!strings.Contains(d.Message, c.target) || !strings.Contains(d.Message, c.running)) {
			t.Errorf("%s -> %s: the message names neither version: %s", c.running, c.target, d.Message)
		}
	}
}

func TestSkipMessageNamesTheWholeWay(t *testing.T) {
	d := Check("v1.5.3", "v1.9.0", catalog)
	if want := "v1.6.6 -> v1.7.4 -> v1.8.4 -> v1.9.0"; !strings.Contains(d.Message, want) {
		t.Fatalf("message %q lacks %q", d.Message, want)
	}
	if !strings.Contains(d.Message, "v1.5.3 keeps running") {
		t.Errorf("message %q does not say the running release keeps running", d.Message)
	}
}

func TestPath(t *testing.T) {
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		{"v1.5.3", "v1.9.0", []string{"v1.6.6", "v1.7.4", "v1.8.4", "v1.9.0"}},
		{"v1.5.0", "v1.6.6", []string{"v1.6.6"}},
		{"v1.8.4", "v1.9.0", []string{"v1.9.0"}},
		{"v1.9.0", "v1.5.3", nil},
		{"v1.9.0", "v1.11.0", nil},
	} {
		if got := Path(c.from, c.to, catalog); !slices.Equal(got, c.want) {
			t.Errorf("Path(%s, %s) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
