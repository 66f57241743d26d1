package cli

import (
	"fmt"
	"os"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/rules"
	"github.com/virtop-dev/virtop/internal/monitoring/tuning"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// readTuning reads a --tuning file: one KubeVirtMonitoring.
func readTuning(path string) (*v1alpha1.KubeVirtMonitoring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := tuning.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// applyTuningFile tunes a freshly rendered strategy's monitoring objects
// with the plan's own tuning step (plan.Tune); the strategy's ID stays the
// untuned one: tuning is never part of the strategy.
func applyTuningFile(s *strategy.Strategy, cfg *config.DeploymentConfig, path string) error {
	t, err := readTuning(path)
	if err != nil {
		return err
	}
	rel, ok := release.Lookup(cfg.Version)
	if !ok {
		return &release.NotInCatalogError{Version: cfg.Version, Have: release.Builtin().Versions()}
	}
	objs, out := plan.Tune(s.Objects, cfg, &plan.Tuning{Resource: t, Release: rel})
	if out.Err != nil {
		return fmt.Errorf("%s: %w", path, out.Err)
	}
	s.Objects = objs
	return nil
}

// tunedRuleTestOptions validates a tuning file against a release's rules
// for the built-in test namespace and runbook template, and returns the
// tuned rule options.
func tunedRuleTestOptions(r *release.Release, base rules.Options, path string) (rules.Options, error) {
	t, err := readTuning(path)
	if err != nil {
		return rules.Options{}, err
	}
	opts, err := tuning.RulesOptions(tuning.Input{
		Version:            r.Version,
		RuleSet:            base.RuleSet,
		Namespace:          base.Namespace,
		RunbookURLTemplate: base.RunbookURLTemplate,
	}, t)
	if err != nil {
		return rules.Options{}, fmt.Errorf("%s: %w", path, err)
	}
	return opts, nil
}
