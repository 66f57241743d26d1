//go:build faults

package faultpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// The test binary runs itself with a point armed: the child dies of
// SIGKILL at the armed hit, not before, after naming the point.
func TestHitKillsAtTheArmedHit(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") == "1" {
		Hit("other")
		Hit("p")
		Hit("p")
		os.Stdout.WriteString("survived two hits\n")
		Hit("p")
		os.Stdout.WriteString("survived the third hit\n")
		os.Exit(0)
	}
	for _, tc := range []struct {
		arm      string
		killed   bool
		wantText []string
		notText  []string
	}{
		{arm: "p#3", killed: true, wantText: []string{"armed p#3", "survived two hits", "faultpoint: hit p (hit #3): SIGKILL"}, notText: []string{"survived the third hit"}},
		{arm: "p", killed: true, wantText: []string{"hit p (hit #1)"}, notText: []string{"survived two hits"}},
		{arm: "q", wantText: []string{"survived the third hit"}},
		{arm: "", wantText: []string{"survived the third hit"}},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHitKillsAtTheArmedHit$")
		cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", EnvVar+"="+tc.arm)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
		if killed != tc.killed {
			t.Errorf("armed %q: killed by SIGKILL = %v, want %v (err %v)\n%s", tc.arm, killed, tc.killed, err, out)
		}
		if !tc.killed && err != nil {
			t.Errorf("armed %q: %v\n%s", tc.arm, err, out)
		}
		for _, s := range tc.wantText {
			if !strings.Contains(string(out), s) {
				t.Errorf("armed %q: output lacks %q:\n%s", tc.arm, s, out)
			}
		}
		for _, s := range tc.notText {
			if strings.Contains(string(out), s) {
				t.Errorf("armed %q: output has %q:\n%s", tc.arm, s, out)
			}
		}
	}
}
