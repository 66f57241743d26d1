# Images for a real Kubernetes node that reaches no container registry,
# each a docker-archive tar for `ctr -n k8s.io images import` (containerd
# names the image exactly as the archive does): the pod sandbox's pause,
# upstream KubeVirt's control plane built from its source (test peers,
# hack/tools/kubevirt.sh) and virtop's operator image for one platform.
# On a machine that reaches quay.io the published KubeVirt images are used
# instead. docs/node-images.md says more.

# The catalog's default release (internal/release.Default); several may be
# given: KUBEVIRT_RELEASE="v1.8.4 v1.9.0".
KUBEVIRT_RELEASE ?= $(shell sed -n 's/^const Default = "\(v[^"]*\)"$$/\1/p' internal/release/catalog.go)
# The registry part of the KubeVirt images' names; the install strategy
# names its images after the KubeVirt resource's imageRegistry.
KUBEVIRT_REGISTRY ?= quay.io/kubevirt
# The node's architecture (default this machine's).
NODE_ARCH ?= $(shell $(GO) env GOARCH)
OPERATOR_IMAGE_NAME ?= $(IMAGE_REPOSITORY):$(VERSION)
OPERATOR_IMAGE_ARCHIVE = $(DIST)/virtop-operator-image.tar

.PHONY: node-images
node-images: node-images-upstream node-images-operator ## Build the node's images as docker-archive tars: pause, KubeVirt KUBEVIRT_RELEASE from source (into the tool cache), virtop's operator image (dist/virtop-operator-image.tar)
	@echo "node images (ctr -n k8s.io images import FILE):"
	@echo "  $(TOOLS_DIR)/node-images/pause.tar  registry.k8s.io/pause:3.10"
	@for r in $(KUBEVIRT_RELEASE); do for f in $(TOOLS_DIR)/kubevirt-$$r/images/*.tar; do \
		echo "  $$f  $(KUBEVIRT_REGISTRY)/$$(basename $$f .tar):$$r"; done; done
	@echo "  $(OPERATOR_IMAGE_ARCHIVE)  $(OPERATOR_IMAGE_NAME)"

.PHONY: node-images-upstream
node-images-upstream: ## Build the pause image and KubeVirt KUBEVIRT_RELEASE's images from source into the tool cache (hack/tools/kubevirt.sh)
	@case "$(NODE_ARCH)" in "$$($(GO) env GOARCH)") ;; *) echo "node-images: KubeVirt and pause are built for this machine ($$($(GO) env GOARCH)), not NODE_ARCH=$(NODE_ARCH)" >&2; exit 2;; esac
	VIRTOP_TOOLS_DIR=$(TOOLS_DIR) KUBEVIRT_REGISTRY=$(KUBEVIRT_REGISTRY) hack/tools/kubevirt.sh pause $(KUBEVIRT_RELEASE)

# The same binary and flags as `make image`, so the archive holds the very
# image `make image` puts in its index for linux/$(NODE_ARCH) (same image id).
.PHONY: node-images-operator
node-images-operator: ## Write virtop's operator image for linux/NODE_ARCH as a docker-archive, dist/virtop-operator-image.tar, named OPERATOR_IMAGE_NAME
	@mkdir -p $(DIST)/image/$(NODE_ARCH)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(NODE_ARCH) $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS) -s -w' \
		-o $(DIST)/image/$(NODE_ARCH)/virtop ./cmd/virtop
	cd hack/image && GOTOOLCHAIN=local $(GO) run . build -binary linux/$(NODE_ARCH)=$(abspath $(DIST))/image/$(NODE_ARCH)/virtop \
		-version $(VERSION) -revision '$(COMMIT)' -source $(SOURCE_URL) -repository $(IMAGE_REPOSITORY) \
		-source-date-epoch $(SOURCE_DATE_EPOCH) -doc $(CURDIR)/LICENSE -doc $(CURDIR)/NOTICE \
		-docker-archive $(abspath $(OPERATOR_IMAGE_ARCHIVE)) -tag $(OPERATOR_IMAGE_NAME)

# Not part of node-images, make demo or CI: it needs root and Debian's
# mirror, and costs minutes and a few hundred MB (docs/node-images.md).
.PHONY: node-images-vm
node-images-vm: ## Build KubeVirt KUBEVIRT_RELEASE's virt-handler and virt-launcher images from source on Debian's QEMU and libvirt, and the VMs' guest (root; hack/tools/kubevirt-node.sh, smoke-guest.sh)
	@hack/tools/node-packages.sh --kubevirt-build
	VIRTOP_TOOLS_DIR=$(TOOLS_DIR) KUBEVIRT_REGISTRY=$(KUBEVIRT_REGISTRY) hack/tools/kubevirt.sh $(KUBEVIRT_RELEASE) node
	VIRTOP_TOOLS_DIR=$(TOOLS_DIR) GO=$(GO) hack/tools/smoke-guest.sh

# Boots a TCG guest inside the virt-launcher image node-images-vm built,
# without Kubernetes (hack/tools/launcher-smoke.sh; root, Debian's mirror
# for the guest's kernel and busybox the first time).
.PHONY: launcher-smoke
launcher-smoke: ## Boot a tiny VM with the virt-launcher image's virtqemud and QEMU (TCG), check its serial console (root; after node-images-vm)
	VIRTOP_TOOLS_DIR=$(TOOLS_DIR) hack/tools/launcher-smoke.sh $(KUBEVIRT_RELEASE)

.PHONY: node-packages
node-packages: ## Install the real node's Debian packages when missing (containerd, runc, iptables, the CNI plugins; root)
	@hack/tools/node-packages.sh
