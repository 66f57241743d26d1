# Rule checks that need Debian's promtool (package prometheus, which .ci/run
# installs): promtool and virtop's own evaluator (`virtop rules test`) run
# every built-in rule test of every release, and upstream's own rule tests
# when ../shared has them, and must agree on each file's verdict and failed
# expectations; every release's rule file (`virtop rules -o rulefile`)
# passes promtool check rules. make test covers the default release
# (TEST_RELEASES=default), make test-all every release.
PROMTOOL ?= $(shell command -v promtool 2>/dev/null || echo /usr/bin/promtool)
RULES_TIMEOUT ?= 30m

.PHONY: test-rules-promtool
test-rules-promtool: ## promtool and `virtop rules test` agree on every rule test; promtool accepts the rule files (TEST_RELEASES=default|all)
	@test -x "$(PROMTOOL)" || { echo "promtool not found at $(PROMTOOL) (Debian package prometheus); set PROMTOOL="; exit 1; }
	$(call gotest,rules-promtool,-count=1 -timeout $(RULES_TIMEOUT) -run '^(TestPromtoolAgrees|TestPromtoolChecksRuleFiles|TestPromtoolChecksCLIRuleFile)$$' ./internal/tools/ruletest/ ./internal/cli/,VIRTOP_PROMTOOL=$(PROMTOOL))
