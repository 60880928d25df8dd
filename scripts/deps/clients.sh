#!/usr/bin/env bash
# Installs the real Nacos client libraries the compatibility tests drive:
# Python nacos-sdk-python==1.0.0 (1.x HTTP) into target/compat/venv, Python
# nacos-sdk-python==3.2.0 (2.x gRPC only, needs Python >= 3.10) into
# target/compat/venv-grpc, Node nacos@2.6.3 into target/compat/node, the 3.x
# maintainer SDK nacos-maintainer-sdk-python==0.5.3 (Python >= 3.10) into
# target/compat/venv-maintainer and the v1 admin client use-nacos==0.1.6 into
# target/compat/venv-admin.
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

if ! "$compat/venv-maintainer/bin/python" -c 'import maintainer.transport.client_http_proxy' 2>/dev/null; then
    echo "installing nacos-maintainer-sdk-python==0.5.3 into $compat/venv-maintainer" >&2
    python3 -m venv "$compat/venv-maintainer"
    "$compat/venv-maintainer/bin/pip" install --quiet --disable-pip-version-check nacos-maintainer-sdk-python==0.5.3
fi

if ! "$compat/venv-admin/bin/python" -c 'import use_nacos' 2>/dev/null; then
    echo "installing use-nacos==0.1.6 into $compat/venv-admin" >&2
    python3 -m venv "$compat/venv-admin"
    "$compat/venv-admin/bin/pip" install --quiet --disable-pip-version-check use-nacos==0.1.6 pyyaml  # use_nacos imports yaml without declaring it
fi

if [ ! -f "$compat/node/node_modules/nacos/package.json" ]; then
    echo "installing nacos@2.6.3 into $compat/node" >&2
    mkdir -p "$compat/node"
    (cd "$compat/node" && { [ -f package.json ] || npm init -y >/dev/null; } \
        && npm install --silent --no-audit --no-fund nacos@2.6.3 >/dev/null)
fi
