#!/usr/bin/env bash
# Issue 12's figures for the Nacos 2.x (gRPC) protocol, on loopback, with the
# registry pinned to core 0 (one worker) and loadgen to core 1.
#
#   scripts/grpc-figures.sh [rate|fanout|report|all]   (default: all)
#
# - rate:   gRPC register and query rates and p99 (50 clients, 20k instances);
# - fanout: memory per connected client (registry and loadgen) and push p99 to
#           $FANOUT_CLIENTS subscribed connections (default 10000);
# - report: the nacos-2x-report profile, scaled down by $REPORT_SCALE (default 10:
#           100k instances, 1k clients, register/query 2680/3070 per s).
#
# Binaries: $REGISTRY_BIN and $LOADGEN_BIN, by default in $BIN (default
# target/release; build them one at a time first:
# `nice cargo build --release -p registry-server --bin registry` and
# `... -p loadgen --bin loadgen`). Each run holds the bench lock $BENCH_LOCK
# (default target/bench.lock; point it at the lock every benchmark on a shared
# machine takes) and prints `uptime` with its figure.
# Outputs: $OUT (default target/grpc-figures): loadgen reports and text,
# registry RSS samples (every 0.5 s).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release}
REGISTRY_BIN=${REGISTRY_BIN:-$BIN/registry}
LOADGEN_BIN=${LOADGEN_BIN:-$BIN/loadgen}
OUT=${OUT:-target/grpc-figures}
BENCH_LOCK=${BENCH_LOCK:-target/bench.lock}
FANOUT_CLIENTS=${FANOUT_CLIENTS:-10000}
REPORT_SCALE=${REPORT_SCALE:-10}
HTTP=127.0.0.1:28848
GRPC=127.0.0.1:29848
mkdir -p "$OUT"

lock() {
    mkdir -p "$(dirname "$BENCH_LOCK")"
    flock "$BENCH_LOCK" "$@"
}

# run_one TAG PROFILE_FILE [loadgen args...]
run_one() {
    local tag=$1 prof=$2
    shift 2
    : > "$OUT/rss-$tag.txt"
    echo "== $tag: $(date -u +%FT%TZ) uptime: $(uptime)" | tee "$OUT/out-$tag.txt"
    taskset -c 0 "$REGISTRY_BIN" --listen "$HTTP" --grpc-listen "$GRPC" --workers 1 \
        --grpc-max-connections 20000 --grpc-max-sockets 19000 \
        > "$OUT/registry-$tag.log" 2>&1 &
    local rpid=$!
    sleep 1
    local idle
    idle=$(awk '/VmRSS/ {print $2}' "/proc/$rpid/status")
    echo "registry idle RSS KiB: $idle" | tee -a "$OUT/out-$tag.txt"
    (while kill -0 "$rpid" 2>/dev/null; do
        awk '/VmRSS/ {print $2}' "/proc/$rpid/status" >> "$OUT/rss-$tag.txt" 2>/dev/null || true
        sleep 0.5
    done) &
    local spid=$!
    local rc=0
    timeout 280 taskset -c 1 "$LOADGEN_BIN" run -p "$prof" --target "http://$HTTP" \
        --registry-pid "$rpid" --pinning "registry=0 loadgen=1" --out "$OUT" "$@" \
        >> "$OUT/out-$tag.txt" 2>&1 || rc=$?
    echo "loadgen rc=$rc" | tee -a "$OUT/out-$tag.txt"
    echo "registry peak sampled RSS KiB: $(sort -n "$OUT/rss-$tag.txt" | tail -1) (idle $idle)" \
        | tee -a "$OUT/out-$tag.txt"
    echo "uptime after: $(uptime)" | tee -a "$OUT/out-$tag.txt"
    kill "$rpid" 2>/dev/null || true
    wait "$rpid" 2>/dev/null || true
    kill "$spid" 2>/dev/null || true
    grep -E "per connected|register|query|deregister|subscribe|push|verification|fell behind" \
        "$OUT/out-$tag.txt" | head -40 || true
}

rate() {
    cat > "$OUT/rate.toml" <<'EOF'
name = "grpc-rate"
description = "gRPC register and query rate, registry on one pinned core"
protocol = "grpc"
[fleet]
services = 1000
instances = 40000
subscribers = 0
watched_services = 10
[grpc]
clients = 50
batch = false
[load]
rate = 8000
[steady]
duration = "10s"
query_rate = 8000
[drain]
rate = 8000
EOF
    lock bash -c "$(declare -f run_one); REGISTRY_BIN=$REGISTRY_BIN LOADGEN_BIN=$LOADGEN_BIN OUT=$OUT HTTP=$HTTP GRPC=$GRPC run_one rate $OUT/rate.toml"
}

fanout() {
    cat > "$OUT/fanout.toml" <<EOF
name = "grpc-fanout"
description = "push to $FANOUT_CLIENTS subscribed gRPC connections"
protocol = "grpc"
[fleet]
services = 10
instances = 10
subscribers = $FANOUT_CLIENTS
watched_services = 1
[grpc]
clients = $FANOUT_CLIENTS
batch = false
[load]
rate = 100
[steady]
duration = "10s"
register_rate = 1
deregister_rate = 1
[drain]
rate = 100
[generator]
settle_timeout = "60s"
EOF
    lock bash -c "$(declare -f run_one); REGISTRY_BIN=$REGISTRY_BIN LOADGEN_BIN=$LOADGEN_BIN OUT=$OUT HTTP=$HTTP GRPC=$GRPC run_one fanout $OUT/fanout.toml"
}

report() {
    local s=$REPORT_SCALE
    lock bash -c "$(declare -f run_one); REGISTRY_BIN=$REGISTRY_BIN LOADGEN_BIN=$LOADGEN_BIN OUT=$OUT HTTP=$HTTP GRPC=$GRPC run_one report nacos-2x-report \
        --instances $((1000000 / s)) --services $((100000 / s)) --subscribers $((10000 / s)) \
        --watched-services $((1000 / s)) --grpc-clients $((10000 / s)) \
        --rate $((26800 / s)) --query-rate $((30700 / s)) --duration 20s"
}

case "${1:-all}" in
rate) rate ;;
fanout) fanout ;;
report) report ;;
all) rate; fanout; report ;;
*) echo "usage: $0 [rate|fanout|report|all]" >&2; exit 2 ;;
esac
