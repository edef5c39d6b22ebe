// Command rlsbench is a load generator for any Envoy RLS v3 rate-limit
// service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit),
// and the side-by-side benchmark of xds-server's rate-limit service
// against envoyproxy/ratelimit.
//
//	go run ./bench/rlsbench -addr 127.0.0.1:18081 -domain bench -key user -keys 10000
//	go run ./bench/rlsbench -compare -envoy-bin ~/.cache/xds-server/bin/service_cmd -markdown BENCHMARKS.md
//	go run ./bench/rlsbench -compare -redis single,cluster -envoy-bin ~/.cache/xds-server/bin/service_cmd
//
// Load mode (-addr) runs -concurrency closed loops (each keeps one request
// in flight) over -conns gRPC connections for -warmup, then measures for
// -duration, and prints decisions/s (requests/s x descriptors per
// request), requests/s, p50/p99/p999 latency (a log-linear histogram,
// within 0.4%), the OK / OVER_LIMIT / no-limit decision counts and the
// errors. Every request carries -descriptors descriptors, each a single
// entry -key=-value-prefix<k> with k uniform in [0, -keys).
//
// Compare mode (-compare, what scripts/rlsbench.sh and `make rlsbench`
// run) starts a redis-server, envoyproxy/ratelimit (-envoy-bin) and
// xds-server (-xds-bin, built with go build when empty) twice, with
// --ratelimit.store redis and memory, all on 127.0.0.1 free ports, with
// the same configuration file, and loads them with the same workloads in
// rotated order for -rounds rounds, on each Redis topology of -redis in
// turn: single (one redis-server, the default) and cluster (six
// redis-servers with --cluster-enabled joined by redis-cli --cluster
// create into 3 masters with a replica each; envoyproxy/ratelimit gets
// REDIS_TYPE=cluster, xds-server --ratelimit.redis.mode cluster, both the
// six nodes as seeds; the memory leg runs on single only; the Redis CPU is
// summed over the six). With both it adds a Scaling table (one node vs
// the cluster). It reports medians, the ratios and
// the CPU each process used, prints the Markdown section and, with
// -markdown FILE, rewrites only the lines of FILE between
// <!-- rlsbench:begin --> and <!-- rlsbench:end -->. Every process it
// starts is stopped when it ends, also on error or interrupt.
//
// It runs both servers as black boxes: it must not import anything of this
// module but bench/section, internal/pause and internal/freeport.
package main
