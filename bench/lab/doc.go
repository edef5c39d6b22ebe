// Command lab is the load lab (issue 18): it closes the loop utilization ->
// weights -> traffic -> utilization with real processes on loopback, and
// measures how well each balancing policy evens out the utilization of
// backends of unequal capacity.
//
//	make lab                               # defaults: 12 backends, 36 clients, subsets of 4, 3 runs
//	go run ./bench/lab --quick             # a smaller, shorter lab, one run (within 3 minutes)
//	go run ./bench/lab --runs 5            # the medians of 5 runs
//	go run ./bench/lab --json -            # the figures as JSON on stdout
//	go run ./bench/lab --hold              # keep the last policy's fleet running (watch it at /ui/)
//	go run ./bench/lab --clients envoy     # the same fleet through real Envoys (issue 23)
//	go run ./bench/lab --zones             # the zone-skewed fleet and the locality policies (issue 26)
//
// It builds and starts a real Consul agent (`consul agent -dev`), the real
// xds-server binary, N example backends (examples/backend with -slots:
// capacity = slots / service time, queueing beyond, utilization over ORCA
// measured by the backend) and M grpc-go xDS clients in this process (each
// its own node and xDS client, open-loop Poisson arrivals at lognormal
// rates, ring_hash with a random hash per request so grpc-go honours the
// endpoint weights). The fleet (capacities, rates, subsets) is the one
// bench/weightsim draws for the same seed (weightsim -json), so its
// simulated figures stand beside the measured ones.
//
// With --clients envoy, each client node is a real Envoy 1.40 instead
// (envoyclients.go: --concurrency 1, the product's bootstrap, LRS
// included, plus the node's subset index), with a listener from
// xds-server routing gRPC to the service, and each node's load generator
// sends the same calls to its own Envoy's listener. The figures go to
// their own section of BENCHMARKS.md (lab-envoy).
//
// For each policy in turn (round robin with weights off; global weights
// from the formula; balanced global weights; per-node weights; with
// subsets, and round robin and the formula without) it starts a fresh
// xds-server, connects fresh clients, and samples each backend's own ORCA
// reports every second. It runs that sequence --runs times (3 by default)
// on the same fleet, each run with its own arrivals, and reports every
// figure as the median over the runs, errors as their sum (aggregate). It
// prints a table, writes the lab section of BENCHMARKS.md (--markdown), an
// SVG chart per policy from its median run (utilization per backend over
// time, --charts) and, with --json, the figures in the shape of issue 18.
//
// Every policy run also leaves diag-<policy>-run<N>.json in the lab's
// directory (diag.go): failed and slow (over 1 s) requests by client and
// by the second they were sent in, each backend's utilization by second,
// xds-server's weight table and every node's plan (/debug/weights) every
// second, and with Envoys each one's hosts (weight, rq_active, rq_timeout)
// every second: where and when a run's errors came from, and which
// weights offered a backend more than its capacity.
//
// With --zones (zones.go, zonesrun.go), the fleet is zone-skewed instead:
// backends and client nodes in zones a and b, zone a's backends short of
// its clients' demand, and the policies are round_robin, strict zone
// failover, distribute and capacity-aware spill; each is measured by the
// share of requests served in the client's zone (the call's peer) against
// max/mean utilization, in its own section of BENCHMARKS.md (lab-zones).
//
// lab must not import cmd or e2e: it starts the binaries as a user would,
// found as the e2e harness finds them (internal/toolbin).
package main
