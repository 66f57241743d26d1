package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/proc"
)

// A command run by Command returns within OutputWait of its end even when
// a process it started keeps its output pipes: one killed at its bound
// (a doctor run past its 15 s) and one that exits leaving a daemon (what
// `virtop up` does). Each stand-in starts `sleep 300` in the background,
// which inherits its stdout and stderr; without the bound Run would wait
// for that sleep.
func TestCommandBoundedWhileAChildHoldsItsOutput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after string // what the stand-in does once the sleep is started
		want  string // in CommandError's message
	}{
		{"killed at its bound", "exec sleep 300", "did not finish within 2s (killed)"},
		{"exits leaving a daemon", "echo started; exit 0", "still held its output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pidfile := filepath.Join(dir, "daemon.pid")
			script := filepath.Join(dir, "standin.sh")
			body := "#!/bin/sh\nsleep 300 &\necho $! > " + pidfile + "\n" + tc.after + "\n"
			if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if pid, err := proc.ReadPID(pidfile); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			const bound = 2 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			cmd := Command(ctx, script)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- cmd.Run() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(bound + time.Minute):
				pid, _ := proc.ReadPID(pidfile)
				t.Fatalf("Run of the stand-in did not return %s after its %s bound: its output is held by the process it left (pid %d)", time.Minute, bound, pid)
			}
			took := time.Since(start)
			pid, rerr := proc.ReadPID(pidfile)
			if rerr != nil {
				t.Fatalf("the stand-in did not start its daemon: %v (output %q)", rerr, out.String())
			}
			// The condition was really there: the daemon outlived the
			// stand-in, holding its output, when Run returned.
			if !proc.Alive(pid) {
				t.Fatalf("the stand-in's daemon (pid %d) is gone: nothing held the output", pid)
			}
			msg := CommandError(ctx, cmd, bound, err)
			if msg == nil || !strings.Contains(msg.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", msg, tc.want)
			}
			t.Logf("Run returned after %s: %v", took.Round(100*time.Millisecond), msg)
		})
	}
}
