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
up: build ## Start the local cluster with the operator (CLUSTER_NAME, NODES, PROMETHEUS=none|before|late)
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus $(PROMETHEUS)

.PHONY: down
down: build ## Stop the local cluster's operator and delete the cluster (CLUSTER_NAME)
	$(BIN) down --name $(CLUSTER_NAME)

.PHONY: demo
demo: tools build ## build what is needed, then virtop up --prometheus late
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus late
