package netns

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// SealedEnv is set in the environment of a program that Reexec or
// ReexecFresh ran again inside a sealed namespace, so that it does not do it
// a second time.
const SealedEnv = "VIRTOP_SEALED"

// ReexecFresh runs the current program again, with the same arguments and
// environment, inside a new network namespace of its own whose loopback is
// up (the child calls LoopbackUp through Seal), and returns its exit code.
// done is false when there is nothing to do — the current process is
// already sealed — and the caller goes on itself.
//
// As root the new namespace is made directly; otherwise inside a new user
// namespace that maps the caller to root there.
func ReexecFresh() (code int, done bool, err error) {
	if os.Getenv(SealedEnv) != "" {
		return 0, false, Seal()
	}
	if sealed, err := Sealed(); err == nil && sealed {
		return 0, false, LoopbackUp()
	}
	attrs := []*syscall.SysProcAttr{{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}}
	if os.Geteuid() != 0 {
		uid, gid := os.Getuid(), os.Getgid()
		attrs = append(attrs, &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
			GidMappingsEnableSetgroups: false,
			Pdeathsig:                  syscall.SIGKILL,
		})
	}
	var errs []error
	for _, a := range attrs {
		cmd, err := self(exec.Command, "fresh")
		if err != nil {
			return 1, true, err
		}
		cmd.SysProcAttr = a
		code, err := runChild(cmd)
		if err == nil {
			return code, true, nil
		}
		errs = append(errs, err)
	}
	return 1, true, fmt.Errorf("cannot run %s in a network namespace of its own (needed so that nothing it starts can reach an address off this machine): %w", os.Args[0], errors.Join(errs...))
}

// Reexec runs the current program again inside n, with the same arguments
// and environment plus env, and returns its exit code. done is false when
// the current process is already inside n; the caller goes on itself.
func (n NS) Reexec(env ...string) (code int, done bool, err error) {
	if n.Inside() {
		return 0, false, Seal()
	}
	cmd, err := self(n.Command, n.Name, env...)
	if err != nil {
		return 1, true, err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	code, err = runChild(cmd)
	if err != nil {
		return 1, true, fmt.Errorf("running %s inside network namespace %s: %w", cmd.Path, n.Name, err)
	}
	return code, true, nil
}

// Seal makes sure the current process may go on: its namespace has no
// interface but loopback, and loopback is up. It fails otherwise.
func Seal() error {
	sealed, err := Sealed()
	if err != nil {
		return err
	}
	if !sealed {
		return errors.New("this process's network namespace has an interface other than loopback: it is not sealed")
	}
	return LoopbackUp()
}

// self is this program again, built by command (exec.Command, or
// NS.Command to run it inside a namespace), with the same arguments, standard
// streams and environment, plus SealedEnv=sealedAs and env.
func self(command func(string, ...string) *exec.Cmd, sealedAs string, env ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := command(exe, os.Args[1:]...)
	cmd.Env = append(append(os.Environ(), SealedEnv+"="+sealedAs), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd, nil
}

// runChild starts cmd, passes on SIGINT, SIGTERM and SIGQUIT (a test
// binary's goroutine dump is the child's), and returns its exit code; err is
// set only when it could not be started.
func runChild(cmd *exec.Cmd) (int, error) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 1, err
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exit.ExitCode(), nil
	default:
		return 1, nil
	}
}
