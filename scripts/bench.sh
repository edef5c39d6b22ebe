#!/usr/bin/env bash
# Runs the benchmarks of the design guide §6 (issue 2) and rewrites
# BENCHMARKS.md, then the subsetting and weights simulators' sections of
# it, then the rate-limit benchmark's (scripts/rlsbench.sh, issue 6).
# Needs Go, a consul binary on PATH (`make bench` installs Consul and puts
# it there) and redis-server (likewise).
# Every process it starts listens on 127.0.0.1 free ports and is stopped
# before it exits.
#
# Knobs (environment): BENCH_RUNS (runs per protocol, default 3),
# BENCH_MODES (default sotw,delta), BENCH_NODES (1000), BENCH_SERVICES (50),
# BENCH_ENDPOINTS (20), BENCH_CHANGES (20), BENCH_PUSHES (3),
# BENCH_STREAMS_PER_CONN (1), BENCH_INPROCESS (1: also run the in-process
# benchmark), BENCH_OUT (BENCHMARKS.md).
# The HA benchmark (issue 15: replicas sharing one Consul with ha.enabled)
# runs last and rewrites only its own section: BENCH_ONLY=ha runs it alone;
# BENCH_HA=0 skips it. Its knobs: BENCH_HA_RUNS (default BENCH_RUNS),
# BENCH_HA_REPLICAS (3), BENCH_HA_NODES (nodes per replica, 10000 (issue
# 29); 1000 gives issue 15's 3 x 1,000), BENCH_HA_DRAINS (10),
# BENCH_HA_CHANGES (10: Consul changes sampled on every node of every
# replica), BENCH_HA_HOLD (10s: idle time counted in the Consul write
# rate), BENCH_HA_LOAD (1s: POST /v1/load to each replica this often; 0s:
# no weights), BENCH_HA_STREAMS_PER_CONN (nodes per gRPC connection of the
# load generator; default 1, or the fewest that fit replicas x nodes
# connections under this process's open-file hard limit).
# The 10,000-node benchmark (issue 17: one replica, every node connecting
# at once, every service and then every service with subset_size) runs
# after the first one and rewrites only its own section: BENCH_ONLY=scale
# runs it alone; BENCH_SCALE=0 skips it. Its knobs: BENCH_SCALE_RUNS
# (default BENCH_RUNS), BENCH_SCALE_NODES (10000), BENCH_SCALE_SUBSET (5;
# 0: no subset variant), BENCH_SCALE_CHANGES (5), BENCH_SCALE_PUSHES (2),
# BENCH_SCALE_DRAINS (4), BENCH_SCALE_FLAGS (more server flags for these
# runs, e.g. "--runtime.memory_limit_mib 1100"; default none),
# BENCH_SCALE_RESULTS (write the runs' JSON lines to this file, as they end,
# and keep it).
# The real-Envoy benchmark (issue 23: Envoy 1.40 processes, --concurrency 1,
# on xds-server over state of the world and delta, and the same Envoys on
# Consul v1.14.11's own xDS as `consul connect envoy` sidecars) runs after
# the 10,000-node one and rewrites only its own section: BENCH_ONLY=envoy
# runs it alone; BENCH_ENVOY=0 skips it. It needs envoy 1.40.0 (make deps).
# Its knobs: BENCH_ENVOY_RUNS (runs per xDS server, default BENCH_RUNS),
# BENCH_ENVOYS (Envoys per run, default 30: 50 fit on two cores too, but
# Consul's side then takes about 4 s to sync each Envoy and the section
# about 17 minutes; at 30 it takes about 10), BENCH_ENVOY_CHANGES
# (single-endpoint changes per run, 15), BENCH_ENVOY_MODES
# (sotw,delta,consul).
# The cost model (issue 29: BenchmarkConsulFleet at several fleet sizes,
# every node connecting at once, fitted by bench/report -model and
# projected to 100,000 nodes) runs last and rewrites only its own section:
# BENCH_ONLY=model runs it alone; BENCH_MODEL=0 skips it. Its knobs:
# BENCH_MODEL_SIZES (nodes, comma-separated, at least 4 distinct:
# 1000,2500,5000,10000), BENCH_MODEL_RUNS (runs per size, 1),
# BENCH_MODEL_MODES (sotw), BENCH_MODEL_SUBSETS (the services' subset_size,
# a variant each, comma-separated; 0: every node sees every endpoint;
# default 0,5), BENCH_MODEL_CHANGES (5), BENCH_MODEL_PUSHES
# (2), BENCH_MODEL_DRAINS (2), BENCH_MODEL_RESULTS (write the runs' JSON
# lines to this file and keep it), BENCH_MODEL_ARGS (more bench/report
# flags, e.g. "-model-nodes 100000 -model-p99 1s -model-max-cores 16").
set -euo pipefail
export GOTOOLCHAIN=local
cd "$(dirname "$0")/.."

runs=${BENCH_RUNS:-3}
modes=${BENCH_MODES:-sotw,delta}
nodes=${BENCH_NODES:-1000}
services=${BENCH_SERVICES:-50}
endpoints=${BENCH_ENDPOINTS:-20}
changes=${BENCH_CHANGES:-20}
pushes=${BENCH_PUSHES:-3}
per_conn=${BENCH_STREAMS_PER_CONN:-1}
inprocess=${BENCH_INPROCESS:-1}
out=${BENCH_OUT:-BENCHMARKS.md}
only=${BENCH_ONLY:-}
with_scale=${BENCH_SCALE:-1}
scale_runs=${BENCH_SCALE_RUNS:-$runs}
scale_nodes=${BENCH_SCALE_NODES:-10000}
scale_subset=${BENCH_SCALE_SUBSET:-5}
scale_changes=${BENCH_SCALE_CHANGES:-5}
scale_pushes=${BENCH_SCALE_PUSHES:-2}
scale_drains=${BENCH_SCALE_DRAINS:-4}
scale_flags=${BENCH_SCALE_FLAGS---runtime.gc_between_pushes=true} # the scale figures are measured with collections between pushes (opt-in)
with_ha=${BENCH_HA:-1}
ha_runs=${BENCH_HA_RUNS:-$runs}
ha_replicas=${BENCH_HA_REPLICAS:-3}
ha_nodes=${BENCH_HA_NODES:-10000}
ha_drains=${BENCH_HA_DRAINS:-10}
ha_changes=${BENCH_HA_CHANGES:-10}
ha_hold=${BENCH_HA_HOLD:-10s}
ha_load=${BENCH_HA_LOAD:-1s}
with_envoy=${BENCH_ENVOY:-1}
envoy_runs=${BENCH_ENVOY_RUNS:-$runs}
envoys=${BENCH_ENVOYS:-30}
envoy_changes=${BENCH_ENVOY_CHANGES:-15}
envoy_modes=${BENCH_ENVOY_MODES:-sotw,delta,consul}
with_model=${BENCH_MODEL:-1}
model_sizes=${BENCH_MODEL_SIZES:-1000,2500,5000,10000}
model_runs=${BENCH_MODEL_RUNS:-1}
model_modes=${BENCH_MODEL_MODES:-sotw}
model_subsets=${BENCH_MODEL_SUBSETS:-0,5}
model_changes=${BENCH_MODEL_CHANGES:-5}
model_pushes=${BENCH_MODEL_PUSHES:-2}
model_drains=${BENCH_MODEL_DRAINS:-2}
model_args=${BENCH_MODEL_ARGS:-}
case "$only" in
"" | ha | scale | envoy | model) ;;
*)
	echo "bench: BENCH_ONLY=$only: want ha, scale, envoy or model (or unset for everything)" >&2
	exit 1
	;;
esac

if ! command -v consul >/dev/null; then
	echo "bench: no consul on PATH; run 'make bench' or scripts/install-consul.sh" >&2
	exit 1
fi

# Each node is a connection on both sides (client and server are separate
# processes): ask for twice the nodes plus slack.
# The HA benchmark holds replicas x nodes client streams in this process
# (the baseline replica's are closed before), one connection per
# BENCH_HA_STREAMS_PER_CONN nodes; by default as many nodes per connection
# as it takes to fit under the hard limit of open files.
want_files=$((2 * nodes + 1024))
if [ "$with_ha" = 1 ] || [ "$only" = ha ]; then
	ha_per_conn=${BENCH_HA_STREAMS_PER_CONN:-1}
	if [ -z "${BENCH_HA_STREAMS_PER_CONN:-}" ] && [ "$(ulimit -Hn)" != unlimited ]; then
		while [ $((ha_replicas * ha_nodes / ha_per_conn + 1024)) -gt "$(ulimit -Hn)" ]; do
			ha_per_conn=$((ha_per_conn + 1))
		done
	fi
	ha_files=$((ha_replicas * ha_nodes / ha_per_conn + 1024))
	want_files=$((want_files > ha_files ? want_files : ha_files))
fi
# The 10,000-node load generator holds one connection per node (the server
# is another process, with its own limit).
if [ "$with_scale" = 1 ] || [ "$only" = scale ]; then
	want_files=$((want_files > scale_nodes + 1024 ? want_files : scale_nodes + 1024))
fi
# The cost model's load generator holds one connection per node of its
# largest size.
if [ "$with_model" = 1 ] || [ "$only" = model ]; then
	for n in ${model_sizes//,/ }; do
		want_files=$((want_files > n + 1024 ? want_files : n + 1024))
	done
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$want_files" ]; then
	ulimit -n "$want_files" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi

# The benchmark stops its Consul and server itself (the server binary and
# Consul's config dir are under $tmp).
source scripts/private-tmp.sh
private_tmp xds-bench
mkdir -p "$tmp/go-tmp"

start=$SECONDS
echo "bench: building xds-server" >&2
go build -o "$tmp/xds-server" ./cmd/xds-server
go test -c -o "$tmp/bench.test" ./bench

fleet_cmd=(env XDS_SERVER_BIN="$tmp/xds-server" TMPDIR="$tmp/go-tmp" "$tmp/bench.test"
	-test.run '^$' -test.bench '^BenchmarkConsulFleet$' -test.benchtime 1x -test.count "$runs" -test.timeout 30m
	-modes "$modes" -nodes "$nodes" -services "$services" -endpoints "$endpoints"
	-changes "$changes" -pushes "$pushes" -streams-per-conn "$per_conn" -results "$tmp/runs.jsonl")
inproc_cmd=(env TMPDIR="$tmp/go-tmp" "$tmp/bench.test"
	-test.run '^$' -test.bench '^BenchmarkInProcessPush$' -test.benchtime 5x -test.count "$runs" -test.timeout 15m
	-nodes "$nodes" -services "$services" -endpoints "$endpoints")

ha_cmd=(env XDS_SERVER_BIN="$tmp/xds-server" TMPDIR="$tmp/go-tmp" "$tmp/bench.test"
	-test.run '^$' -test.bench '^BenchmarkHAFleet$' -test.benchtime 1x -test.count "$ha_runs" -test.timeout 60m
	-replicas "$ha_replicas" -nodes "$ha_nodes" -services "$services" -endpoints "$endpoints"
	-drains "$ha_drains" -ha-changes "$ha_changes" -ha-hold "$ha_hold" -ha-load "$ha_load"
	-streams-per-conn "${ha_per_conn:-1}" -results "$tmp/ha-runs.jsonl")

# run_ha runs the HA benchmark and rewrites its section of $out.
run_ha() {
	{
		echo "BENCH_ONLY=ha BENCH_HA_RUNS=$ha_runs BENCH_HA_REPLICAS=$ha_replicas BENCH_HA_NODES=$ha_nodes BENCH_HA_DRAINS=$ha_drains BENCH_HA_CHANGES=$ha_changes BENCH_HA_HOLD=$ha_hold BENCH_HA_LOAD=$ha_load BENCH_HA_STREAMS_PER_CONN=${ha_per_conn:-1} make bench"
		echo "# = PATH=\"\$XDS_SERVER_CACHE/bin:\$PATH\" BENCH_ONLY=ha ... bash scripts/bench.sh, which runs:"
		echo "go build -o \$TMP/xds-server ./cmd/xds-server && go test -c -o \$TMP/bench.test ./bench"
		echo "XDS_SERVER_BIN=\$TMP/xds-server \$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkHAFleet\$' \\"
		echo "  -test.benchtime 1x -test.count $ha_runs -replicas $ha_replicas -nodes $ha_nodes -services $services -endpoints $endpoints \\"
		echo "  -drains $ha_drains -ha-changes $ha_changes -ha-hold $ha_hold -ha-load $ha_load -streams-per-conn ${ha_per_conn:-1} -results \$TMP/ha-runs.jsonl"
		echo "go run ./bench/report -ha \$TMP/ha-runs.jsonl -out $out   # rewrites only its marked section"
	} >"$tmp/ha-commands.txt"
	echo "bench: HA, $ha_runs run(s) of $ha_replicas replicas x $ha_nodes nodes" >&2
	"${ha_cmd[@]}" 2>&1 | tee "$tmp/ha.txt" | grep -E '^(Benchmark|PASS|FAIL|ok|---|\s+\S+\.go:)' >&2 || true
	if ! grep -q '^PASS' "$tmp/ha.txt"; then
		echo "bench: BenchmarkHAFleet failed; its output:" >&2
		tail -n 80 "$tmp/ha.txt" >&2
		exit 1
	fi
	go run ./bench/report -ha "$tmp/ha-runs.jsonl" -commands "$tmp/ha-commands.txt" -out "$out"
}

# run_scale runs the 10,000-node benchmark (each variant, both protocols)
# and rewrites its section of $out.
run_scale() {
	local t0=$SECONDS variants=(0) results=${BENCH_SCALE_RESULTS:-$tmp/scale-runs.jsonl}
	if [ "$scale_subset" != 0 ]; then
		variants+=("$scale_subset")
	fi
	rm -f "$results"
	: >"$tmp/scale-commands.txt"
	{
		echo "BENCH_ONLY=scale make bench   # = PATH=\"\$XDS_SERVER_CACHE/bin:\$PATH\" BENCH_ONLY=scale bash scripts/bench.sh, which runs:"
		echo "go build -o \$TMP/xds-server ./cmd/xds-server && go test -c -o \$TMP/bench.test ./bench"
	} >>"$tmp/scale-commands.txt"
	for subset in "${variants[@]}"; do
		local cmd=(env XDS_SERVER_BIN="$tmp/xds-server" TMPDIR="$tmp/go-tmp" "$tmp/bench.test"
			-test.run '^$' -test.bench '^BenchmarkConsulFleet$' -test.benchtime 1x -test.count "$scale_runs" -test.timeout 60m
			-modes "$modes" -nodes "$scale_nodes" -services "$services" -endpoints "$endpoints" -openers 0
			-subset-size "$subset" -changes "$scale_changes" -pushes "$scale_pushes" -drains "$scale_drains"
			-server-flags "$scale_flags" -results "$results")
		{
			echo "XDS_SERVER_BIN=\$TMP/xds-server \$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkConsulFleet\$' -test.benchtime 1x \\"
			echo "  -test.count $scale_runs -modes $modes -nodes $scale_nodes -services $services -endpoints $endpoints -openers 0 \\"
			echo "  -subset-size $subset -changes $scale_changes -pushes $scale_pushes -drains $scale_drains ${scale_flags:+-server-flags '$scale_flags' }-results \$TMP/scale-runs.jsonl"
		} >>"$tmp/scale-commands.txt"
		echo "bench: $scale_nodes nodes, subset_size $subset, $scale_runs run(s) per protocol ($modes)" >&2
		"${cmd[@]}" 2>&1 | tee "$tmp/scale.txt" | grep -E '^(Benchmark|PASS|FAIL|ok|---|\s+\S+\.go:)' >&2 || true
		if ! grep -q '^PASS' "$tmp/scale.txt"; then
			echo "bench: BenchmarkConsulFleet at $scale_nodes nodes failed; its output:" >&2
			tail -n 80 "$tmp/scale.txt" >&2
			exit 1
		fi
	done
	echo "go run ./bench/report -scale \$TMP/scale-runs.jsonl -out $out   # rewrites only its marked section" >>"$tmp/scale-commands.txt"
	go run ./bench/report -scale "$results" -commands "$tmp/scale-commands.txt" \
		-wall "$((SECONDS - t0))s" -out "$out"
}

# run_envoy runs the real-Envoy benchmark (every xDS server in turn, each
# run with fresh Consul, server and Envoys) and rewrites its section of $out.
run_envoy() {
	local t0=$SECONDS results=$tmp/envoy-runs.jsonl
	rm -f "$results"
	local cmd=(env XDS_SERVER_BIN="$tmp/xds-server" TMPDIR="$tmp/go-tmp" XDS_SERVER_REQUIRE_INTEGRATION=1 "$tmp/bench.test"
		-test.run '^$' -test.bench '^BenchmarkEnvoyFleet$' -test.benchtime 1x -test.count "$envoy_runs" -test.timeout 60m
		-envoys "$envoys" -envoy-modes "$envoy_modes" -services "$services" -endpoints "$endpoints"
		-envoy-changes "$envoy_changes" -envoy-results "$results")
	{
		echo "BENCH_ONLY=envoy BENCH_ENVOY_RUNS=$envoy_runs BENCH_ENVOYS=$envoys BENCH_ENVOY_CHANGES=$envoy_changes make bench"
		echo "# = PATH=\"\$XDS_SERVER_CACHE/bin:\$PATH\" BENCH_ONLY=envoy ... bash scripts/bench.sh, which runs:"
		echo "go build -o \$TMP/xds-server ./cmd/xds-server && go test -c -o \$TMP/bench.test ./bench"
		echo "XDS_SERVER_BIN=\$TMP/xds-server \$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkEnvoyFleet\$' -test.benchtime 1x \\"
		echo "  -test.count $envoy_runs -envoys $envoys -envoy-modes $envoy_modes -services $services -endpoints $endpoints \\"
		echo "  -envoy-changes $envoy_changes -envoy-results \$TMP/envoy-runs.jsonl"
		echo "go run ./bench/report -envoy \$TMP/envoy-runs.jsonl -out $out   # rewrites only its marked section"
	} >"$tmp/envoy-commands.txt"
	echo "bench: real Envoys, $envoy_runs run(s) of $envoys Envoys per xDS server ($envoy_modes)" >&2
	"${cmd[@]}" 2>&1 | tee "$tmp/envoy.txt" | grep -E '^(Benchmark|PASS|FAIL|ok|---|\s+\S+\.go:)' >&2 || true
	if ! grep -q '^PASS' "$tmp/envoy.txt"; then
		echo "bench: BenchmarkEnvoyFleet failed; its output:" >&2
		tail -n 80 "$tmp/envoy.txt" >&2
		exit 1
	fi
	go run ./bench/report -envoy "$results" -commands "$tmp/envoy-commands.txt" -wall "$((SECONDS - t0))s" -out "$out"
}

# run_model runs BenchmarkConsulFleet at each of the model's sizes (every
# node connecting at once) and rewrites the cost model's section of $out.
run_model() {
	local results=${BENCH_MODEL_RESULTS:-$tmp/model-runs.jsonl}
	rm -f "$results"
	{
		echo "BENCH_ONLY=model make bench   # = PATH=\"\$XDS_SERVER_CACHE/bin:\$PATH\" BENCH_ONLY=model bash scripts/bench.sh, which runs:"
		echo "go build -o \$TMP/xds-server ./cmd/xds-server && go test -c -o \$TMP/bench.test ./bench"
		echo "for s in ${model_subsets//,/ }; do for n in ${model_sizes//,/ }; do"
		echo "  XDS_SERVER_BIN=\$TMP/xds-server \$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkConsulFleet\$' -test.benchtime 1x \\"
		echo "    -test.count $model_runs -modes $model_modes -nodes \$n -services $services -endpoints $endpoints -subset-size \$s -openers 0 \\"
		echo "    -changes $model_changes -pushes $model_pushes -drains $model_drains -results \$TMP/model-runs.jsonl"
		echo "done; done"
		echo "go run ./bench/report -model \$TMP/model-runs.jsonl ${model_args:+$model_args }-out $out   # rewrites only its marked section"
	} >"$tmp/model-commands.txt"
	for s in ${model_subsets//,/ }; do for n in ${model_sizes//,/ }; do
		echo "bench: cost model, $n nodes, subset_size $s, $model_runs run(s) per protocol ($model_modes)" >&2
		env XDS_SERVER_BIN="$tmp/xds-server" TMPDIR="$tmp/go-tmp" "$tmp/bench.test" \
			-test.run '^$' -test.bench '^BenchmarkConsulFleet$' -test.benchtime 1x -test.count "$model_runs" -test.timeout 60m \
			-modes "$model_modes" -nodes "$n" -services "$services" -endpoints "$endpoints" -subset-size "$s" -openers 0 \
			-changes "$model_changes" -pushes "$model_pushes" -drains "$model_drains" -results "$results" \
			2>&1 | tee "$tmp/model.txt" | grep -E '^(Benchmark|PASS|FAIL|ok|---|\s+\S+\.go:)' >&2 || true
		if ! grep -q '^PASS' "$tmp/model.txt"; then
			echo "bench: BenchmarkConsulFleet at $n nodes, subset_size $s (cost model) failed; its output:" >&2
			tail -n 80 "$tmp/model.txt" >&2
			exit 1
		fi
	done; done
	# shellcheck disable=SC2086 # BENCH_MODEL_ARGS is a list of flags
	go run ./bench/report -model "$results" $model_args -commands "$tmp/model-commands.txt" -out "$out"
}

if [ "$only" = model ]; then
	run_model
	echo "bench: wrote the cost model's section of $out" >&2
	exit 0
fi

if [ "$only" = envoy ]; then
	run_envoy
	echo "bench: wrote the real-Envoy section of $out" >&2
	exit 0
fi

if [ "$only" = scale ]; then
	run_scale
	echo "bench: wrote the 10,000-node section of $out" >&2
	exit 0
fi

if [ "$only" = ha ]; then
	run_ha
	echo "bench: wrote the HA section of $out" >&2
	exit 0
fi

{
	echo "make bench   # = PATH=\"\$XDS_SERVER_CACHE/bin:\$PATH\" bash scripts/bench.sh, which runs:"
	echo "go build -o \$TMP/xds-server ./cmd/xds-server && go test -c -o \$TMP/bench.test ./bench"
	echo "XDS_SERVER_BIN=\$TMP/xds-server \$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkConsulFleet\$' \\"
	echo "  -test.benchtime 1x -test.count $runs -modes $modes -nodes $nodes -services $services -endpoints $endpoints \\"
	echo "  -changes $changes -pushes $pushes -streams-per-conn $per_conn -results \$TMP/runs.jsonl"
	if [ "$inprocess" = 1 ]; then
		echo "\$TMP/bench.test -test.run '^\$' -test.bench '^BenchmarkInProcessPush\$' -test.benchtime 5x -test.count $runs \\"
		echo "  -nodes $nodes -services $services -endpoints $endpoints"
	fi
	echo "go run ./bench/report -runs \$TMP/runs.jsonl -inprocess \$TMP/inprocess.txt -out $out"
	echo "go test ./xds -run '^\$' -bench SubsetReconcile -benchmem -count 5 -benchtime 5x > \$TMP/xds-subsets.txt"
	echo "go run ./bench/subsetsim -preset all -xds-bench \$TMP/xds-subsets.txt -markdown $out   # rewrites only its marked section"
	echo "go test ./weights -run '^\$' -bench 'Solve|Balance|Ingest' -benchmem -count 5 > \$TMP/weights-bench.txt"
	echo "go test ./xds -run '^\$' -bench WeightPushes -benchtime 1x -count 3 >> \$TMP/weights-bench.txt"
	echo "go run ./bench/weightsim -go-bench \$TMP/weights-bench.txt -markdown $out   # rewrites only its marked section"
	echo "RLSBENCH_OUT=$out bash scripts/rlsbench.sh   # rate-limit service vs envoyproxy/ratelimit; rewrites only its marked section"
	if [ "$with_scale" = 1 ]; then
		echo "BENCH_ONLY=scale bash scripts/bench.sh   # $scale_nodes nodes (BenchmarkConsulFleet, every node at once, subset variant); rewrites only its marked section"
	fi
	if [ "$with_envoy" = 1 ]; then
		echo "BENCH_ONLY=envoy bash scripts/bench.sh   # real Envoys on xds-server and on Consul's xDS (BenchmarkEnvoyFleet); rewrites only its marked section"
	fi
	if [ "$with_ha" = 1 ]; then
		echo "BENCH_ONLY=ha bash scripts/bench.sh   # HA replicas (BenchmarkHAFleet); rewrites only its marked section"
	fi
	if [ "$with_model" = 1 ]; then
		echo "BENCH_ONLY=model bash scripts/bench.sh   # cost model (BenchmarkConsulFleet at $model_sizes nodes, bench/report -model); rewrites only its marked section"
	fi
} >"$tmp/commands.txt"

echo "bench: Consul + xds-server, $runs run(s) per protocol ($modes), $nodes nodes" >&2
"${fleet_cmd[@]}" 2>&1 | tee "$tmp/fleet.txt" | grep -E '^(Benchmark|PASS|FAIL|ok|---|\s+\S+\.go:)' >&2 || true
if ! grep -q '^PASS' "$tmp/fleet.txt"; then
	echo "bench: BenchmarkConsulFleet failed; its output:" >&2
	tail -n 80 "$tmp/fleet.txt" >&2
	exit 1
fi

inproc_args=()
if [ "$inprocess" = 1 ]; then
	echo "bench: in-process push, $runs count(s)" >&2
	"${inproc_cmd[@]}" 2>&1 | tee "$tmp/inprocess.txt" >&2
	if ! grep -q '^PASS' "$tmp/inprocess.txt"; then
		echo "bench: BenchmarkInProcessPush failed" >&2
		exit 1
	fi
	inproc_args=(-inprocess "$tmp/inprocess.txt")
fi

go run ./bench/report -runs "$tmp/runs.jsonl" "${inproc_args[@]}" -commands "$tmp/commands.txt" \
	-wall "$((SECONDS - start))s" -out "$out"
# The report keeps the subsetting section verbatim; refresh it now, on an
# otherwise idle machine (it times the 10,000 x 1,000 subset computation).
echo "bench: subsetting simulator" >&2
echo "bench: subsets in xds (10,000 nodes x 1,000 endpoints)" >&2
go test ./xds -run '^$' -bench SubsetReconcile -benchmem -count 5 -benchtime 5x >"$tmp/xds-subsets.txt"
go run ./bench/subsetsim -preset all -xds-bench "$tmp/xds-subsets.txt" -markdown "$out" >/dev/null
echo "bench: weights simulator, solver and ingestion" >&2
go test ./weights -run '^$' -bench 'Solve|Balance|Ingest' -benchmem -count 5 >"$tmp/weights-bench.txt"
go test ./xds -run '^$' -bench WeightPushes -benchtime 1x -count 3 >>"$tmp/weights-bench.txt"
go run ./bench/weightsim -go-bench "$tmp/weights-bench.txt" -markdown "$out" >/dev/null
# The report does not keep the rate-limit section: write it again, last.
echo "bench: rate-limit service vs envoyproxy/ratelimit (scripts/rlsbench.sh)" >&2
RLSBENCH_OUT="$out" bash scripts/rlsbench.sh >/dev/null
if [ "$with_scale" = 1 ]; then
	run_scale
fi
if [ "$with_envoy" = 1 ]; then
	run_envoy
fi
if [ "$with_ha" = 1 ]; then
	run_ha
fi
if [ "$with_model" = 1 ]; then
	run_model
fi
echo "bench: wrote $out" >&2
