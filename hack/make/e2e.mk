# End-to-end tests and the local cluster (kwok, binary runtime). The tools
# (kube-apiserver, etcd, kwok, …) come from `make tools` (hack/make/tools.mk).

E2E_TIMEOUT ?= 30m
CLUSTER_NAME ?= virtop
NODES ?= 3
PROMETHEUS ?= none

.PHONY: test-e2e
test-e2e: ## end-to-end tests on the local cluster
	$(GO) test ./test/e2e/... -p 1 -count=1 -timeout $(E2E_TIMEOUT) -v

.PHONY: up
up: build tools-demo ## Start the local cluster with the operator (CLUSTER_NAME, NODES, PROMETHEUS=none|before|late)
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus $(PROMETHEUS)

.PHONY: down
down: build ## Stop the local cluster's operator and delete the cluster (CLUSTER_NAME)
	$(BIN) down --name $(CLUSTER_NAME)

.PHONY: demo
demo: ## Build only what the demo runs (virtop, then the cluster's 7 tools), then virtop up --prometheus late
	@echo "make demo: 1/3 bin/virtop (a first build takes about 2-5 minutes on 2 cores)"
	@$(MAKE) --no-print-directory build
	@echo "make demo: 2/3 the local cluster's tools (etcd, Kubernetes, kwok), missing ones only"
	@hack/tools/build.sh demo
	@echo "make demo: 3/3 virtop up --prometheus late"
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus late
