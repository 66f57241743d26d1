# Benchmarks (issue 10), not part of CI. `make bench` runs the Go
# benchmarks (strategy generation and encoding, certificates, Prometheus
# late on envtest) three times each, then the local-cluster benchmark
# (test/e2e/bench, build tag bench): created -> Available with 3, 100 and
# 1000 fake nodes, Prometheus late, idle minutes and memory, each timed
# figure the median of 3 runs, then bench-compare (below) and the report
# (hack/benchreport): dist/bench/report.md with every figure against its
# target and SVG plots beside it. Output: dist/bench/{go.txt,e2e.txt,
# e2e.json,compare.md,compare.json,report.md,*.svg}; docs/benchmarks.md
# holds the latest figures.
BENCH_DIR ?= dist/bench
# VIRTOP_BENCH_NODES, VIRTOP_BENCH_RUNS, VIRTOP_BENCH_IDLE_MINUTES and
# VIRTOP_BENCH_NAMESPACES shrink the e2e benchmark (see test/e2e/bench).

.PHONY: bench bench-go bench-e2e bench-report
bench: bench-go bench-e2e bench-compare ## Every benchmark (not part of CI), then the report: dist/bench/report.md
	$(MAKE) --no-print-directory bench-report

bench-report: ## dist/bench/report.md and its plots from the figures in dist/bench (e2e.json, compare.json if there)
	$(GO) run ./hack/benchreport -dir $(BENCH_DIR)

bench-go: ## Go benchmarks, 3 runs each (strategy generation, encoding, ...)
	@mkdir -p $(BENCH_DIR)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -timeout 30m $(GOTEST_PKGS) | tee $(BENCH_DIR)/go.txt

bench-e2e: tools ## local-cluster benchmark: install, Prometheus late, idle, memory (MEASURE lines)
	@mkdir -p $(BENCH_DIR)
	VIRTOP_BENCH_OUT=$(CURDIR)/$(BENCH_DIR)/e2e.json $(GO) test -tags bench ./test/e2e/bench -run TestBench -p 1 -count=1 -timeout 120m -v | tee $(BENCH_DIR)/e2e.txt

# Upstream KubeVirt's own virt-operator against virtop's (issue 33), each on
# fresh local clusters with the real node, interleaved; the package
# test/e2e/benchcompare (build tag bench). VIRTOP_BENCH_COMPARE_RUNS (3)
# runs each, VIRTOP_BENCH_COMPARE_IDLE (60s) idle window. Needs upstream's
# images and operator of both releases of the upgrade (built from source,
# offline, missing ones only) and virtop's release manifest and image.
BENCH_COMPARE_RELEASES = v1.8.4 v1.9.0

.PHONY: bench-compare
bench-compare: build tools-demo kustomize node-packages ## upstream's virt-operator vs virtop on fresh real-node clusters: install, requests, memory, Prometheus late, upgrade (dist/bench/compare.md)
	@mkdir -p $(BENCH_DIR)
	$(MAKE) --no-print-directory node-images-upstream KUBEVIRT_RELEASE="$(BENCH_COMPARE_RELEASES)"
	$(MAKE) --no-print-directory release-manifests VERSION=v0.0.0-bench DIST=$(abspath $(BENCH_DIR))/release-manifests PLATFORMS=linux/$$($(GO) env GOARCH)
	VIRTOP_BENCH_COMPARE_OUT=$(abspath $(BENCH_DIR)) VIRTOP_E2E_RELEASE_MANIFESTS=$(abspath $(BENCH_DIR))/release-manifests \
		$(GO) test -tags bench ./test/e2e/benchcompare -run TestBenchCompare -count=1 -timeout 600m -v | tee $(BENCH_DIR)/compare.txt
