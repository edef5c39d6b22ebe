#!/usr/bin/env bash
# Installs a headless-capable Chromium for the web console's browser test
# (e2e/console_test.go), idempotently: does nothing when chromium is
# already on PATH, otherwise installs Debian's chromium package.
set -euo pipefail

for b in chromium chromium-browser; do
	if command -v "$b" >/dev/null 2>&1; then
		echo "install-chromium: using $(command -v "$b")" >&2
		exit 0
	fi
done
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || true
$SUDO apt-get install -y -qq chromium >&2
echo "install-chromium: installed $(command -v chromium)" >&2
