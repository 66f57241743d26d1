package testenv

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestNamespacePrefix(t *testing.T) {
	for name, want := range map[string]string{
		"TestFoo":                   "testfoo-",
		"TestFoo/sub_case#01":       "testfoo-sub-case-01-",
		"///":                       "test-",
		strings.Repeat("TestX", 30): strings.Repeat("testx", 8) + "-",
	} {
		got := namespacePrefix(name)
		if got != want {
			t.Errorf("namespacePrefix(%q) = %q, want %q", name, got, want)
		}
		if errs := validation.IsDNS1123Label(got + "abcde"); len(errs) > 0 {
			t.Errorf("namespacePrefix(%q) + suffix is no DNS label: %v", name, errs)
		}
	}
}
