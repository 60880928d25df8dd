#!/usr/bin/env bash
# Memory per idle 2.x connection and push fan-out (issue 26, target 4): the
# release registry pinned to core 0, `conn-fleet` (benches/src/bin/conn-fleet.rs)
# to core 1 holding CONNECTIONS simulated 2.x clients, each with its stream,
# health checks every 5 s and answers to the server's detections; the first
# SUBSCRIBED subscribe to one service, which then changes once a second.
#
#   scripts/grpc-conns.sh [CONNECTIONS] [SUBSCRIBED] [extra conn-fleet flags...]
#   scripts/grpc-conns.sh 10000 0             # idle memory per connection
#   scripts/grpc-conns.sh 100000 10000        # 100k clients, push to 10k
#
# Prints conn-fleet's JSON: server_kib_per_connection is the registry's RSS
# growth over the fleet divided by its connections (read after one round of
# health checks), push_p99_ms the change-to-receipt p99 over every subscriber
# and round. Not a CI test: it takes minutes and needs the file limit raised
# (a hard limit of CONNECTIONS + 1000 for each of the two processes).
# Env: PORT (18900; gRPC is PORT + 1000), REGISTRY_BIN, FLEET_BIN, SOURCES (8
# loopback source addresses), SKIP_BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${1:-10000}
SUBSCRIBED=${2:-0}
shift 2 || shift $# || true
PORT=${PORT:-18900}
SOURCES=${SOURCES:-8}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
FLEET_BIN=${FLEET_BIN:-target/release/conn-fleet}
LOG=${LOG:-target/grpc-conns-registry.log}

if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -p registry-server --bin registry
    cargo build --release -p benches --bin conn-fleet --no-default-features --features fleet
fi
# Each process holds one end of every connection.
files=$((CONNECTIONS + 1000))
ulimit -Hn "$files" 2>/dev/null || true
ulimit -n "$files" || { echo "cannot raise the file limit to $files" >&2; exit 1; }

if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
    echo "port ${PORT} is already in use (set PORT=...)" >&2
    exit 1
fi
mkdir -p "$(dirname "$LOG")"
taskset -c 0 "$REGISTRY_BIN" --listen "127.0.0.1:${PORT}" --workers 1 \
    --grpc-max-connections "$((CONNECTIONS + 100))" \
    --grpc-max-sockets "$((CONNECTIONS + 1000))" >"$LOG" 2>&1 &
REGISTRY=$!
trap 'kill $REGISTRY 2>/dev/null && wait $REGISTRY 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    kill -0 "$REGISTRY" 2>/dev/null || { echo "the registry did not start:" >&2; cat "$LOG" >&2; exit 1; }
    (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1000))") 2>/dev/null && break
    sleep 0.1
done
taskset -c 1 "$FLEET_BIN" --grpc "127.0.0.1:$((PORT + 1000))" --connections "$CONNECTIONS" \
    --subscribe "$SUBSCRIBED" --sources "$SOURCES" --server-pid "$REGISTRY" \
    --metrics "127.0.0.1:${PORT}" "$@"
