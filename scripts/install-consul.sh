#!/usr/bin/env bash
# Installs a consul binary for the tests, idempotently.
#
# The tests run against Consul v1.14.11, the last open-source (MPL-2.0)
# release line this project builds (Consul v1.17 and later are not open
# source). The binary is built from the Go module proxy through a throwaway
# wrapper module (Consul's own go.mod has replace directives, so
# `go install` refuses it) and cached in a directory named after the
# version, $XDS_SERVER_CACHE/consul-v1.14.11/bin (default
# ~/.cache/xds-server), so a binary of another version cached by an older
# script (for example ~/.cache/xds-server/bin/consul) is never reused.
#
# A consul already on PATH is used only when it is the same version.
# Prints the path of the consul binary on stdout as its last line.
set -euo pipefail

CONSUL_VERSION="v1.14.11"
CACHE="${XDS_SERVER_CACHE:-$HOME/.cache/xds-server}"
DIR="$CACHE/consul-$CONSUL_VERSION/bin"
BIN="$DIR/consul"

# The whole output is read before it is looked at: with pipefail, a head or
# grep -q that stops reading early can make consul die of SIGPIPE and the
# check fail, which rebuilt a cached binary now and then.
same_version() {
	local out
	out="$("$1" version 2>/dev/null)" || return 1
	[ "${out%%$'\n'*}" = "Consul $CONSUL_VERSION" ]
}

if [ -x "$BIN" ] && same_version "$BIN"; then
	echo "install-consul: using cached $BIN" >&2
	echo "$BIN"
	exit 0
fi
if p="$(command -v consul 2>/dev/null)" && same_version "$p"; then
	echo "install-consul: using $p" >&2
	echo "$p"
	exit 0
fi

command -v go >/dev/null 2>&1 || { echo "install-consul: go is required to build consul" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-consul: building consul $CONSUL_VERSION in $work (about 2 minutes on 2 cores)" >&2

# The versions Consul v1.14.11 was released with; nothing else is required.
cat >"$work/go.mod" <<MOD
module consulbuild

go 1.26

require (
	github.com/hashicorp/consul $CONSUL_VERSION
	github.com/hashicorp/consul/api v1.18.1
	github.com/hashicorp/consul/proto-public v0.2.1
	github.com/hashicorp/consul/sdk v0.13.0
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
	mkdir -p "$DIR"
	# Without the symbol table and DWARF (-s -w): a shorter link, a smaller binary.
	go build -ldflags='-s -w' -o "$BIN.tmp" github.com/hashicorp/consul >&2
	mv "$BIN.tmp" "$BIN"
)
echo "install-consul: built $BIN" >&2
"$BIN" version >&2
echo "$BIN"
