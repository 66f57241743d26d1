package benchcompare

import (
	"fmt"
	"os"
	"strings"
)

// machine describes this machine: CPUs, memory.
func machine() string {
	var parts []string
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		n, model := 0, ""
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			switch strings.TrimSpace(k) {
			case "processor":
				n++
			case "model name":
				if model == "" {
					model = strings.TrimSpace(v)
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%d CPUs (%s)", n, model))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				parts = append(parts, f[1]+" kB memory")
			}
		}
	}
	return strings.Join(parts, ", ")
}

// loadavg is the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}
