# The per-release data of internal/release (issue 15): run by hand, never by
# CI. release-data reads upstream's own strategy dumps
# (../shared/upstream-strategies/<release>/strategy.yaml.gz) and upstream's
# source at the tag (KUBEVIRT_GIT, a kubevirt/kubevirt git directory) into
# internal/release/data/<release>/; crd-schemas regenerates the CRD schemas
# from kubevirt.io/api with controller-gen (see hack/crdschemas/gen.sh).
UPSTREAM_STRATEGIES ?= $(CURDIR)/../shared/upstream-strategies
KUBEVIRT_GIT ?=
# Every release directory, bases first (hack/releases.sh); those with a
# reference dump under UPSTREAM_STRATEGIES get their objects generated, the
# others (v1.5.0) keep their hand-written ones.
RELEASES ?= $(shell hack/releases.sh)
RELEASES_WITH_DUMPS ?= $(strip $(foreach r,$(RELEASES),$(if $(wildcard $(UPSTREAM_STRATEGIES)/$(r)/strategy.yaml.gz),$(r))))

.PHONY: release-data
release-data: ## Regenerate internal/release/data from upstream's dumps and source (KUBEVIRT_GIT=<kubevirt git dir>)
	@test -n "$(KUBEVIRT_GIT)" || { echo "set KUBEVIRT_GIT to a kubevirt/kubevirt git directory" >&2; exit 1; }
	@test -n "$(RELEASES_WITH_DUMPS)" || { echo "no reference dump under $(UPSTREAM_STRATEGIES)" >&2; exit 1; }
	@for r in $(filter-out $(RELEASES_WITH_DUMPS),$(RELEASES)); do \
		echo "$$r: no reference dump in $(UPSTREAM_STRATEGIES): its objects are kept as written"; done
	@for r in $(RELEASES_WITH_DUMPS); do \
		$(GO) run ./hack/releasegen objects -release $$r -dump $(UPSTREAM_STRATEGIES)/$$r/strategy.yaml.gz || exit 1; done
	@for r in $(RELEASES); do \
		$(GO) run ./hack/releasegen featuregates -release $$r -git $(KUBEVIRT_GIT) && \
		$(GO) run ./hack/releasegen instancetypes -release $$r -git $(KUBEVIRT_GIT) || exit 1; done

.PHONY: crd-schemas
crd-schemas: controller-gen ## Regenerate internal/release/data/*/schemas from kubevirt.io/api with controller-gen
	CONTROLLER_GEN=$(CONTROLLER_GEN) UPSTREAM_STRATEGIES=$(UPSTREAM_STRATEGIES) hack/crdschemas/gen.sh
