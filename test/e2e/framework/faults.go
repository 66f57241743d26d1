package framework

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/internal/faultpoint"
)

var faults struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// FaultsBinary builds, once per suite, a virtop binary with -tags faults
// (crash points of internal/faultpoint armed by VIRTOP_FAULT_POINT) next to
// the suite's binary and returns its path.
func (e *Env) FaultsBinary(t testing.TB) string {
	t.Helper()
	faults.once.Do(func() {
		start := time.Now()
		faults.bin = filepath.Join(e.Dir, "bin", "virtop-faults")
		ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
		defer cancel()
		cmd := Command(ctx, "go", "build", "-tags", "faults", "-o", faults.bin, "./cmd/virtop")
		cmd.Dir = e.Repo
		faults.out, faults.err = cmd.CombinedOutput()
		faults.err = CommandError(ctx, cmd, BuildTimeout, faults.err)
		t.Logf("MEASURE building virtop with -tags faults: %s", time.Since(start).Round(100*time.Millisecond))
	})
	if faults.err != nil {
		t.Fatalf("building virtop with -tags faults: %v\n%s", faults.err, faults.out)
	}
	return faults.bin
}

// Arm makes the next start of the process run with VIRTOP_FAULT_POINT set
// to point ("name" or "name#n"); "" disarms it.
func (p *Process) Arm(point string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var env []string
	for _, kv := range p.Env {
		if !strings.HasPrefix(kv, faultpoint.EnvVar+"=") {
			env = append(env, kv)
		}
	}
	if point != "" {
		env = append(env, faultpoint.EnvVar+"="+point)
	}
	p.Env = env
}

// LastExit returns how the last run ended as the process's log records it,
// for example "exit status 1" or "signal: killed"; "" if it has not ended.
func (p *Process) LastExit() string {
	if ok, _ := p.Exited(); !ok {
		return ""
	}
	raw, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(raw), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if strings.HasPrefix(l, "---- ") && strings.Contains(l, ": exited with code ") {
			if open := strings.LastIndex(l, "("); open >= 0 && strings.HasSuffix(l, ")") {
				return l[open+1 : len(l)-1]
			}
		}
	}
	return ""
}

// KilledBySIGKILL reports whether the last run ended by SIGKILL.
func (p *Process) KilledBySIGKILL() bool {
	ok, code := p.Exited()
	return ok && code == -1 && p.LastExit() == "signal: killed"
}

// LogSince returns what the process wrote after the first offset bytes of
// its log (LogSize gives the offset to pass).
func (p *Process) LogSince(offset int) string {
	l := p.Log()
	if offset > len(l) {
		return ""
	}
	return l[offset:]
}

// LogSize is the current length of the process's log.
func (p *Process) LogSize() int { return len(p.Log()) }
