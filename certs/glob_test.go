package certs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xds-server/xds-server/certs"
)

func TestMatch(t *testing.T) {
	for name, tc := range map[string]struct {
		glob, s string
		want    bool
	}{
		"literal":                    {"envoy-1", "envoy-1", true},
		"literal differs":            {"envoy-1", "envoy-2", false},
		"star matches everything":    {"*", "spiffe://x/y", true},
		"star matches empty":         {"envoy-*", "envoy-", true},
		"prefix":                     {"envoy-*", "envoy-7", true},
		"prefix differs":             {"envoy-*", "grpc-7", false},
		"star crosses slashes":       {"spiffe://example.org/*/envoy", "spiffe://example.org/ns/web/envoy", true},
		"suffix must end":            {"*.example.org", "a.example.org.evil", false},
		"middle":                     {"a*b*c", "axxbyyc", true},
		"middle out of order":        {"a*b*c", "acb", false},
		"empty glob matches nothing": {"", "", false},
		"prefix and suffix overlap":  {"ab*ba", "aba", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := certs.Match(tc.glob, tc.s); got != tc.want {
				t.Errorf("Match(%q, %q) = %v, want %v", tc.glob, tc.s, got, tc.want)
			}
		})
	}
}

func TestFileReloadsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1000, 0)}
	f, err := certs.NewFile(path, time.Second, clk.now)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(f.Bytes()); got != "first" {
		t.Fatalf("Bytes = %q", got)
	}
	if err := os.WriteFile(path, []byte("second-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := string(f.Bytes()); got != "first" {
		t.Errorf("before the interval: %q, want first", got)
	}
	clk.add(time.Second)
	if got := string(f.Bytes()); got != "second-token" {
		t.Errorf("after the interval: %q, want second-token", got)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	if got := string(f.Bytes()); got != "second-token" {
		t.Errorf("emptied file: %q, want the last content", got)
	}
	if _, err := certs.NewFile(filepath.Join(t.TempDir(), "none"), 0, nil); err == nil {
		t.Error("missing file: no error")
	}
}
