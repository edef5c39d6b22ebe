package config

import (
	"strings"
	"testing"
)

// TestUnknownEnvWarns: a misspelt XDS_SERVER_* variable is a warning that
// names it and suggests the key, never shows its value, and does not make
// the configuration invalid; known keys, the scripts' own variables and
// other variables pass without a word.
func TestUnknownEnvWarns(t *testing.T) {
	environ := []string{
		"XDS_SERVER_XDS_ADRESS=127.0.0.1:1", // one edit from XDS_SERVER_XDS_ADDRESS
		"XDS_SERVER_RATELIMIT_REDIS_PASWORD=hunter2",
		"XDS_SERVER_XDS_ADDRESS=127.0.0.1:18000",
		"XDS_SERVER_CACHE=/tmp/cache",
		"HOME=/root",
		"XDS_SERVER_TOTALLY_UNRELATED_THING=1",
	}
	env := func(name string) (string, bool) {
		for _, kv := range environ {
			if n, v, _ := strings.Cut(kv, "="); n == name {
				return v, true
			}
		}
		return "", false
	}
	_, errs := Load(Sources{Env: env, Environ: environ})
	if errs.Invalid() {
		t.Fatalf("unknown variables made the configuration invalid: %v", errs)
	}
	got := map[string]string{}
	for _, e := range errs {
		if !e.Warning {
			t.Errorf("not a warning: %v", e)
		}
		got[e.Key] = e.Error()
	}
	if len(got) != 3 {
		t.Errorf("want 3 warnings, got %d: %v", len(got), errs)
	}
	if w := got["XDS_SERVER_XDS_ADRESS"]; !strings.Contains(w, "did you mean XDS_SERVER_XDS_ADDRESS?") {
		t.Errorf("misspelt address: %q, want a suggestion", w)
	}
	if w := got["XDS_SERVER_RATELIMIT_REDIS_PASWORD"]; w == "" || strings.Contains(w, "hunter2") {
		t.Errorf("misspelt password: %q: want a warning without the value", w)
	}
	if _, ok := got["XDS_SERVER_TOTALLY_UNRELATED_THING"]; !ok {
		t.Error("an unrelated XDS_SERVER_ variable is not warned of")
	}
}
