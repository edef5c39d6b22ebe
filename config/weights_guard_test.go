package config

import (
	"testing"
	"time"

	"github.com/xds-server/xds-server/weights"
)

// TestOverloadGuardSettings: weights.overload_* reach the tracker's config,
// defaults first, then from the file and flags.
func TestOverloadGuardSettings(t *testing.T) {
	cfg, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	got, want := cfg.Weights.Tracker(), weights.DefaultConfig()
	if got.OverloadPeriod != want.OverloadPeriod || got.OverloadThreshold != want.OverloadThreshold ||
		got.OverloadRecover != want.OverloadRecover || got.OverloadFactor != want.OverloadFactor {
		t.Errorf("default guard %+v, want the weights defaults %+v", got, want)
	}
	cfg, err = loadArgs(t, "--config", writeConfig(t, "weights: { overload_period: 12s, overload_threshold: 0.95 }\n"),
		"--weights.overload_recover", "0.7")
	if err != nil {
		t.Fatal(err)
	}
	got = cfg.Weights.Tracker()
	if got.OverloadPeriod != 12*time.Second || got.OverloadThreshold != 0.95 || got.OverloadRecover != 0.7 {
		t.Errorf("guard %+v, want period 12s, threshold 0.95, recover 0.7", got)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("converted config invalid: %v", err)
	}
}
