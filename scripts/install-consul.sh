#!/usr/bin/env bash
# Installs a consul binary for the tests, idempotently.
#
# Does nothing when consul is already on PATH or cached. Otherwise builds
# Consul v1.20.1 from the Go module proxy through a throwaway wrapper module
# (Consul's own go.mod has replace directives, so `go install` refuses it)
# and caches the binary in $XDS_SERVER_CACHE/bin (default ~/.cache/xds-server).
#
# Prints the path of the consul binary on stdout as its last line.
set -euo pipefail

CONSUL_VERSION="${CONSUL_VERSION:-v1.20.1}"
CACHE="${XDS_SERVER_CACHE:-$HOME/.cache/xds-server}"
BIN="$CACHE/bin/consul"

if command -v consul >/dev/null 2>&1; then
	echo "install-consul: using $(command -v consul)" >&2
	command -v consul
	exit 0
fi
if [ -x "$BIN" ]; then
	echo "install-consul: using cached $BIN" >&2
	echo "$BIN"
	exit 0
fi

command -v go >/dev/null 2>&1 || { echo "install-consul: go is required to build consul" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-consul: building consul $CONSUL_VERSION in $work (about 8 minutes on 2 cores)" >&2

cat >"$work/go.mod" <<MOD
module consulbuild

go 1.26

require (
	github.com/hashicorp/consul $CONSUL_VERSION
	github.com/hashicorp/consul/api v1.29.4
	github.com/hashicorp/consul/envoyextensions v0.7.3
	github.com/hashicorp/consul/proto-public v0.6.2
	github.com/hashicorp/consul/sdk v0.16.1
	github.com/hashicorp/consul/troubleshoot v0.7.1
)

exclude (
	github.com/hashicorp/go-msgpack v1.1.5
	github.com/hashicorp/go-msgpack v1.1.6
)
MOD
cat >"$work/tools.go" <<'GO'
//go:build tools

package consulbuild

import _ "github.com/hashicorp/consul"
GO

(
	cd "$work"
	export GOTOOLCHAIN=local GOFLAGS=-mod=mod
	go mod tidy >&2
	mkdir -p "$CACHE/bin"
	go build -o "$BIN.tmp" github.com/hashicorp/consul >&2
	mv "$BIN.tmp" "$BIN"
)
echo "install-consul: built $BIN" >&2
"$BIN" version >&2
echo "$BIN"
