// Backend is an example backend for xds-server: a gRPC and HTTP server that
// registers itself in Consul, reports its load over ORCA and, on SIGTERM or
// SIGINT, shuts down as a lame duck, so that a rolling restart fails no
// request.
//
// Usage:
//
//	backend [flags]
//
// For example, next to a local Consul agent:
//
//	go build -o bin/backend ./examples/backend
//	bin/backend -service echo -meta zone=a -tags v1,canary
//
// # What it serves
//
// On -grpc-addr:
//   - grpc.testing.TestService: UnaryCall answers with the service id in
//     server_id (and the hostname); EmptyCall answers nothing. A call with
//     the request metadata x-delay-ms: N is a long-running call: it waits N
//     milliseconds (0 to 600000) before it answers, and sends its response
//     headers at once, so that a client can tell it has started. The
//     trailers of each call carry an ORCA load report (per-call metrics,
//     with the request cost delay_ms).
//   - grpc.health.v1.Health: SERVING until the server stops accepting.
//   - xds.service.orca.v3.OpenRcaService (ORCA out of band): a report when
//     a stream opens, then at the interval the client asks for (at least
//     -orca-min-interval), and at once when lame duck begins. The CPU
//     utilization is -utilization if set, else the average number of RPCs
//     in flight over the last second divided by -capacity; QPS and EPS are
//     measured over the last second. In lame duck the named metric
//     -lame-duck-metric (default lame_duck) is 1; before, it is absent.
//
// With -slots N (the capacity model of the load lab, bench/lab), every
// test call holds one of N slots for -service-time (plus its x-delay-ms),
// and calls beyond N wait for a slot in arrival order: the capacity is
// N / -service-time calls per second, and nothing burns CPU (timers only).
// The CPU utilization reported over ORCA is then what the backend
// measures: the slot time in use over N x the wall time of the last
// second (unless -utilization fixes it).
//
// On -http-addr: GET /healthz answers 200 "ok", also in lame duck
// (maintenance mode, not a failing check, is what tells Consul, and so
// xds-server, to drain); any other GET says hello with the service id and
// the path ("hello from web-1 (/api/x)"), so that requests routed through
// Envoy show where they went.
//
// # Consul registration
//
// The service -service with id -id (default <service>-<gRPC port>), the
// address and port of the gRPC listener, or of the HTTP listener with
// -register-port http (an unspecified address registers the node's), -tags, -meta and the meta orca_port (the gRPC port, where
// ORCA is served), and an HTTP check on /healthz every -check-interval
// (Consul's minimum is one second) that starts passing and deregisters the
// service once it has been critical for -deregister-critical-after
// (Consul's minimum is one minute). Every
// Consul call is bounded by -consul-timeout. The token and TLS settings come
// from the usual CONSUL_HTTP_* environment variables.
//
// Once it serves and is registered, the backend prints one line on stdout,
// for scripts and tests to wait for:
//
//	ready grpc=127.0.0.1:41017 http=127.0.0.1:38803 id=echo-41017
//
// # Shutdown sequence
//
// On SIGTERM or SIGINT (the SRE book's lame duck, ch. 20), logged step by
// step with timings on stderr:
//
//  1. Enter lame duck: the ORCA metric -lame-duck-metric becomes 1 (open
//     streams get it at once) and the service goes into Consul maintenance
//     (the critical check _service_maintenance:<id>); xds-server turns both
//     into DRAINING, so clients stop sending new RPCs here.
//  2. Keep serving everything, new RPCs and connections included, for
//     -drain-delay: the time xds-server needs to push DRAINING to every
//     client.
//  3. Stop accepting: the ORCA streams end, the health service turns
//     NOT_SERVING and the gRPC server stops gracefully (in-flight RPCs
//     finish) within -shutdown-timeout, after which the RPCs still in flight
//     are cancelled; the HTTP server shuts down.
//  4. Deregister from Consul, and exit 0.
//
// A second signal cuts steps 2 and 3 short. An unavailable Consul is logged
// and does not stop the sequence; the check then deregisters the service
// after -deregister-critical-after. The exit code is 1 when the backend
// did not start or a server failed (the sequence then skips steps 1 and 2),
// and 2 for bad flags.
//
// The backend stands alone, as a user's service would: it must not import
// anything of this module.
package main
