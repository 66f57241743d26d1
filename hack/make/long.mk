# The fault suite (issue 10, test/e2e/long, build tag long): the operator
# killed at crash points over an install and an upgrade, the API server and
# etcd stopped, a leader killed mid-rollout, managed objects and the
# strategy ConfigMap tampered with. It has a local cluster of its own and
# runs within 25 minutes; neither `make test` nor CI runs it, `make
# test-all` does. The full `go test -json` stream, with the MEASURE lines,
# is kept in $(TEST_DIR)/e2e-long.json (the package's log in
# $(TEST_DIR)/e2e-long/); a failing suite's directory in dist/e2e/kept-long.
LONG_TIMEOUT ?= 25m

.PHONY: test-e2e-long
test-e2e-long: tools ## The fault suite on the local cluster (long, not CI; MEASURE lines in dist/test/e2e-long.json)
	rm -rf $(E2E_DIR)/kept-long && mkdir -p $(E2E_DIR)/kept-long
	$(call gotest,e2e-long,-tags long -p 1 -count=1 -timeout $(LONG_TIMEOUT) ./test/e2e/long/...,VIRTOP_E2E_ARTIFACTS=$(abspath $(E2E_DIR))/kept-long)
