#!/usr/bin/env bash
# Runs every fuzz target of the module, one at a time, for FUZZTIME each
# (default 3s; `make fuzz` uses 1m). New failing inputs are written to the
# package's testdata/fuzz/<Target>/ by the testing package, and the script
# fails.
#
# Each package is built once, with the fuzzing instrumentation of
# `go test -fuzz` (`go test -c -fuzz .`), and its binary runs each of the
# package's targets as go test would: in the package's directory (its
# testdata/fuzz corpus is read, failing inputs are written there), with
# go test's flags and generated-corpus cache ($GOCACHE/fuzz/<package>).
# The next package builds while this one fuzzes.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
FUZZTIME="${FUZZTIME:-3s}"
GO="${GO:-go}"
failed=()
# "package-dir target" for every func FuzzXxx(f *testing.F) in a _test.go.
targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+).*#\1 \2#' | sort -u)
dirs=$(cut -d' ' -f1 <<<"$targets" | uniq)
n=$(wc -l <<<"$targets")
echo "fuzz: $n targets in $(wc -l <<<"$dirs") packages, $FUZZTIME each"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cache="$("$GO" env GOCACHE)/fuzz"
module="$("$GO" list -m)"

# build prints "dir ok" or "dir failed" as each package's binary is built.
build() {
	while read -r dir; do
		if "$GO" test -c -fuzz . -o "$work/$(tr / _ <<<"$dir").test" "./$dir" >"$work/$(tr / _ <<<"$dir").build.log" 2>&1; then
			echo "$dir ok"
		else
			echo "$dir failed"
		fi
	done <<<"$dirs"
}

# fuzz runs one target with the package's binary, in the package's directory.
fuzz() {
	local dir=$1 target=$2 bin
	bin="$work/$(tr / _ <<<"$dir").test"
	(cd "$dir" && "$bin" -test.paniconexit0 -test.fuzzcachedir="$cache/$module/$dir" -test.timeout=10m0s \
		-test.run='^$' -test.fuzz="^${target}\$" -test.fuzztime="$FUZZTIME" -test.parallel=2) >"$work/fuzz.log" 2>&1
}

while read -r dir status <&3; do
	if [ "$status" != ok ]; then
		cat "$work/$(tr / _ <<<"$dir").build.log"
		failed+=("./$dir (build)")
		continue
	fi
	for target in $(awk -v d="$dir" '$1 == d {print $2}' <<<"$targets"); do
		echo "fuzz: ./$dir $target"
		# A fuzzing run may report "context deadline exceeded" for an input
		# still running at the deadline (no failing input written): run it
		# once more.
		if ! fuzz "$dir" "$target" && ! { grep -q 'context deadline exceeded' "$work/fuzz.log" &&
			! grep -q 'Failing input written' "$work/fuzz.log" && fuzz "$dir" "$target"; }; then
			cat "$work/fuzz.log"
			failed+=("./$dir $target")
		fi
	done
done 3< <(build)
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz: FAILED %s\n' "${failed[@]}"
	exit 1
fi
echo "fuzz: all $n targets passed"
