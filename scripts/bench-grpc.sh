#!/usr/bin/env bash
# The 2.x door side by side (issue 26, target 6): our registry and, when
# $RNACOS_BIN names an r-nacos binary, r-nacos, each pinned to core 0 with
# `conn-fleet` (benches/src/bin/conn-fleet.rs) on core 1, in one run:
# - server memory per idle 2.x connection (RSS growth over CONNECTIONS clients
#   with their streams, health checks and the server's detections);
# - server CPU microseconds per register, query and deregister (OPS of each,
#   16 in flight, from the server's /proc CPU time; 10 ms tick resolution);
# - push change-to-receipt p50/p99 to SUBSCRIBED connections over ROUNDS changes.
# Then one line of ratios (ours / r-nacos; below 1 means ours is cheaper).
#
#   scripts/bench-grpc.sh [CONNECTIONS] [SUBSCRIBED] [OPS]      (defaults 10000 1000 20000)
#   RNACOS_BIN=$HOME/rnacos/bin/rnacos scripts/bench-grpc.sh
#
# r-nacos 0.8.8 installs with `cargo install rnacos --version 0.8.8 --locked
# --root DIR` (outside the repository; ~10 minutes of CPU). Never run in CI.
# Env: PORT (18950; gRPC on PORT + 1000), ROUNDS (10), SKIP_BUILD,
# REGISTRY_BIN, FLEET_BIN, OUT (target/bench-grpc).
set -euo pipefail
cd "$(dirname "$0")/.."

CONNECTIONS=${1:-10000}
SUBSCRIBED=${2:-1000}
OPS=${3:-20000}
PORT=${PORT:-18950}
ROUNDS=${ROUNDS:-10}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
FLEET_BIN=${FLEET_BIN:-target/release/conn-fleet}
OUT=${OUT:-target/bench-grpc}

if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -p registry-server --bin registry
    cargo build --release -p benches --bin conn-fleet --no-default-features --features fleet
fi
# Each process holds one end of every connection.
files=$((CONNECTIONS + 1000))
ulimit -Hn "$files" 2>/dev/null || true
ulimit -n "$files" || { echo "cannot raise the file limit to $files" >&2; exit 1; }
mkdir -p "$OUT"

server=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap stop EXIT

# run NAME: starts the server the caller described in $cmd, runs the fleet,
# writes $OUT/NAME.json.
run() {
    local name="$1"
    if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
        echo "port ${PORT} is already in use (set PORT=...)" >&2
        exit 1
    fi
    taskset -c 0 "${cmd[@]}" >"$OUT/$name.log" 2>&1 &
    server=$!
    for _ in $(seq 300); do
        kill -0 "$server" 2>/dev/null || { echo "$name did not start:" >&2; cat "$OUT/$name.log" >&2; exit 1; }
        (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1000))") 2>/dev/null && break
        sleep 0.1
    done
    sleep 1
    taskset -c 1 "$FLEET_BIN" --grpc "127.0.0.1:$((PORT + 1000))" --connections "$CONNECTIONS" \
        --subscribe "$SUBSCRIBED" --rounds "$ROUNDS" --ops "$OPS" --server-pid "$server" \
        >"$OUT/$name.json"
    stop
    echo "$name: $(cat "$OUT/$name.json")"
}

cmd=("$REGISTRY_BIN" --listen "127.0.0.1:${PORT}" --workers 1
    --grpc-max-connections "$((CONNECTIONS + 100))" --grpc-max-sockets "$((CONNECTIONS + 1000))")
run registry
if [ -n "${RNACOS_BIN:-}" ]; then
    data="$(mktemp -d)"
    cmd=(env RNACOS_HTTP_PORT="$PORT" RNACOS_GRPC_PORT="$((PORT + 1000))"
        RNACOS_HTTP_CONSOLE_PORT=0 RNACOS_DATA_DIR="$data" RNACOS_HTTP_WORKERS=1 "$RNACOS_BIN")
    run rnacos
    rm -rf "$data"
    python3 - "$OUT/registry.json" "$OUT/rnacos.json" <<'PY'
import json, sys
ours, peer = (json.load(open(p)) for p in sys.argv[1:3])
def ratio(a, b):
    return "n/a" if not b else f"{a / b:.2f}"
rows = [("memory per connection (KiB)", ours["server_kib_per_connection"], peer["server_kib_per_connection"]),
        ("push p99 (ms)", ours["push_p99_ms"], peer["push_p99_ms"])]
for kind in ("register", "query", "deregister"):
    rows.append((f"{kind} CPU per op (us)", ours["server_cost"][kind]["server_cpu_us_per_op"],
                 peer["server_cost"][kind]["server_cpu_us_per_op"]))
print(f"{'figure':32} {'registry':>10} {'r-nacos':>10} {'ratio':>6}")
for name, a, b in rows:
    print(f"{name:32} {a:10.2f} {b:10.2f} {ratio(a, b):>6}")
PY
fi
