package ratelimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzLoadConfig loads arbitrary YAML as a rate-limit config file: either
// an error wrapping ErrInvalidConfig and no config, or a config whose
// rules all belong to its domains, have a key, and number at most the
// descriptors the file could hold.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(fuzzRLSYAML))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket, burst: 5}\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true}\n  - key: b\n    rate_limit: {unit: day, requests_per_unit: 1, name: b}\n    replaces: [{name: b}]\n"))
	f.Add([]byte("domain: d\ndescriptors: &x\n  - key: a\n    descriptors: *x\n"))
	f.Add([]byte(""))
	if paths, _ := filepath.Glob("testdata/*.yaml"); len(paths) > 0 {
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Load(File{Name: "fuzz.yaml", Data: data})
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) || c != nil {
				t.Fatalf("Load = %v, %v; want nil and an ErrInvalidConfig", c, err)
			}
			return
		}
		domains := map[string]bool{}
		for _, d := range c.Domains() {
			domains[d] = true
		}
		rules := c.Rules()
		if len(rules) > len(data) {
			t.Fatalf("%d rules from %d bytes", len(rules), len(data))
		}
		for _, r := range rules {
			if !domains[r.Domain] || r.Key == "" {
				t.Fatalf("rule %+v: domain not loaded or no key", r)
			}
		}
	})
}

// TestLoadAliasBombs: YAML aliases that make a recursive or exponential
// descriptor tree are errors, found fast (they used to recurse until the
// stack ran out).
func TestLoadAliasBombs(t *testing.T) {
	exp := "domain: d\nl0: &l0 [{key: z}]\n"
	for i := 1; i <= 30; i++ {
		exp += fmt.Sprintf("l%d: &l%d [{key: a, descriptors: *l%d}, {key: b, descriptors: *l%d}]\n", i, i, i-1, i-1)
	}
	exp += "descriptors: *l30\n" // 2^30 descriptors, distinct at each level
	for name, tc := range map[string]struct{ yaml, want string }{
		"recursive":   {"domain: d\ndescriptors: &x\n  - key: a\n    descriptors: *x\n", "nested more than 32 deep"},
		"exponential": {exp, "descriptors in one file"},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := Load(File{Name: "bomb.yaml", Data: []byte(tc.yaml)})
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
