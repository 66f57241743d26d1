package bench

import "time"

// Figure is one measured figure: every run and their median.
type Figure struct {
	Name   string    `json:"name"`
	Unit   string    `json:"unit"`
	Runs   []float64 `json:"runs"`
	Median float64   `json:"median"`
	Target string    `json:"target,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

// Sample is one reading of the operator's memory during the benchmark.
type Sample struct {
	At    float64 `json:"at"` // seconds since the benchmark started
	RSS   float64 `json:"rssMiB"`
	Phase string  `json:"phase"`
}

// Report is what the benchmark writes to $VIRTOP_BENCH_OUT (e2e.json),
// and what hack/benchreport reads.
type Report struct {
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Figures []Figure  `json:"figures"`
	// Memory is the operator's resident memory, sampled each second.
	Memory []Sample `json:"memory,omitempty"`
}
