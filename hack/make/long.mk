# The fault suite (issue 10, test/e2e/long, build tag long): the operator
# killed at crash points over an install and an upgrade, the API server and
# etcd stopped, a leader killed mid-rollout, managed objects and the
# strategy ConfigMap tampered with. It has a local cluster of its own and
# runs within 25 minutes; `make test` does not run it (.ci/run does). The
# full `go test -json` stream, with the MEASURE lines, is kept in
# $(LONG_LOG).
LONG_TIMEOUT ?= 25m
LONG_LOG ?= dist/test-e2e-long.json

.PHONY: test-e2e-long
test-e2e-long: tools ## The fault suite on the local cluster (long; MEASURE lines in dist/test-e2e-long.json)
	@mkdir -p $(dir $(LONG_LOG))
	$(GO) test -json -tags long -p 1 -count=1 -timeout $(LONG_TIMEOUT) ./test/e2e/long/... | tee $(LONG_LOG) | $(SUMMARY)
