package main

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// version describes this build: the module version, the VCS revision and
// time when the binary was built from a checkout, and the Go version.
func version() string {
	parts := []string{"xds-server"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return strings.Join(append(parts, "(unknown build)", runtime.Version()), " ")
	}
	parts = append(parts, info.Main.Version)
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	if rev != "" {
		parts = append(parts, "revision "+rev[:min(len(rev), 12)]+modified)
	} else {
		parts = append(parts, "(no VCS revision: built outside a checkout or with -buildvcs=false)")
	}
	if at != "" {
		parts = append(parts, at)
	}
	return strings.Join(append(parts, info.GoVersion), " ")
}
