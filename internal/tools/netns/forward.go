package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"
)

// ListenFD is the file descriptor under which a forwarder process finds the
// listener StartForwarder hands it (the first of exec.Cmd's ExtraFiles).
const ListenFD = 3

// StartForwarder opens a listener on addr (a loopback address of the current
// process's namespace, normally the machine's own) and starts cmd with it as
// file descriptor ListenFD. cmd is expected to run Forward inside the sealed
// namespace (built with NS.Command), so that connections accepted on the
// machine's loopback are dialled on the namespace's. The listener is closed
// in this process once cmd has started. The caller waits for or releases cmd.
func StartForwarder(cmd *exec.Cmd, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("forwarding from %s: only a loopback address may be listened on", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s for the forwarder: %w", addr, err)
	}
	f, err := ln.(*net.TCPListener).File()
	_ = ln.Close()
	if err != nil {
		return err
	}
	defer f.Close()
	cmd.ExtraFiles = []*os.File{f}
	return cmd.Start()
}

// Forward accepts connections on ln and joins each with a connection to
// target (which must be a loopback address) dialled in the current process's
// namespace, until ctx ends or ln fails.
func Forward(ctx context.Context, ln net.Listener, target string, logf func(format string, args ...any)) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("forwarding to %s: only a loopback address may be dialled", target)
	}
	go func() {
		<-ctx.Done()
		_ = ln.Close()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			join(ctx, in, target, logf)
		}()
	}
}

func join(ctx context.Context, in net.Conn, target string, logf func(string, ...any)) {
	defer in.Close()
	d := net.Dialer{Timeout: 10 * time.Second}
	out, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		logf("dialling %s for %s: %v", target, in.RemoteAddr(), err)
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	select {
	case <-done:
		// One side finished sending; the other may still answer.
		select {
		case <-done:
		case <-ctx.Done():
		}
	case <-ctx.Done():
	}
}

// ListenerFromFD returns the listener a forwarder process was handed as file
// descriptor ListenFD.
func ListenerFromFD() (net.Listener, error) {
	f := os.NewFile(uintptr(ListenFD), "forward-listener")
	if f == nil {
		return nil, fmt.Errorf("no file descriptor %d: start the forwarder with StartForwarder", ListenFD)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("file descriptor %d is not a listener: %w", ListenFD, err)
	}
	return ln, nil
}
