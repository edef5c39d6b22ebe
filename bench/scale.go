package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"syscall"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// Present is the wait target of a fleet whose nodes see subsets: every
// node sees at least min endpoints of every service (any health).
func (c Catalog) Present(min int) []Want {
	out := make([]Want, c.Services)
	for s := range c.Services {
		out[s] = Want{Key: Key{Service: c.Service(s)}, Min: min, Status: corev3.HealthStatus_HEALTHY}
	}
	return out
}

// WriteSubsetConfig writes an xds-server config file to dir giving every
// service of the catalog subset_size size, and returns its path.
func (c Catalog) WriteSubsetConfig(dir string, size int) (string, error) {
	var b strings.Builder
	b.WriteString("services:\n")
	for s := range c.Services {
		fmt.Fprintf(&b, "  %s:\n    subset_size: %d\n", c.Service(s), size)
	}
	path := filepath.Join(dir, "xds-server.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	return path, nil
}

// SelfCPU is the CPU time (user + system) this process has used so far, in
// seconds: the load generator's own CPU, which shares the cores with the
// server.
func SelfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// SelfGCs is the number of garbage collections this process has
// completed.
func SelfGCs() float64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64())
}

// Refused sums what the server refused: nodes (xds_nodes_refused_total,
// any reason) and xDS connections (listener_connections_refused_total of
// the xds listener).
func Refused(m Metrics) float64 {
	sum := 0.0
	for series, v := range m {
		if strings.HasPrefix(series, "xds_nodes_refused_total") ||
			strings.HasPrefix(series, "listener_connections_refused_total{") && strings.Contains(series, `listener="xds"`) {
			sum += v
		}
	}
	return sum
}
