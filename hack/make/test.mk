# Tests. `make test` is the README's test command and what CI runs.
UNIT_TIMEOUT ?= 10m
GOTEST_PKGS = $$($(GO) list ./... | grep -v /test/e2e)

.PHONY: test-unit
test-unit: ## Quick tests: no API server, no local cluster
	$(GO) test -short -count=1 -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS)

.PHONY: test-envtest
test-envtest: tools ## Unit and envtest tests (real kube-apiserver and etcd)
	$(GO) test -count=1 -timeout $(UNIT_TIMEOUT) $(GOTEST_PKGS)

.PHONY: test
test: test-envtest test-e2e ## Every test: unit, envtest and end to end

.PHONY: bench
bench: ## Benchmarks (not part of CI)
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -timeout 30m $(GOTEST_PKGS)
