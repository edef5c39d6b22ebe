package config

import (
	"strings"
	"testing"
	"time"
)

// TestMassRemovalGuardSettings covers discovery.mass_removal_guard and
// discovery.mass_removal_hold: defaults, every source, ranges, and the
// conversion into discovery.GuardConfig.
func TestMassRemovalGuardSettings(t *testing.T) {
	cfg, err := loadArgs(t)
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.RemovalGuard(); g.Fraction != 0.5 || g.Hold != 30*time.Second {
		t.Errorf("defaults: %+v, want 0.5 and 30s", g)
	}
	cfg, err = loadArgs(t, "--config", writeConfig(t, "discovery: { mass_removal_guard: 0.8, mass_removal_hold: 2m }\n"),
		"--discovery.mass_removal_hold", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.RemovalGuard(); g.Fraction != 0.8 || g.Hold != 5*time.Second {
		t.Errorf("file and flag: %+v, want 0.8 and 5s (the flag wins)", g)
	}
	if _, err := loadArgs(t, "--discovery.mass_removal_guard", "1", "--discovery.mass_removal_hold", "0"); err != nil {
		t.Errorf("1 and 0 (off): %v", err)
	}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"zero fraction":     {[]string{"--discovery.mass_removal_guard", "0"}, "discovery.mass_removal_guard: 0: is not in (0, 1]"},
		"fraction above 1":  {[]string{"--discovery.mass_removal_guard", "1.5"}, "discovery.mass_removal_guard: 1.5: is not in (0, 1]"},
		"negative fraction": {[]string{"--discovery.mass_removal_guard=-0.1"}, "discovery.mass_removal_guard"},
		"negative hold":     {[]string{"--discovery.mass_removal_hold=-1s"}, "discovery.mass_removal_hold: -1s: is negative"},
		"hold without unit": {[]string{"--discovery.mass_removal_hold", "30"}, "discovery.mass_removal_hold"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadArgs(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
