package toolbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// install writes an executable name of version under cache.
func install(t *testing.T, cache, name, version string) string {
	t.Helper()
	dir := filepath.Join(cache, name+"-"+version, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCachedFirst(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDS_SERVER_CACHE", cache)
	t.Setenv("XDS_SERVER_ENVOY_BIN", "")
	consul, envoy := install(t, cache, "consul", ConsulVersion), install(t, cache, "envoy", EnvoyVersion)
	if got, err := Consul(); err != nil || got != consul {
		t.Errorf("Consul() = %q, %v; want %q", got, err, consul)
	}
	if got, err := Envoy(); err != nil || got != envoy {
		t.Errorf("Envoy() = %q, %v; want %q", got, err, envoy)
	}
}

func TestOtherVersionIsNotUsed(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDS_SERVER_CACHE", cache)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	install(t, cache, "consul", "v0.0.1")
	_, err := Consul()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(cache, "consul-"+ConsulVersion, "bin", "consul")) {
		t.Errorf("Consul() error %v, want one naming the path tried", err)
	}
}

func TestEnvoyFromEnvironment(t *testing.T) {
	t.Setenv("XDS_SERVER_ENVOY_BIN", "/opt/envoy")
	if got, err := Envoy(); err != nil || got != "/opt/envoy" {
		t.Errorf("Envoy() = %q, %v; want /opt/envoy", got, err)
	}
}
