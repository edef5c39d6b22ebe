#!/usr/bin/env bash
# Installs redis-server for the tests, idempotently: does nothing when it is
# already on PATH, otherwise installs Debian's redis-server package.
set -euo pipefail

if command -v redis-server >/dev/null 2>&1; then
	echo "install-redis: using $(command -v redis-server)" >&2
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq redis-server >&2
# The tests start their own redis-server on a free port; the packaged
# service is not needed.
$SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
echo "install-redis: installed $(command -v redis-server)" >&2
