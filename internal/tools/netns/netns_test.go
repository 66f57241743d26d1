package netns_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/tools/netns"
)

// The test binary seals itself, as testenv and the end-to-end framework do;
// as a helper process (helperEnv set) it serves one role and exits.
func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(helper(role))
	}
	code, done, err := netns.ReexecFresh()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if done {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const helperEnv = "VIRTOP_NETNS_TEST_HELPER"

func helper(role string) int {
	switch role {
	case "echo": // listen on $ADDR, answer each line with "echo <line>"
		ln, err := net.Listen("tcp", os.Getenv("ADDR"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo %s from %d\n", sc.Text(), os.Getpid())
				}
			}()
		}
	case "forward": // forward fd 3 to $ADDR
		ln, err := netns.ListenerFromFD()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := netns.Forward(context.Background(), ln, os.Getenv("ADDR"), func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	}
	return 2
}

// In a sealed namespace a dial to an address off loopback — a Service
// ClusterIP, a fake pod's IP, the machine's gateway — fails at once with
// "network is unreachable"; loopback works.
func TestSealedDialFailsAtOnce(t *testing.T) {
	sealed, err := netns.Sealed()
	if err != nil {
		t.Fatal(err)
	}
	if !sealed {
		t.Fatal("the test binary is not sealed: it has an interface besides loopback")
	}
	// Nor a route: loopback's are in the local table, not the main one.
	if v4, v6Default, err := netns.Routes(); err != nil || len(v4) > 0 || v6Default {
		t.Errorf("routes of a loopback-only namespace: %v, IPv6 default %v, %v; want none", v4, v6Default, err)
	}
	for _, addr := range []string{"10.96.0.1:443", "10.0.0.7:8443", "192.168.1.1:6443", "[fd00::1]:443"} {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			c.Close()
			t.Errorf("dial %s succeeded in a sealed namespace", addr)
			continue
		}
		if !netns.ErrUnreachable(err) {
			t.Errorf("dial %s: %v, want network unreachable", addr, err)
		}
		t.Logf("dial %s failed after %s: %v", addr, time.Since(start).Round(time.Microsecond), err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("loopback is not up: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("loopback dial: %v", err)
	}
	c.Close()
}

// A forwarder handed a listener of this namespace reaches a server on the
// loopback of a named namespace, which this namespace cannot reach itself.
func TestForwardIntoNamedNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a named network namespace needs root")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	ns := netns.Named("virtop-test-" + hex.EncodeToString(b))
	if err := ns.Ensure(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Error(err)
		}
		if ns.Exists() {
			t.Errorf("namespace %s still exists after Delete", ns.Name)
		}
	})
	if ns.Inside() {
		t.Fatal("the test process is inside the namespace it just created")
	}
	addr := freeAddr(t)

	echo := ns.Command(os.Args[0])
	echo.Env = append(os.Environ(), helperEnv+"=echo", "ADDR="+addr)
	out, err := echo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	echo.Stderr = os.Stderr
	if err := echo.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = echo.Process.Kill(); _ = echo.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("echo server: %q %v", line, err)
	}
	if !ns.Holds(echo.Process.Pid) {
		t.Fatal("the echo server does not run inside the namespace (nsenter should keep its PID)")
	}
	// Not reachable from here: the echo server listens on the other loopback.
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s answers in the test's own namespace before any forwarder", addr)
	}

	fwd := ns.Command(os.Args[0])
	fwd.Env = append(os.Environ(), helperEnv+"=forward", "ADDR="+addr)
	fwd.Stderr = os.Stderr
	if err := netns.StartForwarder(fwd, addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Process.Signal(syscall.SIGTERM); _ = fwd.Wait() })

	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial through the forwarder: %v", err)
		}
		fmt.Fprintf(c, "hello %d\n", i)
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		want := fmt.Sprintf("echo hello %d from %d\n", i, echo.Process.Pid)
		if err != nil || line != want {
			t.Fatalf("through the forwarder: %q %v, want %q", line, err, want)
		}
	}
}

// Neither end of a forwarder accepts an address off loopback.
func TestForwardOnlyLoopback(t *testing.T) {
	cmd := exec.Command("true")
	if err := netns.StartForwarder(cmd, "0.0.0.0:0"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("StartForwarder on 0.0.0.0: %v, want a refusal", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := netns.Forward(context.Background(), ln, "10.96.0.1:443", t.Logf); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Forward to 10.96.0.1: %v, want a refusal", err)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
