// Package bench holds the performance benchmarks of the design guide (§6)
// and the light xDS client fleet they drive.
//
// The system benchmark (BenchmarkConsulFleet) runs a real Consul agent and
// the real xds-server binary, registers a synthetic catalog in Consul,
// connects a Fleet of raw ADS streams, flips TTL checks and measures how long
// every node takes to receive the change, the server's memory per connected
// node and its CPU per full push. The in-process benchmark
// (BenchmarkInProcessPush) measures the same propagation through xds.Server
// alone. The HA benchmark (BenchmarkHAFleet, issue 15) runs several
// xds-server replicas with ha.enabled on one Consul, a Fleet on each, and
// measures admin drain propagation across replicas, Consul writes per
// replica and the memory HA costs over a replica without it. The real-Envoy
// benchmark (BenchmarkEnvoyFleet, issue 23) runs N Envoy 1.40 processes
// (--concurrency 1) on xds-server, state of the world and delta, and the
// same Envoys as Connect sidecars on Consul's own xDS (consul connect
// envoy), and measures a Consul change until every Envoy applied it, the
// server's memory per Envoy and its CPU per change. scripts/bench.sh runs
// them all (BENCH_ONLY=ha or envoy: that one alone) and renders
// BENCHMARKS.md with bench/report.
//
// A Fleet is built for density: each node is one goroutine on a plain gRPC
// stream whose codec reads only the top-level fields of a response
// (version, type, nonce) and decodes an EDS payload once per distinct
// version for the whole fleet, never once per node.
//
// bench may import discovery, the internal/ leaves (pause, freeport), and
// xds and the e2e harness in tests; nothing in this module may import
// bench but its own commands.
//
// bench must not import cmd or e2e.
package bench
