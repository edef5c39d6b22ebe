# Sourced by the benchmark scripts: private_tmp PREFIX sets tmp to a new
# private directory, removed at exit. Every process the benchmark starts
# holds that directory in its command line (a binary, a config or data
# dir), so if the benchmark was killed before its own cleanups ran, what
# it left behind is stopped by pid.
private_tmp() {
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	trap private_tmp_cleanup EXIT
	trap 'exit 130' INT TERM
}

private_tmp_cleanup() {
	local pids
	pids=$(pgrep -f -- "$tmp/" || true)
	for pid in $pids; do
		kill "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
