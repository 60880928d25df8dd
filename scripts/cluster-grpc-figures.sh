#!/usr/bin/env bash
# Figures of Nacos 2.x clients on a 3-node cluster (issue 21): replication
# lag of gRPC registrations (p50/p99), redo time of the real Python client
# after kill -9 of its node, and the time until the instances of a client
# that never comes back are gone from every survivor. Not a test: it prints
# numbers (see scripts/cluster_grpc_figures.py for what each one is).
#
#   scripts/cluster-grpc-figures.sh [SAMPLES]        (default 200)
#
# REGISTRY_BIN (default target/release/registry: build it first, under the
# bench lock on a shared machine); NACOS_COMPAT_DIR (default target/compat,
# where scripts/deps/clients.sh installs nacos-sdk-python 3.2.0 in
# venv-grpc); OUT (default target/cluster-grpc-figures): node logs; BASE_PORT
# (default 18930): the nodes' HTTP ports, gRPC on +1000.
set -euo pipefail
cd "$(dirname "$0")/.."
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
python="${NACOS_COMPAT_DIR:-target/compat}/venv-grpc/bin/python"
[ -x "$python" ] || { echo "no $python: run scripts/deps/clients.sh" >&2; exit 1; }
[ -x "$REGISTRY_BIN" ] || { echo "no $REGISTRY_BIN: cargo build --release -p registry-server --bin registry" >&2; exit 1; }
exec "$python" scripts/cluster_grpc_figures.py "$REGISTRY_BIN" "${OUT:-target/cluster-grpc-figures}" "${1:-200}"
