# Tests (docs/testing.md). `make test` is the README's test command and what
# CI runs: the steps of TEST_STEPS, each a target of its own. `make test-all`
# is everything else too (every catalog release end to end, the fault
# suite, the multi-arch image, promtool for every release); run it before
# resolving an issue that touches what it covers.
#
# Every go test run goes through $(call gotest,NAME,ARGS[,ENV]): GOTRACEBACK=all,
# the raw `go test -json` stream kept in $(TEST_DIR)/NAME.json, each
# package's raw events, output (NAME/<package>.log) and, when it panicked
# (its -timeout), its goroutine dump (NAME/<package>.goroutines.txt) under
# $(TEST_DIR)/NAME/, and what failed in $(TEST_DIR)/NAME/failures.txt
# (hack/testsummary). Nothing is retried: a flaky test is a bug.
# A package's bound, not a target: internal/controller alone took 404-683 s
# in three CI runs of 6 December (two packages at a time on 2 cores), too
# close to the old 15m for a loaded machine; a hang is still caught.
UNIT_TIMEOUT ?= 25m
# Unit and envtest packages two at a time (2 cores); e2e packages one at a time.
UNIT_P ?= 2
GOTEST_PKGS = $$($(GO) list ./... | grep -v /test/e2e)
SUMMARY := $(GO) run -C $(CURDIR) ./hack/testsummary
TEST_DIR ?= dist/test
GOARCH ?= $(shell $(GO) env GOARCH)
# Which catalog releases the tests that walk them cover
# (internal/testing/testreleases): default in make test, all in make test-all.
TEST_RELEASES ?= default
export VIRTOP_TEST_RELEASES := $(TEST_RELEASES)

# ENV is put before go test: variables, or `cd DIR && VAR=…`.
define gotest
rm -rf $(abspath $(TEST_DIR))/$(1) $(abspath $(TEST_DIR))/$(1).json && mkdir -p $(abspath $(TEST_DIR))/$(1) && \
$(3) GOTRACEBACK=all $(GO) test -json $(2) 2>&1 | tee $(abspath $(TEST_DIR))/$(1).json | \
$(SUMMARY) -dir $(abspath $(TEST_DIR))/$(1)
endef

# make test's steps, in order; .ci/run runs each one and times it.
TEST_STEPS := verify test-envtest test-e2e fuzz test-rules-promtool

.PHONY: test
test: ## What CI runs: verify, unit+envtest, e2e at the default release, fuzz 5,000 executions each, promtool for the default release (raw output in dist/test)
	@set -e; for s in $(TEST_STEPS); do echo "make test: $$s"; $(MAKE) --no-print-directory $$s; done

.PHONY: test-steps
test-steps: ## Print make test's steps (one per line; .ci/run times each)
	@printf '%s\n' $(TEST_STEPS)

.PHONY: test-all
test-all: ## make test at every catalog release, then the fault suite and the packaging tests with the multi-arch image (not CI: run before resolving an issue that touches them)
	$(MAKE) --no-print-directory test TEST_RELEASES=all FUZZTIME=$(FUZZTIME_ALL)
	$(MAKE) --no-print-directory test-e2e-long
	$(MAKE) --no-print-directory test-packaging

.PHONY: test-unit
test-unit: ## Quick tests: no API server, no local cluster
	$(call gotest,unit,-short -count=1 -p $(UNIT_P) -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS))

.PHONY: test-envtest
test-envtest: tools ## Unit and envtest tests (real kube-apiserver and etcd), two packages at a time
	$(call gotest,envtest,-count=1 -p $(UNIT_P) -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS))


# Fuzz targets (go test -fuzz takes one target of one package at a time),
# each run for $(FUZZTIME): the strategy decoder and signature, the
# customizeComponents patches, the strategy's YAML writer (against
# yaml.v2), the deployment config and the monitoring tuning renderer. A
# failure leaves its input under the package's testdata/fuzz/, where a
# plain `go test` replays it. Each target's output
# is kept in $(TEST_DIR)/fuzz/<package>.<target>.log.
#
# FUZZTIME is a count of executions, not a duration: Go 1.26's fuzzing
# coordinator (internal/fuzz.CoordinateFuzzing) puts a duration on a context
# and, when it expires, can compare the parent context's error with the
# child's before the child is cancelled, and then fails the target with
# "context deadline exceeded" though no input failed (go.dev/issue/75804,
# fixed in Go 1.27). It failed CI once (FuzzCheckSignature at 10 s) and
# short runs on two loaded cores reproduce it (docs/testing.md, "Flakes
# found"); a count sets no deadline. make test (CI) runs 5000 of each: in
# CI on 2 cores 20000 took 4-12 s per target but 64 s for FuzzRender, and
# the step 5:31 of CI's 35-minute budget (its instrumented build not yet
# cached); make test-all runs FUZZTIME_ALL. FUZZTIME=10m (a duration) still
# works for a long local run, with that race.
FUZZTIME ?= 5000x
FUZZTIME_ALL ?= 200000x
FUZZ_TIMEOUT ?= 10m
FUZZ_TARGETS = ./internal/strategy:FuzzDecodeManifests ./internal/strategy:FuzzCheckSignature \
	./internal/strategy:FuzzApplyPatch ./internal/strategy:FuzzYAMLWriterMatchesYAMLv2 \
	./internal/config:FuzzFromKubeVirt ./internal/config:FuzzParse ./internal/monitoring/tuning:FuzzRender

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 5000 executions; make test-all 200000)
	@rm -rf $(TEST_DIR)/fuzz; mkdir -p $(TEST_DIR)/fuzz; set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; log=$(TEST_DIR)/fuzz/$$(echo $${pkg#./} | tr / -).$$name.log; \
	  echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
	  GOTRACEBACK=all $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) >$$log 2>&1 || \
	    { tail -40 $$log; echo "fuzz: $$name failed; its whole output: $$log" | tee $(TEST_DIR)/fuzz/failures.txt; exit 1; }; \
	  tail -1 $$log; \
	done
