#!/usr/bin/env bash
# What `make test` runs: the installs (scripts/install-*.sh), the lint
# (gofmt, go vet), every test with the race detector and, beside them, every fuzz
# target for 3s (scripts/fuzz.sh). On a fresh machine the installs are
# mostly waiting (Consul's modules, Envoy's wheel, Debian's packages) and
# the rest is compiling, so the installs run beside the module download,
# the lint and the compilation of the race-instrumented test packages
# (`go list -export -test -race -deps`: what go test compiles, not linked),
# and the fuzzing instrumentation builds beside the tests. The tests start
# when both are done. Prints each phase's time at the end.
set -euo pipefail
# Job control: each background job is its own process group, so that
# leaving early (a failure, Ctrl-C) stops it with everything it started.
set -m
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
GO="${GO:-go}"
CACHE="${XDS_SERVER_CACHE:-$HOME/.cache/xds-server}"
# Where the tests find consul and envoy (the Makefile passes it).
TEST_PATH="${TEST_PATH:-$CACHE/consul-v1.14.11/bin:$CACHE/envoy-1.40.0/bin:$CACHE/bin}"
logs="$(mktemp -d)"
t0=$(date +%s)
# since START: seconds from START (seconds since the epoch) to now.
since() { echo "$(($(date +%s) - $1))s"; }
# The phases' times, printed at the end, also when one fails.
times=()
cleanup() {
	for p in $(jobs -p); do
		kill -- "-$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	[ ! -f "$logs/deps.time" ] || times=("installs $(cat "$logs/deps.time")" "${times[@]}")
	printf 'test: '
	[ ${#times[@]} -eq 0 ] || printf '%s, ' "${times[@]}"
	echo "total $(since "$t0") (the installs beside lint and compile)"
	rm -rf "$logs"
}
trap cleanup EXIT

# deps: Consul's build (compiling) beside the downloads of the others.
deps() {
	bash scripts/install-consul.sh >/dev/null &
	local consul=$!
	bash scripts/install-envoy.sh >/dev/null
	bash scripts/install-redis.sh
	bash scripts/install-chromium.sh
	wait "$consul"
	since "$t0" >"$logs/deps.time"
}
deps >"$logs/deps.log" 2>&1 &
deps_pid=$!

make --no-print-directory lint GO="$GO"
times+=("lint $(since "$t0")")
s=$(date +%s)
# A package that does not compile is reported by go test below.
"$GO" list -export -test -race -deps ./... >/dev/null 2>&1 || true
times+=("compile $(since "$s")")
if ! wait "$deps_pid"; then
	cat "$logs/deps.log" >&2
	echo "test: installing the test dependencies failed" >&2
	exit 1
fi
cat "$logs/deps.log" >&2

# The fuzz targets (scripts/fuzz.sh: one instrumented build per package,
# then each target for 3s) run at the lowest priority beside the tests:
# the tests mostly wait on Consul and Envoy, and the fuzzing takes the
# CPU they leave idle.
(nice -n 19 env FUZZTIME=3s GO="$GO" bash scripts/fuzz.sh >"$logs/fuzz.log" 2>&1
	echo $? >"$logs/fuzz.rc") &
fuzz_pid=$!
# go test starts packages in the order given, two at a time (2 cores):
# the slowest first (2-4 minutes each, most of it waiting on Consul and
# Envoy), so that no long package runs alone at the end.
slowest="./e2e ./xds ./bench/lab ./e2e/envoye2e ./ha"
s=$(date +%s)
# shellcheck disable=SC2086 # $slowest is a list of packages
PATH="$TEST_PATH:$PATH" XDS_SERVER_REQUIRE_INTEGRATION=1 \
	"$GO" test -race -count=1 -timeout 30m $slowest ./... || { times+=("go test $(since "$s") (failed)"); exit 1; }
times+=("go test $(since "$s")")
s=$(date +%s)
wait "$fuzz_pid" || true
cat "$logs/fuzz.log"
if [ "$(cat "$logs/fuzz.rc" 2>/dev/null)" != 0 ]; then
	times+=("fuzz (failed)")
	exit 1
fi
times+=("fuzz beside the tests, then $(since "$s")")
