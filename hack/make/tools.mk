# Tool binaries, built from the Go module proxy into a cache outside the
# checkout (layout: internal/tools/toolpaths). Versions: hack/tools/versions.env.
include hack/tools/versions.env

TOOLS_DIR ?= $(or $(VIRTOP_TOOLS_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/virtop/tools)
KUBE_BIN_DIR := $(TOOLS_DIR)/kubernetes-$(KUBERNETES_VERSION)
KUBE_APISERVER := $(KUBE_BIN_DIR)/kube-apiserver
KUBECTL := $(KUBE_BIN_DIR)/kubectl
ETCD := $(TOOLS_DIR)/etcd-$(ETCD_VERSION)/etcd
KWOKCTL := $(TOOLS_DIR)/kwok-$(KWOK_VERSION)/kwokctl
KWOK := $(TOOLS_DIR)/kwok-$(KWOK_VERSION)/kwok
# Use $(CONTROLLER_GEN) in recipes; depend on the `controller-gen` target to
# build it when missing (this file may be included after yours, so the
# variable can be empty while your prerequisites are read).
CONTROLLER_GEN := $(TOOLS_DIR)/controller-tools-$(CONTROLLER_TOOLS_VERSION)/controller-gen
HELM := $(TOOLS_DIR)/helm-$(HELM_VERSION)/helm
KUSTOMIZE := $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VERSION)/kustomize

.PHONY: tools
tools: ## Build the pinned Kubernetes, etcd, kwok, controller-gen, prometheus-operator and kube-state-metrics binaries into the cache (tests)
	hack/tools/build.sh core

.PHONY: tools-demo
tools-demo: ## Build only what virtop up runs (etcd, the Kubernetes commands, kwok, kwokctl; prometheus-operator and kube-state-metrics for --prometheus)
	hack/tools/build.sh demo

.PHONY: tools-packaging
tools-packaging: ## Build helm and kustomize into the cache (packaging only)
	hack/tools/build.sh packaging

.PHONY: controller-gen
controller-gen: ## Build controller-gen into the cache if missing
	@hack/tools/build.sh controller-gen

.PHONY: monitoring-crds
monitoring-crds: controller-gen ## Regenerate internal/tools/crds/monitoring from the prometheus-operator API module
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/tools/monitoring-crds.sh

.PHONY: gitops-crds
gitops-crds: controller-gen ## Regenerate test/crds/gitops (Flux's CRDs) from Flux's API modules
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/tools/gitops-crds.sh
