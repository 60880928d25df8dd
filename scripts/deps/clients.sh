#!/usr/bin/env bash
# Installs the real Nacos client libraries the compatibility tests drive:
# Python nacos-sdk-python==1.0.0 (1.x HTTP) into target/compat/venv, Python
# nacos-sdk-python==3.2.0 (2.x gRPC only, needs Python >= 3.10) into
# target/compat/venv-grpc, and Node nacos@2.6.3 into target/compat/node.
# (The Rust nacos-sdk 0.8 is a cargo dev-dependency.) Idempotent: does
# nothing when all are present.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
compat="$root/target/compat"
mkdir -p "$compat"

if ! "$compat/venv/bin/python" -c 'import nacos' 2>/dev/null; then
    echo "installing nacos-sdk-python==1.0.0 into $compat/venv" >&2
    python3 -m venv "$compat/venv"
    "$compat/venv/bin/pip" install --quiet --disable-pip-version-check nacos-sdk-python==1.0.0
fi

if ! "$compat/venv-grpc/bin/python" -c 'import v2.nacos' 2>/dev/null; then
    echo "installing nacos-sdk-python==3.2.0 into $compat/venv-grpc" >&2
    python3 -m venv "$compat/venv-grpc"
    "$compat/venv-grpc/bin/pip" install --quiet --disable-pip-version-check nacos-sdk-python==3.2.0
fi

if [ ! -f "$compat/node/node_modules/nacos/package.json" ]; then
    echo "installing nacos@2.6.3 into $compat/node" >&2
    mkdir -p "$compat/node"
    (cd "$compat/node" && { [ -f package.json ] || npm init -y >/dev/null; } \
        && npm install --silent --no-audit --no-fund nacos@2.6.3 >/dev/null)
fi
