package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machineNotes describes this machine and the binaries compared; what it
// cannot read stays empty.
func machineNotes(redisBin, envoyBin string) machine {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.loadAvg = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.Command(redisBin, "--version").Output(); err == nil {
		// "Redis server v=7.0.15 sha=... malloc=jemalloc-5.3.0 bits=64 build=..."
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.redis = "redis-server " + v
			}
		}
	}
	if envoyBin != "" {
		if bi, err := buildinfo.ReadFile(envoyBin); err == nil {
			m.envoy = "`" + bi.Main.Path + "@" + bi.Main.Version + "` (built with " + bi.GoVersion + ")"
		}
	}
	return m
}
