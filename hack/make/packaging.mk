# Packaging: the operator's RBAC (generated), the release manifests
# (kustomize), the Helm chart and the OCI image. helm and kustomize come from
# `make tools-packaging` (hack/make/tools.mk; `make kustomize` builds only
# kustomize); `make test` does not build them, but its end-to-end package
# test/e2e/install renders the release manifests and needs kustomize cached.
DIST ?= dist
# make image-push REGISTRY=… pushes $(REGISTRY)/virtop; the release
# manifests name the same repository, pinned by digest.
REGISTRY ?= ghcr.io/virtop-dev
IMAGE_REPOSITORY ?= $(REGISTRY)/virtop
SOURCE_URL ?= https://github.com/virtop-dev/virtop
# The image's platforms: those KubeVirt ships.
PLATFORMS ?= linux/amd64 linux/arm64 linux/s390x
IMAGE_TAR = $(DIST)/virtop-image.tar
IMAGE_DIGEST_FILE = $(DIST)/virtop-image.digest
# Reproducible builds: every file and the image carry the commit's time.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
COMMON_INSTANCETYPES := $(notdir $(wildcard internal/release/data/instancetypes/v*))
PACKAGING_TIMEOUT ?= 20m

.PHONY: rbac
rbac: ## Regenerate the operator's RBAC (config/rbac, charts/virtop/files) from the install strategies
	$(GO) run ./hack/rbacgen

.PHONY: chart-crds
chart-crds: ## Copy virtop's CRDs (config/crd/bases) into the chart (charts/virtop/files/crds, rendered by templates/crds.yaml)
	rm -f charts/virtop/files/crds/*.yaml
	mkdir -p charts/virtop/files/crds
	cp config/crd/bases/*.yaml charts/virtop/files/crds/

.PHONY: verify-packaging
verify-packaging: ## Fail if the generated RBAC or the chart's CRDs are stale
	$(GO) run ./hack/rbacgen -check
	@diff -r config/crd/bases charts/virtop/files/crds || { echo "charts/virtop/files/crds differs from config/crd/bases: run 'make chart-crds' and commit"; exit 1; }

# make verify checks the packaging too.
verify: verify-packaging

.PHONY: kustomize
kustomize: ## Build kustomize into the cache if missing (release-manifests needs only it)
	@hack/tools/build.sh kustomize

.PHONY: release-manifests
release-manifests: kustomize image ## Write dist/virtop-operator.yaml and dist/kubevirt-cr.yaml, the image pinned to VERSION and the digest of `make image`
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "release-manifests: VERSION=$(VERSION) is not a release tag (v…); set VERSION=v…" >&2; exit 1;; esac
	@mkdir -p $(DIST)
	@# kustomize refuses absolute paths: a throw-away overlay inside dist/.
	@tmp=$(DIST)/.release-kustomize && rm -rf "$$tmp" && mkdir -p "$$tmp" && trap 'rm -rf "$$tmp"' EXIT && \
	printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
		'resources:' "- $$(realpath --relative-to="$$tmp" config/default)" \
		'images:' '- name: ghcr.io/virtop-dev/virtop' '  newName: $(IMAGE_REPOSITORY)' '  newTag: $(VERSION)' "  digest: $$(cat $(IMAGE_DIGEST_FILE))" > "$$tmp/kustomization.yaml" && \
	$(KUSTOMIZE) build "$$tmp" > $(DIST)/virtop-operator.yaml
	cp config/samples/kubevirt-cr.yaml $(DIST)/kubevirt-cr.yaml
	@echo "wrote $(DIST)/virtop-operator.yaml ($(IMAGE_REPOSITORY):$(VERSION)@$$(cat $(IMAGE_DIGEST_FILE))) and $(DIST)/kubevirt-cr.yaml"

.PHONY: image
image: ## Build dist/virtop-image.tar: an OCI image index for PLATFORMS with its SPDX SBOM, without a container engine
	@mkdir -p $(DIST)/image
	@set -e; for p in $(PLATFORMS); do \
		case "$$p" in linux/*) ;; *) echo "image: platform $$p is not linux/ARCH" >&2; exit 2;; esac; \
		echo "go build virtop for $$p"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$${p#linux/} $(GO) build -trimpath -buildvcs=false -ldflags '$(LDFLAGS) -s -w' \
			-o $(DIST)/image/$${p#linux/}/virtop ./cmd/virtop; \
	done
	cd hack/image && GOTOOLCHAIN=local $(GO) run . build \
		$(foreach p,$(PLATFORMS),-binary $(p)=$(abspath $(DIST))/image/$(notdir $(p))/virtop) \
		-version $(VERSION) -revision '$(COMMIT)' -source $(SOURCE_URL) -repository $(IMAGE_REPOSITORY) \
		-source-date-epoch $(SOURCE_DATE_EPOCH) -doc $(CURDIR)/LICENSE -doc $(CURDIR)/NOTICE \
		$(foreach v,$(COMMON_INSTANCETYPES),-embedded common-instancetypes@$(v)) \
		-output $(abspath $(IMAGE_TAR)) -sbom $(abspath $(DIST))/virtop-image.spdx.json -digest-file $(abspath $(IMAGE_DIGEST_FILE))

.PHONY: image-push
image-push: image ## Push the image index and its SBOM to $(REGISTRY)/virtop:$(VERSION) (REGISTRY=…; credentials from ~/.docker/config.json)
	cd hack/image && GOTOOLCHAIN=local $(GO) run . push -input $(abspath $(IMAGE_TAR)) -repository $(IMAGE_REPOSITORY) \
		-tag $(VERSION) -digest-file $(abspath $(DIST))/virtop-image.pushed

CHART_VERSION ?= $(patsubst v%,%,$(VERSION))
CHART_REPOSITORY ?= $(REGISTRY)/charts

.PHONY: chart-package
chart-package: ## Package the Helm chart as dist/virtop-CHART_VERSION.tgz (version and appVersion from VERSION=v…)
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "chart-package: VERSION=$(VERSION) is not a release tag (v…)" >&2; exit 1;; esac
	@mkdir -p $(DIST)
	$(HELM) lint --strict charts/virtop
	$(HELM) package charts/virtop --version $(CHART_VERSION) --app-version $(VERSION) --destination $(DIST)

.PHONY: chart-push
chart-push: chart-package ## Push the packaged chart to oci://$(CHART_REPOSITORY) (REGISTRY=…; PLAIN_HTTP=1 for a registry without TLS)
	$(HELM) push $(DIST)/virtop-$(CHART_VERSION).tgz oci://$(CHART_REPOSITORY) $(if $(PLAIN_HTTP),--plain-http)

# CI runs it for this machine's platform only (PLATFORMS=linux/<arch>);
# make test-all for every platform.
.PHONY: test-packaging
test-packaging: tools tools-packaging image ## Packaging tests: the image for PLATFORMS (pushed to a loopback registry, rebuilt to the same digest), chart vs kustomize, the chart's schema, release manifests applied twice
	$(call gotest,packaging-image,-count=1 -timeout $(PACKAGING_TIMEOUT) ./...,cd hack/image && GOTOOLCHAIN=local)
	$(call gotest,packaging,-tags packaging -count=1 -p 1 -timeout $(PACKAGING_TIMEOUT) ./test/packaging/...,VIRTOP_IMAGE_TAR=$(abspath $(IMAGE_TAR)) VIRTOP_VERSION=$(VERSION) VIRTOP_IMAGE_PLATFORMS="$(PLATFORMS)")
