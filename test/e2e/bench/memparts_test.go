//go:build bench

package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// memParts is what a process's resident memory is made of: from
// /proc/PID/smaps_rollup the anonymous pages (the Go heap, stacks and the
// runtime's own) and the file-backed ones (the binary's text and data),
// and from the operator's go_memstats metrics the heap in use, the heap
// the runtime holds but does not use, and what it returned to the OS.
type memParts struct {
	RSS, Anon, File                   float64 // MiB, from smaps_rollup
	FileHuge                          float64 // MiB of File mapped in 2 MiB pages (FilePmdMapped)
	HeapInuse, HeapIdleKept, Released float64 // MiB, from go_memstats
	Stack, Sys                        float64 // MiB
}

func (m memParts) String() string {
	return fmt.Sprintf("RSS %.1f MiB = anonymous %.1f + file-backed (binary) %.1f (%.1f of it mapped in 2 MiB pages); Go heap in use %.1f, heap idle not returned %.1f, returned %.1f, stacks %.1f, runtime total %.1f",
		m.RSS, m.Anon, m.File, m.FileHuge, m.HeapInuse, m.HeapIdleKept, m.Released, m.Stack, m.Sys)
}

func readMemParts(t *testing.T, pid int, metrics framework.Metrics) memParts {
	t.Helper()
	var m memParts
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "Rss:":
			m.RSS = v / 1024
		case "Anonymous:":
			m.Anon = v / 1024
		case "FilePmdMapped:":
			m.FileHuge = v / 1024
		}
	}
	m.File = m.RSS - m.Anon
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, err := metrics.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := gauges(body)
	mib := func(name string) float64 { return g[name] / (1 << 20) }
	m.HeapInuse = mib("go_memstats_heap_inuse_bytes")
	m.Released = mib("go_memstats_heap_released_bytes")
	m.HeapIdleKept = mib("go_memstats_heap_idle_bytes") - m.Released
	m.Stack = mib("go_memstats_stack_inuse_bytes")
	m.Sys = mib("go_memstats_sys_bytes")
	return m
}

// gauges reads the label-less samples of a Prometheus text exposition.
func gauges(body []byte) map[string]float64 {
	out := map[string]float64{}
	s := bufio.NewScanner(bytes.NewReader(body))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		l := s.Text()
		if strings.HasPrefix(l, "#") || strings.Contains(l, "{") {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[f[0]] = v
		}
	}
	return out
}

// saveHeapProfile writes the operator's heap profile (its pprof endpoint,
// VIRTOP_BENCH_PPROF) to $VIRTOP_BENCH_OUT's directory as heap-<what>.pb.gz.
func saveHeapProfile(t *testing.T, pprofAddr, what string) {
	t.Helper()
	out := os.Getenv("VIRTOP_BENCH_OUT")
	if pprofAddr == "" || out == "" {
		return
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + pprofAddr + "/debug/pprof/heap")
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("heap profile: %v", err)
		return
	}
	dir := out[:strings.LastIndex(out, "/")+1]
	path := dir + "heap-" + what + ".pb.gz"
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Error(err)
		return
	}
	t.Logf("heap profile of the operator (%s): %s", what, path)
}

// sampler reads the operator's VmRSS once a second into results.Memory,
// labelled with the benchmark's current phase.
type sampler struct {
	stop chan struct{}
	done chan struct{}

	mu    sync.Mutex
	pid   int
	phase string
}

func startSampler(pid int, phase string) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), pid: pid, phase: phase}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			s.mu.Lock()
			pid, phase := s.pid, s.phase
			s.mu.Unlock()
			if kb, ok := vmRSS(pid); ok {
				results.mu.Lock()
				results.Memory = append(results.Memory, Sample{At: time.Since(results.Started).Seconds(), RSS: kb / 1024, Phase: phase})
				results.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// set names the phase the next samples belong to and the process to read.
func (s *sampler) set(pid int, phase string) {
	s.mu.Lock()
	s.pid, s.phase = pid, phase
	s.mu.Unlock()
}

func (s *sampler) end() { close(s.stop); <-s.done }

func vmRSS(pid int) (float64, bool) {
	cur, _, err := procMemory(pid)
	return cur, err == nil
}
