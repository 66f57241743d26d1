# Tests. `make test` is the README's test command and what CI runs. Results
# go through hack/testsummary, which ends with "N passed, N failed, N skipped"
# and shows the output of any test that never ended (a hung one, killed by
# its -timeout). The full `go test -json` stream of `make test` is kept in
# $(TEST_LOG).
UNIT_TIMEOUT ?= 15m
GOTEST_PKGS = $$($(GO) list ./... | grep -v /test/e2e)
SUMMARY := $(GO) run ./hack/testsummary
TEST_LOG ?= dist/test.json

.PHONY: test-unit
test-unit: ## Quick tests: no API server, no local cluster
	$(GO) test -json -short -count=1 -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS) | $(SUMMARY)

.PHONY: test-envtest
test-envtest: tools ## Unit and envtest tests (real kube-apiserver and etcd)
	$(GO) test -json -count=1 -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS) | $(SUMMARY)

.PHONY: test
test: tools ## Every test: unit, envtest and end to end (the e2e packages one at a time; the stream in dist/test.json)
	@mkdir -p $(dir $(TEST_LOG))
	{ $(GO) test -json -count=1 -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS); \
	  $(GO) test -json -count=1 -p 1 -timeout $(E2E_TIMEOUT) ./test/e2e/...; } | tee $(TEST_LOG) | $(SUMMARY)


# Fuzz targets (go test -fuzz takes one target of one package at a time),
# each run for $(FUZZTIME): the strategy decoder and signature, the
# customizeComponents patches, the deployment config and the monitoring
# tuning renderer. A failure leaves its input under the package's
# testdata/fuzz/, where a plain `go test` replays it.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./internal/strategy:FuzzDecodeManifests ./internal/strategy:FuzzCheckSignature \
	./internal/strategy:FuzzApplyPatch ./internal/config:FuzzFromKubeVirt ./internal/config:FuzzParse \
	./internal/monitoring/tuning:FuzzRender

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME (default 10s)
	@mkdir -p dist; set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
	  $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) >dist/fuzz.log 2>&1 || { cat dist/fuzz.log; exit 1; }; \
	  tail -1 dist/fuzz.log; \
	done
