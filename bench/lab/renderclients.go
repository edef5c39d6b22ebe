package main

import (
	"fmt"
	"strings"
)

// envoySectionName is the lab's section of BENCHMARKS.md with --clients
// envoy, beside the grpc-go one (sectionName).
const envoySectionName = "lab-envoy"

// sectionOf is the section of BENCHMARKS.md the lab writes with o's
// clients.
func sectionOf(o options) string {
	if o.kind == envoyClients {
		return envoySectionName
	}
	return sectionName
}

// heading is the section's title.
func heading(o options) string {
	if o.kind == envoyClients {
		return "## Load lab through real Envoys (issues 18, 23)"
	}
	return "## Load lab (issue 18)"
}

// makeCommand is the make target that writes the section.
func makeCommand(o options) string {
	if o.kind == envoyClients {
		return "make lab ARGS='--clients envoy'"
	}
	return "make lab"
}

// envoysCPU names the Envoys among the processes whose CPU is counted.
func envoysCPU(o options) string {
	if o.kind == envoyClients {
		return " and Envoys"
	}
	return ""
}

// envoysSubsets names the Envoys' own view among the subsets checked.
func envoysSubsets(o options) string {
	if o.kind == envoyClients {
		return ", and from the Envoy's own `/clusters`"
	}
	return ""
}

// clientsProse is the section's sentences on the clients and the
// policies' load balancers, from the capacities' seed on; median says
// how the seed was chosen.
func clientsProse(o options, median string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	if o.kind != envoyClients {
		p("`bench/weightsim -seed %d` draws (uniform in [1, 2] x 100 requests/s%s), and %d grpc-go xDS clients (each its", o.seed, median, o.clients)
		p("own node and xDS client, client index i from its node metadata so that it has the simulator's subset i)")
		p("sending open loop (Poisson arrivals) at the simulator's lognormal rates (sigma %g), %g of the total capacity.", o.sigma, o.util)
		p("Round robin is `lb_policy: round_robin` with weights off; the weighted policies use `ring_hash` (grpc-go")
		p("honours endpoint weights only there; no hash policy: a random hash per request; a ring of %d entries,", o.ringSize)
		p("grpc-go's cap raised with `GRPC_RING_HASH_CAP`: every client of the same endpoints builds the same ring, so")
		p("its arcs' deviation from the weights does not average out over clients) with weights from")
		return b.String()
	}
	p("`bench/weightsim -seed %d` draws (uniform in [1, 2] x 100 requests/s%s), and %d client nodes, each a real", o.seed, median, o.clients)
	p("Envoy %s (fresh ones per policy, `--concurrency 1`) with the bootstrap `xds-server envoy bootstrap`", envoyVersion)
	p("writes (`envoy.Bootstrap`: ADS, and load reports per endpoint over LRS, to xds-server) plus the node's")
	p("client index i in its metadata, so that it has the simulator's subset i. Each Envoy gets from xds-server")
	p("a listener (`%s`: gRPC in, every call routed to the service, `protocol: grpc` to the backends), its", envoyListener)
	p("subset and its EDS weights; one gRPC load generator per Envoy (in the lab process, plain gRPC to that")
	p("Envoy's listener) sends open loop (Poisson arrivals) at the simulator's lognormal rates (sigma %g), %g of", o.sigma, o.util)
	p("the total capacity. Round robin is `lb_policy: round_robin` with weights off; the weighted policies use")
	p("`ring_hash` (no hash policy: Envoy hashes a random number per request; a ring of %d entries, minimum and", o.ringSize)
	p("maximum: every Envoy of the same endpoints builds the same ring) with weights from")
	return b.String()
}
