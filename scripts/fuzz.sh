#!/usr/bin/env bash
# Runs every fuzz target of the module, one at a time, for FUZZTIME each
# (default 3s; `make fuzz` uses 1m). New failing inputs are written to the
# package's testdata/fuzz/<Target>/ by go test, and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local
FUZZTIME="${FUZZTIME:-3s}"
GO="${GO:-go}"
failed=()
# "package-dir target" for every func FuzzXxx(f *testing.F) in a _test.go.
targets=$(grep -rEo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+).*#\1 \2#' | sort -u)
n=$(wc -l <<<"$targets")
echo "fuzz: $n targets, $FUZZTIME each"
while read -r dir target; do
	[ -n "$target" ] || continue
	echo "fuzz: ./$dir $target"
	run() { "$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -parallel 2 "./$dir" >/tmp/fuzz.$$.log 2>&1; }
	# go test -fuzz may report "context deadline exceeded" for an input still
	# running at the deadline (no failing input written): run it once more.
	if ! run && ! { grep -q 'context deadline exceeded' /tmp/fuzz.$$.log && ! grep -q 'Failing input written' /tmp/fuzz.$$.log && run; }; then
		cat /tmp/fuzz.$$.log
		failed+=("./$dir $target")
	fi
done <<<"$targets"
rm -f /tmp/fuzz.$$.log
if [ ${#failed[@]} -gt 0 ]; then
	printf 'fuzz: FAILED %s\n' "${failed[@]}"
	exit 1
fi
echo "fuzz: all $n targets passed"
