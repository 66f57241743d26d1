# The per-release data of internal/release (issue 15): run by hand, never by
# CI. release-data reads upstream's own strategy dumps
# (../shared/upstream-strategies/<release>/strategy.yaml.gz) and upstream's
# source at the tag (KUBEVIRT_GIT, a kubevirt/kubevirt git directory) into
# internal/release/data/<release>/; crd-schemas regenerates the CRD schemas
# from kubevirt.io/api with controller-gen (see hack/crdschemas/gen.sh).
UPSTREAM_STRATEGIES ?= $(CURDIR)/../shared/upstream-strategies
KUBEVIRT_GIT ?=
# Releases with a reference dump, bases first.
RELEASES_WITH_DUMPS ?= v1.5.3 v1.6.6 v1.7.4 v1.8.4 v1.9.0
RELEASES ?= v1.5.0 $(RELEASES_WITH_DUMPS)

.PHONY: release-data
release-data: ## Regenerate internal/release/data from upstream's dumps and source (KUBEVIRT_GIT=<kubevirt git dir>)
	@test -n "$(KUBEVIRT_GIT)" || { echo "set KUBEVIRT_GIT to a kubevirt/kubevirt git directory" >&2; exit 1; }
	@for r in $(RELEASES_WITH_DUMPS); do \
		$(GO) run ./hack/releasegen objects -release $$r -dump $(UPSTREAM_STRATEGIES)/$$r/strategy.yaml.gz || exit 1; done
	@for r in $(RELEASES); do \
		$(GO) run ./hack/releasegen featuregates -release $$r -git $(KUBEVIRT_GIT) && \
		$(GO) run ./hack/releasegen instancetypes -release $$r -git $(KUBEVIRT_GIT) || exit 1; done

.PHONY: crd-schemas
crd-schemas: controller-gen ## Regenerate internal/release/data/*/schemas from kubevirt.io/api with controller-gen
	CONTROLLER_GEN=$(CONTROLLER_GEN) UPSTREAM_STRATEGIES=$(UPSTREAM_STRATEGIES) hack/crdschemas/gen.sh
