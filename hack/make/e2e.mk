# End-to-end tests and the local cluster (kwok, binary runtime). The tools
# (kube-apiserver, etcd, kwok, …) come from `make tools` (hack/make/tools.mk).

# A package's bound. With TEST_RELEASES=all the real node's package runs
# every release's control plane (about 225 s each) besides its 750 s alert
# case: it passed 30 minutes in the first make test-all (6 December, killed
# by its -timeout at v1.9.0, every case before passing), so all gets 90.
E2E_TIMEOUT ?= $(if $(filter all,$(TEST_RELEASES)),90m,30m)
# The e2e packages make test-e2e runs (one, to run a single suite).
E2E_PKGS ?= ./test/e2e/...
# What make test-e2e builds once for every suite (virtop, the release
# manifests) and where failing suites' directories are kept (kept/).
E2E_DIR ?= dist/e2e
E2E_ENV = VIRTOP_E2E_VIRTOP=$(abspath $(E2E_DIR))/virtop \
	VIRTOP_E2E_RELEASE_MANIFESTS=$(abspath $(E2E_DIR))/release-manifests \
	VIRTOP_E2E_ARTIFACTS=$(abspath $(E2E_DIR))/kept
CLUSTER_NAME ?= virtop
NODES ?= 3
PROMETHEUS ?= none
# VMS=1: make demo (and make up) run virt-handler on the real node and boot a
# VM there under emulation (up --vms; builds make node-images-vm first:
# root, Debian's mirror, minutes the first time).
VMS ?=
# make demo's release: the manifest and image it renders (dist/demo).
DEMO_VERSION ?= v0.0.0-demo
DEMO_DIST ?= dist/demo

# The releases whose source is at hand (hack/tools/kubevirt.sh's default place).
UPSTREAM_RELEASES = $(sort $(patsubst kubevirt-%.tar.gz,%,$(notdir $(wildcard $(or $(VIRTOP_UPSTREAM_SRC),../shared/upstream-src)/kubevirt-v*.tar.gz))))

# The default release (internal/release.Default): what the real node runs in make
# test. The upgrade on the real node (from the release before it) runs only
# with TEST_RELEASES=all, which builds every release.
DEFAULT_RELEASE = $(shell sed -n 's/^const Default = "\(v[^"]*\)"$$/\1/p' internal/release/catalog.go)
E2E_KUBEVIRT_RELEASES = $(filter $(DEFAULT_RELEASE),$(UPSTREAM_RELEASES))
# The releases test/e2e/vms runs VMs on: the default and the one before it
# (the upgrade it makes with a VM running).
VM_RELEASES = $(shell printf '%s\n' $(UPSTREAM_RELEASES) | sort -V | grep -B1 -x '$(DEFAULT_RELEASE)')

.PHONY: test-e2e
test-e2e: tools kustomize node-packages ## end-to-end tests on the local cluster, one package at a time (TEST_RELEASES=default|all); a failing suite's logs in dist/e2e/kept
	rm -rf $(E2E_DIR) && mkdir -p $(E2E_DIR)/kept
	@# The real node's images: the default release's, or every release's
	@# with a source archive (TEST_RELEASES=all).
	$(MAKE) --no-print-directory node-images-upstream KUBEVIRT_RELEASE="$(if $(filter all,$(TEST_RELEASES)),$(UPSTREAM_RELEASES),$(E2E_KUBEVIRT_RELEASES))"
	@# With TEST_RELEASES=all, VMs boot on the real node (test/e2e/vms):
	@# virt-handler's and virt-launcher's images of the default release and
	@# the one before it, and the guest.
	$(if $(filter all,$(TEST_RELEASES)),$(MAKE) --no-print-directory node-images-vm KUBEVIRT_RELEASE="$(VM_RELEASES)")
	@# Built once for every suite: virtop (as the suites build it) and the
	@# release manifests the install and adopt suites apply.
	$(GO) build -o $(E2E_DIR)/virtop ./cmd/virtop
	$(MAKE) --no-print-directory release-manifests VERSION=v0.0.0-e2e DIST=$(abspath $(E2E_DIR))/release-manifests PLATFORMS=linux/$(GOARCH)
	$(call gotest,e2e,-count=1 -p 1 -timeout $(E2E_TIMEOUT) $(E2E_PKGS),$(E2E_ENV))

.PHONY: up
up: build tools-demo node-packages node-images-upstream ## Start the local cluster with the operator (CLUSTER_NAME, NODES, PROMETHEUS=none|before|late)
	$(if $(filter 1 true yes,$(VMS)),@$(MAKE) --no-print-directory node-images-vm)
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus $(PROMETHEUS) $(if $(filter 1 true yes,$(VMS)),--vms)

.PHONY: down
down: build ## Stop the local cluster's operator and delete the cluster (CLUSTER_NAME)
	$(BIN) down --name $(CLUSTER_NAME)

.PHONY: demo
demo: ## Build only what the demo runs (virtop, the cluster's tools, the real node's images, the release manifest), then virtop up with the operator as a pod and Prometheus late (VMS=1: and a VM booted on the real node)
	@echo "make demo: 1/5 bin/virtop (a first build takes about 2-5 minutes on 2 cores)"
	@$(MAKE) --no-print-directory build
	@echo "make demo: 2/5 the local cluster's tools (etcd, Kubernetes, kwok, prometheus-operator, kube-state-metrics), missing ones only"
	@hack/tools/build.sh demo
	@echo "make demo: 3/5 the real node: its Debian packages and images (pause and KubeVirt's components from upstream's source), missing ones only"
	@$(MAKE) --no-print-directory node-packages node-images-upstream
	$(if $(filter 1 true yes,$(VMS)),@$(MAKE) --no-print-directory node-images-vm)
	@echo "make demo: 4/5 the release manifest and the operator's image, as a release ships them (make release-manifests into $(DEMO_DIST))"
	@$(MAKE) --no-print-directory release-manifests VERSION=$(DEMO_VERSION) DIST=$(DEMO_DIST) PLATFORMS=linux/$$($(GO) env GOARCH)
	@echo "make demo: 5/5 virtop up --prometheus late, the operator a pod on the real node"
	$(BIN) up --name $(CLUSTER_NAME) --nodes $(NODES) --prometheus late $(if $(filter 1 true yes,$(VMS)),--vms) \
		--operator-manifest $(DEMO_DIST)/virtop-operator.yaml --operator-image $(DEMO_DIST)/virtop-image.tar