# Generated code: deepcopy functions and CRDs, committed and checked by verify.

.PHONY: generate
generate: controller-gen ## Generate deepcopy functions for the API types
	$(CONTROLLER_GEN) object:headerFile="" paths=./api/...

.PHONY: manifests
manifests: controller-gen ## Generate config/crd/bases: virtop's KubeVirtMonitoring CRD, and upstream's KubeVirt CRD with virtop's checks laid over it
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=$$tmp && \
	cp $$tmp/virtop.dev_kubevirtmonitorings.yaml config/crd/bases/ && \
	$(GO) run ./hack/kubevirtcrd merge -upstream config/crd/upstream/kubevirt.io_kubevirts.yaml \
		-virtop $$tmp/kubevirt.io_kubevirts.yaml -out config/crd/bases/kubevirt.io_kubevirts.yaml

.PHONY: kubevirt-crd-upstream
kubevirt-crd-upstream: controller-gen ## Regenerate config/crd/upstream (upstream's KubeVirt CRD from kubevirt.io/api of the newest catalog release; needs the Go module proxy)
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/kubevirtcrd/gen.sh

.PHONY: verify
verify: generate manifests ## Regenerate, gofmt and vet, no package imported by nothing; fail if the tree is dirty or unformatted
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	hack/verify/imported.sh
	@if [ -n "$$(git status --porcelain -- api config go.mod go.sum)" ]; then \
		echo "generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config go.mod go.sum; git diff --stat -- api config; exit 1; fi
