package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain runs pause itself when the tests re-execute their own binary
// with PAUSE_TEST_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_MAIN") == "1" {
		main()
		os.Exit(3) // main returns only for -v
	}
	os.Exit(m.Run())
}

func startPause(t *testing.T, attr *syscall.SysProcAttr) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PAUSE_TEST_MAIN=1")
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		if attr != nil && errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot start pause in a new PID namespace: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	// Ready when it catches SIGTERM, SIGINT and SIGCHLD (SigCgt in
	// /proc/PID/status).
	want := uint64(1)<<(syscall.SIGTERM-1) | 1<<(syscall.SIGINT-1) | 1<<(syscall.SIGCHLD-1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status(t, cmd.Process.Pid, "SigCgt")&want == want {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("pause did not install its signal handlers within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// status reads a hexadecimal or decimal field of /proc/PID/status (0 when
// the process is gone).
func status(t *testing.T, pid int, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			base := 10
			if field == "SigCgt" {
				base = 16
			}
			n, err := strconv.ParseUint(strings.TrimSpace(v), base, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", field, v, err)
			}
			return n
		}
	}
	return 0
}

func waitExit(t *testing.T, cmd *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not exit within 10s")
		return nil
	}
}

// TestExitsZeroOnSignal: SIGTERM and SIGINT end pause with exit 0.
func TestExitsZeroOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := startPause(t, nil)
			// SIGCHLD alone (no child) must not end it.
			if err := cmd.Process.Signal(syscall.SIGCHLD); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if status(t, cmd.Process.Pid, "Pid") == 0 {
				t.Fatal("pause ended on SIGCHLD")
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := waitExit(t, cmd); err != nil {
				t.Fatalf("pause after %s: %v, want exit 0", sig, err)
			}
		})
	}
}

// TestReapsOrphans runs pause as PID 1 of a new PID namespace, as in a pod
// that shares its process namespace, and leaves an orphan there: when the
// orphan exits, pause reaps it (no zombie stays behind). Needs root.
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a new PID namespace and nsenter)")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("no nsenter")
	}
	cmd := startPause(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})
	pid := cmd.Process.Pid
	// sh starts a sleep and exits at once: the sleep is orphaned and
	// reparented to the namespace's PID 1, pause.
	out, err := exec.Command(nsenter, "-t", strconv.Itoa(pid), "-p", "--", "sh", "-c", "sleep 0.5 </dev/null >/dev/null 2>&1 & echo $!").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	children := func() (live, zombies []int) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			p, err := strconv.Atoi(e.Name())
			if err != nil || status(t, p, "PPid") != uint64(pid) {
				continue
			}
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
				zombies = append(zombies, p)
			} else {
				live = append(live, p)
			}
		}
		return live, zombies
	}
	sawOrphan := false
	deadline := time.Now().Add(5 * time.Second)
	for {
		live, zombies := children()
		if len(live) > 0 {
			sawOrphan = true
		}
		if sawOrphan && len(live) == 0 && len(zombies) == 0 {
			break // exited and reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan (sleep, pid %s in the namespace) seen: %v; pause's children after 5s: live %v, zombies %v", strings.TrimSpace(string(out)), sawOrphan, live, zombies)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, cmd); err != nil {
		t.Fatalf("pause after SIGTERM: %v, want exit 0", err)
	}
}
