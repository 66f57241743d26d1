# virtop — make help lists the targets.
SHELL := /usr/bin/env bash -o pipefail
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.1.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/virtop-dev/virtop/internal/version.Version=$(VERSION) -X github.com/virtop-dev/virtop/internal/version.Commit=$(COMMIT)
BIN := bin/virtop

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z0-9_.-]+:.*## /{printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/virtop
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/virtop

.PHONY: fmt
fmt: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## go vet
	$(GO) vet ./...

# Other targets (generate, manifests, test, verify, tools, e2e) live in hack/make/*.mk.
include $(sort $(wildcard hack/make/*.mk))
