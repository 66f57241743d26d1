# Packaging: the operator's RBAC (generated), the release manifests
# (kustomize), the Helm chart and the OCI image. helm and kustomize come from
# `make tools-packaging` (hack/make/tools.mk; `make kustomize` builds only
# kustomize); `make test` does not build them, but its end-to-end package
# test/e2e/install renders the release manifests and needs kustomize cached.
DIST ?= dist
IMAGE_REPOSITORY ?= ghcr.io/virtop-dev/virtop
SOURCE_URL ?= https://github.com/virtop-dev/virtop
PACKAGING_TIMEOUT ?= 20m

.PHONY: rbac
rbac: ## Regenerate the operator's RBAC (config/rbac, charts/virtop/files) from the install strategies
	$(GO) run ./hack/rbacgen

.PHONY: chart-crds
chart-crds: ## Copy virtop's CRDs (config/crd/bases) into the chart (charts/virtop/crds)
	rm -f charts/virtop/crds/*.yaml
	mkdir -p charts/virtop/crds
	cp config/crd/bases/*.yaml charts/virtop/crds/

.PHONY: verify-packaging
verify-packaging: ## Fail if the generated RBAC or the chart's CRDs are stale
	$(GO) run ./hack/rbacgen -check
	@diff -r config/crd/bases charts/virtop/crds || { echo "charts/virtop/crds differs from config/crd/bases: run 'make chart-crds' and commit"; exit 1; }

# make verify checks the packaging too.
verify: verify-packaging

.PHONY: kustomize
kustomize: ## Build kustomize into the cache if missing (release-manifests needs only it)
	@hack/tools/build.sh kustomize

.PHONY: release-manifests
release-manifests: kustomize ## Write dist/virtop-operator.yaml and dist/kubevirt-cr.yaml, the image pinned to VERSION
	@case "$(VERSION)" in v[0-9]*) ;; *) echo "release-manifests: VERSION=$(VERSION) is not a release tag (v…); set VERSION=v…" >&2; exit 1;; esac
	@mkdir -p $(DIST)
	@# kustomize refuses absolute paths: a throw-away overlay inside dist/.
	@tmp=$(DIST)/.release-kustomize && rm -rf "$$tmp" && mkdir -p "$$tmp" && trap 'rm -rf "$$tmp"' EXIT && \
	printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' \
		'resources:' "- $$(realpath --relative-to="$$tmp" config/default)" \
		'images:' '- name: ghcr.io/virtop-dev/virtop' '  newName: $(IMAGE_REPOSITORY)' '  newTag: $(VERSION)' > "$$tmp/kustomization.yaml" && \
	$(KUSTOMIZE) build "$$tmp" > $(DIST)/virtop-operator.yaml
	cp config/samples/kubevirt-cr.yaml $(DIST)/kubevirt-cr.yaml
	@echo "wrote $(DIST)/virtop-operator.yaml ($(IMAGE_REPOSITORY):$(VERSION)) and $(DIST)/kubevirt-cr.yaml"

.PHONY: image
image: ## Build dist/virtop-image.tar (OCI layout, static binary, non-root) without a container engine
	@mkdir -p $(DIST)/image
	CGO_ENABLED=0 GOOS=linux GOARCH=$$($(GO) env GOARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(DIST)/image/virtop ./cmd/virtop
	cd hack/image && GOTOOLCHAIN=local $(GO) run . -binary $(CURDIR)/$(DIST)/image/virtop -version $(VERSION) \
		-source $(SOURCE_URL) -repository $(IMAGE_REPOSITORY) -output $(CURDIR)/$(DIST)/virtop-image.tar

.PHONY: test-packaging
test-packaging: tools tools-packaging image ## Packaging tests: chart vs kustomize, release manifests applied twice, the image's binary
	VIRTOP_IMAGE_TAR=$(CURDIR)/$(DIST)/virtop-image.tar $(GO) test -json -tags packaging -count=1 -p 1 -timeout $(PACKAGING_TIMEOUT) ./test/packaging/... | $(SUMMARY)
