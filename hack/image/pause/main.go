// Command pause is the process of a pod sandbox: it holds the pod's
// namespaces open, reaps the zombies that are reparented to it (it is PID 1
// when the pod shares its process namespace) and exits 0 on SIGTERM or
// SIGINT. It does what Kubernetes' pause (build/pause/linux/pause.c) does,
// for a node that cannot pull registry.k8s.io/pause: hack/tools/kubevirt.sh
// pause packs it as that image (`image peer`).
//
// Build it static: CGO_ENABLED=0 go build -trimpath -ldflags=-s\ -w ./pause
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (virtop hack/image/pause)\n")
		return
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	if os.Getpid() != 1 {
		os.Stderr.WriteString("Warning: pause should be the first process\n")
	}
	// Zombies from before the handler was in place.
	reap()
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		// SIGTERM or SIGINT: the sandbox is being stopped.
		os.Exit(0)
	}
}

// reap waits for every child that has exited, without blocking. SIGCHLDs
// coalesce, so one signal may stand for several children.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD (no children) or none exited yet
		}
	}
}
