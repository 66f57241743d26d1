# Benchmarks on the local cluster (issue 5): created -> Available with 3 and
# 100 fake nodes, API requests per idle minute. Not part of `make test`.

.PHONY: bench-e2e
bench-e2e: ## install benchmark on the local cluster (MEASURE lines)
	VIRTOP_BENCH=1 $(GO) test ./test/e2e -run Bench -p 1 -count=1 -timeout 30m -v
