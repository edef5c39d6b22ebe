package bench

import "strings"

// Metric names the cost model (bench/report -model) reads from the
// server's /metrics, each summed over its labels.
const (
	MetricConsulReads  = "xds_discovery_consul_queries_total" // Consul blocking queries issued
	MetricConsulWrites = MetricHAWrites                       // Consul KV writes (0 without ha.enabled)
)

// Sum is the sum of every series of metric name in m (the bare name and
// every labelled series of it).
func Sum(m Metrics, name string) float64 {
	sum := 0.0
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			sum += v
		}
	}
	return sum
}

// RecvBytes is the size of every response the fleet's nodes received so
// far, in bytes of encoded gRPC messages (HTTP/2 framing and headers
// excluded): what the server sent them.
func (f *Fleet) RecvBytes() int64 { return f.t.bytes.Load() }
