package config

import (
	"slices"
	"strings"
	"testing"
)

// TestAdminAllowedHosts: admin.allowed_hosts takes names, IPs, "*.domain"
// and "*" from a flag (comma-separated), and refuses ports, schemes and
// other globs, naming the entry.
func TestAdminAllowedHosts(t *testing.T) {
	cfg, err := loadArgs(t, "--admin.allowed_hosts", "admin.example.org,*.corp.example,10.0.0.7,::1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"admin.example.org", "*.corp.example", "10.0.0.7", "::1"}; !slices.Equal(cfg.Admin.AllowedHosts, want) {
		t.Errorf("allowed_hosts = %q, want %q", cfg.Admin.AllowedHosts, want)
	}
	if cfg, err := loadArgs(t); err != nil || len(cfg.Admin.AllowedHosts) != 0 {
		t.Errorf("default allowed_hosts = %q, %v; want none", cfg.Admin.AllowedHosts, err)
	}
	for _, bad := range []string{"admin.example.org:19000", "http://admin.example.org", "a*.example.org", "*.", "evil test"} {
		_, err := loadArgs(t, "--admin.allowed_hosts", bad)
		if err == nil || !strings.Contains(err.Error(), "admin.allowed_hosts") {
			t.Errorf("allowed_hosts %q: %v, want an error naming admin.allowed_hosts", bad, err)
		}
	}
}
