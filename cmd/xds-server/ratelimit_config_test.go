package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
