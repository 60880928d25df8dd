#!/usr/bin/env bash
# Installs the real Nacos client libraries the compatibility tests drive:
# Python nacos-sdk-python==1.0.0 into target/compat/venv and Node nacos@2.6.3
# into target/compat/node. Idempotent: does nothing when both are present.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
compat="$root/target/compat"
mkdir -p "$compat"

if ! "$compat/venv/bin/python" -c 'import nacos' 2>/dev/null; then
    echo "installing nacos-sdk-python==1.0.0 into $compat/venv" >&2
    python3 -m venv "$compat/venv"
    "$compat/venv/bin/pip" install --quiet --disable-pip-version-check nacos-sdk-python==1.0.0
fi

if [ ! -f "$compat/node/node_modules/nacos/package.json" ]; then
    echo "installing nacos@2.6.3 into $compat/node" >&2
    mkdir -p "$compat/node"
    (cd "$compat/node" && { [ -f package.json ] || npm init -y >/dev/null; } \
        && npm install --silent --no-audit --no-fund nacos@2.6.3 >/dev/null)
fi
