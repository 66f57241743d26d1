# Generated code: deepcopy functions and CRDs, committed and checked by verify.

.PHONY: generate
generate: controller-gen ## Generate deepcopy functions for the API types
	$(CONTROLLER_GEN) object:headerFile="" paths=./api/...

.PHONY: manifests
manifests: controller-gen ## Generate the CRDs of the API types into config/crd/bases
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases

.PHONY: verify
verify: generate manifests ## Regenerate, gofmt and vet, no package imported by nothing; fail if the tree is dirty or unformatted
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	hack/verify/imported.sh
	@if [ -n "$$(git status --porcelain -- api config go.mod go.sum)" ]; then \
		echo "generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config go.mod go.sum; git diff --stat -- api config; exit 1; fi
