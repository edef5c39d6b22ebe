package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xds-server/xds-server/config"
	"github.com/xds-server/xds-server/netlimit"
	"github.com/xds-server/xds-server/ratelimit"
)

// dupDomainDir writes two rate-limit files of domain d and returns their
// directory.
func dupDomainDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, key := range map[string]string{"a.yaml": "a", "b.yaml": "b"} {
		data := "domain: d\ndescriptors:\n  - key: " + key + "\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ratelimit.merge_domains reaches the loading of ratelimit.config and the
// service's reloads.
func TestRateLimitMergeDomainsKey(t *testing.T) {
	dir := dupDomainDir(t)
	t.Setenv(mergeDomainsEnv, "") // restored after the test
	os.Unsetenv(mergeDomainsEnv)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--ratelimit.config", dir}, &stdout, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `domain "d" in `+filepath.Join(dir, "b.yaml")+" is already defined in "+filepath.Join(dir, "a.yaml")) {
		t.Errorf("validate without merge_domains: exit %d, stderr:\n%s", code, &stderr)
	}
	stderr.Reset()
	file := writeConfig(t, "ratelimit:\n  config: "+dir+"\n  merge_domains: true\n")
	if code := run([]string{"validate", "--config", file}, &stdout, &stderr); code != 0 {
		t.Errorf("validate with merge_domains: exit %d, stderr:\n%s", code, &stderr)
	}
	stderr.Reset()
	t.Setenv(mergeDomainsEnv, "true")
	if code := run([]string{"validate", "--ratelimit.config", dir}, &stdout, &stderr); code != 0 {
		t.Errorf("validate with %s=true: exit %d, stderr:\n%s", mergeDomainsEnv, code, &stderr)
	}
	cfg, err := loadArgs(t, "--ratelimit.merge_domains", "--ratelimit.config", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RateLimit.MergeDomains || !cfg.RateLimit.Service().MergeDomains || !cfg.RateLimit.LoadOptions().MergeDomains {
		t.Errorf("--ratelimit.merge_domains not passed on: %+v", cfg.RateLimit)
	}
}

// Regression (issue 14): an empty ratelimit.config directory was served
// as zero domains (every request OK). It is an error for the server,
// validate and ratelimit check alike, unless ratelimit.allow_empty.
func TestRateLimitAllowEmptyKey(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(allowEmptyEnv, "") // restored after the test
	os.Unsetenv(allowEmptyEnv)
	want := empty + " has no *.yaml or *.yml file (set ratelimit.allow_empty: true to serve no domains)"
	var stdout, stderr bytes.Buffer
	if code := run([]string{"validate", "--ratelimit.config", empty}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("validate of an empty directory: exit %d, stderr:\n%s", code, &stderr)
	}
	stderr.Reset()
	if code := run([]string{"ratelimit", "check", "--config", empty}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("ratelimit check of an empty directory: exit %d, stderr:\n%s", code, &stderr)
	}
	log := slog.New(slog.DiscardHandler)
	var cl closers
	defer cl.close()
	rc := config.RateLimitConfig{Address: "127.0.0.1:0", Config: empty, FailureMode: "allow", Store: "memory"}
	reg := prometheus.NewRegistry()
	if _, err := newRateLimit(&cl, rc, log, reg, newSecurity(reg, log), netlimit.NewMetrics(reg), nil); !errors.Is(err, ratelimit.ErrEmptyConfig) {
		t.Errorf("server with an empty directory: %v, want ErrEmptyConfig", err)
	}

	stderr.Reset()
	if code := run([]string{"validate", "--ratelimit.config", empty, "--ratelimit.allow_empty"}, &stdout, &stderr); code != 0 {
		t.Errorf("validate with allow_empty: exit %d, stderr:\n%s", code, &stderr)
	}
	t.Setenv(allowEmptyEnv, "true")
	if code := run([]string{"ratelimit", "check", "--config", empty}, &stdout, &stderr); code != 0 {
		t.Errorf("ratelimit check with %s=true: exit %d, stderr:\n%s", allowEmptyEnv, code, &stderr)
	}
	cfg, err := loadArgs(t, "--ratelimit.config", empty, "--ratelimit.address", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RateLimit.AllowEmpty || !cfg.RateLimit.Service().AllowEmpty || !cfg.RateLimit.LoadOptions().AllowEmpty {
		t.Fatalf("%s=true not passed on: %+v", allowEmptyEnv, cfg.RateLimit)
	}
	reg2 := prometheus.NewRegistry()
	r, err := newRateLimit(&cl, cfg.RateLimit.RateLimitConfig, log, reg2, newSecurity(reg2, log), netlimit.NewMetrics(reg2), nil)
	if err != nil {
		t.Fatalf("server with allow_empty: %v", err)
	}
	defer r.stop(context.Background())
	if n := len(r.svc.Config().Domains()); n != 0 {
		t.Errorf("%d domains, want 0", n)
	}
}
