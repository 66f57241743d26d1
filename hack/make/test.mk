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

