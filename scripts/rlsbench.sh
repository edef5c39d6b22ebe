#!/usr/bin/env bash
# The rate-limit benchmark of issues 6 and 28, side by side: envoyproxy/ratelimit
# vs xds-server with Redis vs xds-server in memory, same Redis, same config,
# same load (bench/rlsbench -compare), on one Redis node and then on a
# 3-master 3-replica Redis Cluster that rlsbench starts itself (-redis
# single,cluster). Rewrites only the rlsbench section of BENCHMARKS.md. Run
# by `make rlsbench` and by scripts/bench.sh.
#
# Installs, idempotently, envoyproxy/ratelimit at a pinned commit with
# `go install github.com/envoyproxy/ratelimit/src/service_cmd@VERSION` into
# $XDS_SERVER_CACHE/bin (default ~/.cache/xds-server/bin); needs
# redis-server and redis-cli (scripts/install-redis.sh installs them). Every process it
# starts listens on 127.0.0.1 free ports and is stopped before it exits.
#
# Knobs (environment): RLSBENCH_ROUNDS (5), RLSBENCH_DURATION (10s),
# RLSBENCH_WARMUP (2s), RLSBENCH_CONCURRENCY (64), RLSBENCH_CONNS (8),
# RLSBENCH_WORKLOADS (within,within3,overlimit), RLSBENCH_LEGS
# (envoy,xds-redis,xds-memory), RLSBENCH_REDIS (single,cluster: the Redis
# topologies, one after the other), RLSBENCH_SWEEP (128,256: the headline
# workload again at these requests in flight, both Redis legs, to see each
# at its capacity; empty: none), RLSBENCH_OUT (BENCHMARKS.md; empty: print
# only), RATELIMIT_VERSION (the pinned pseudo-version below).
set -euo pipefail
export GOTOOLCHAIN=local
cd "$(dirname "$0")/.."

# envoyproxy/ratelimit main, 2026-01-22 (commit 3fb702589d36): the newest
# commit the module proxy serves; its go.mod says go 1.25.6 and has no
# replace directives, so `go install` builds it with our Go.
RATELIMIT_VERSION=${RATELIMIT_VERSION:-v1.4.1-0.20260122083618-3fb702589d36}
cache=${XDS_SERVER_CACHE:-$HOME/.cache/xds-server}
bin="$cache/bin"
envoy_bin="$bin/service_cmd"

installed_version() {
	# `go version -m` prints "mod <path> <version> <sum>" for the main module.
	go version -m "$envoy_bin" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/envoyproxy/ratelimit" { print $3 }'
}
if [ "$(installed_version)" != "$RATELIMIT_VERSION" ]; then
	echo "rlsbench: installing envoyproxy/ratelimit $RATELIMIT_VERSION into $bin (a minute or two)" >&2
	mkdir -p "$bin"
	# Outside this module, so our go.mod plays no part.
	(cd "$(mktemp -d)" && GOBIN="$bin" GOFLAGS=-mod=mod go install \
		"github.com/envoyproxy/ratelimit/src/service_cmd@$RATELIMIT_VERSION")
	if [ "$(installed_version)" != "$RATELIMIT_VERSION" ]; then
		echo "rlsbench: $envoy_bin is not envoyproxy/ratelimit $RATELIMIT_VERSION after go install" >&2
		exit 1
	fi
else
	echo "rlsbench: using envoyproxy/ratelimit $RATELIMIT_VERSION at $envoy_bin" >&2
fi

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	bash scripts/install-redis.sh
fi
redis_bin=$(command -v redis-server)
redis_cli=$(command -v redis-cli) || {
	echo "rlsbench: no redis-cli on PATH (Debian: apt-get install redis-tools); -redis cluster needs it" >&2
	exit 1
}

# rlsbench stops what it started (redis-server --dir, the xds-server
# binary and the link to envoyproxy/ratelimit are all under $tmp).
source scripts/private-tmp.sh
private_tmp xds-rlsbench

echo "rlsbench: building xds-server and rlsbench" >&2
go build -o "$tmp/xds-server" ./cmd/xds-server
go build -o "$tmp/rlsbench" ./bench/rlsbench

out=${RLSBENCH_OUT-BENCHMARKS.md}
args=(-compare -envoy-bin "$envoy_bin" -xds-bin "$tmp/xds-server" -redis-bin "$redis_bin" -redis-cli "$redis_cli" -workdir "$tmp"
	-rounds "${RLSBENCH_ROUNDS:-5}" -duration "${RLSBENCH_DURATION:-10s}" -warmup "${RLSBENCH_WARMUP:-2s}"
	-concurrency "${RLSBENCH_CONCURRENCY:-64}" -conns "${RLSBENCH_CONNS:-8}"
	-workloads "${RLSBENCH_WORKLOADS:-within,within3,overlimit}" -legs "${RLSBENCH_LEGS:-envoy,xds-redis,xds-memory}"
	-redis "${RLSBENCH_REDIS:-single,cluster}" -sweep "${RLSBENCH_SWEEP-128,256}")
if [ -n "$out" ]; then
	args+=(-markdown "$out")
fi
"$tmp/rlsbench" "${args[@]}"
if [ -n "$out" ]; then
	echo "rlsbench: wrote the rlsbench section of $out" >&2
fi
