package faultpoint

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Spec
		wantErr bool
	}{
		{in: "", want: Spec{}},
		{in: "stage:crds", want: Spec{Name: "stage:crds", N: 1}},
		{in: "object:rbac#12", want: Spec{Name: "object:rbac", N: 12}},
		{in: "x#1", want: Spec{Name: "x", N: 1}},
		{in: "x#0", wantErr: true},
		{in: "x#-2", wantErr: true},
		{in: "x#two", wantErr: true},
		{in: "#3", wantErr: true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Parse(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if err == nil && tc.in != "" {
			if back, _ := Parse(got.String()); back != got {
				t.Errorf("String() of %+v does not parse back: %q", got, got.String())
			}
		}
	}
}
