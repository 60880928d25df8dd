#!/usr/bin/env bash
# Issue 36 item 5's figure: loadgen's send lag against the machine's own timer
# wake-up lateness, at the default profile (smoke), for both fleets (1.x HTTP
# and 2.x gRPC). The registry runs pinned to SERVER_CPU with one worker,
# loadgen to CLIENT_CPU; loadgen's wake-up probe (loadgen/src/jitter.rs) runs on
# loadgen's core during the run. Goal: send lag p99 <= 1.5x wake-up p99.
#
#   flock target/bench.lock scripts/clock-figures.sh
#   RUNS=3 FLEETS="http grpc" PROFILE=smoke SERVER_CPU=0 CLIENT_CPU=1 PORT=18890
#   REGISTRY_BIN=... LOADGEN_BIN=...   (default: this tree's release build, built once)
#
# Prints one line per run: send lag p50/p99, wake-up p50/p99, the ratio of the
# p99s against the goal, and the hypervisor's steal
# on loadgen's core during the run (/proc/stat; a run with seconds of steal
# measures the host, not loadgen).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
FLEETS=${FLEETS:-"http grpc"}
PROFILE=${PROFILE:-smoke}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-18890}
OUT=${OUT:-target/clock-figures}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
LOADGEN_BIN=${LOADGEN_BIN:-target/release/loadgen}
if [[ -z "${SKIP_BUILD:-}" && ( ! -x "$REGISTRY_BIN" || ! -x "$LOADGEN_BIN" ) ]]; then
    cargo build --release -q -p registry-server --bin registry -p loadgen --bin loadgen
fi
mkdir -p "$OUT"
server=""
stop() { [[ -z "$server" ]] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap stop EXIT
steal() { awk -v c="cpu$CLIENT_CPU" '$1 == c { print $9 }' /proc/stat; }

printf '%-5s %3s %9s %9s %9s %9s %7s %5s %8s\n' fleet run lag_p50 lag_p99 wake_p50 wake_p99 ratio goal steal_ms
for fleet in $FLEETS; do
    for run in $(seq "$RUNS"); do
        taskset -c "$SERVER_CPU" "$REGISTRY_BIN" --listen "127.0.0.1:$PORT" --workers 1 \
            >"$OUT/registry.log" 2>&1 &
        server=$!
        for _ in $(seq 100); do
            (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1000))") 2>/dev/null && break
            sleep 0.1
        done
        name="$fleet-$run"
        rm -rf "${OUT:?}/$name"
        before=$(steal)
        taskset -c "$CLIENT_CPU" "$LOADGEN_BIN" run --profile "$PROFILE" \
            --target "http://127.0.0.1:$PORT" --protocol "$fleet" --registry-pid "$server" \
            --pinning "registry cpu $SERVER_CPU, loadgen cpu $CLIENT_CPU" \
            --out "$OUT/$name" --quiet >"$OUT/$name.log" 2>&1 || true
        steal_ms=$(( ($(steal) - before) * 1000 / $(getconf CLK_TCK) ))
        stop
        report=$(ls "$OUT/$name"/*.json 2>/dev/null | head -1 || true)
        [[ -n "$report" ]] || { echo "$name: no report (see $OUT/$name.log)" >&2; continue; }
        python3 - "$report" "$fleet" "$run" "$steal_ms" <<'PY'
import json, sys
report, fleet, run, steal_ms = sys.argv[1:5]
r = json.load(open(report))
lag = (r.get("send_lag") or {}).get("summary") or {}
wake = (r.get("wakeup_lateness") or {}).get("summary") or {}
lp99, wp99 = lag.get("p99_us"), wake.get("p99_us")
ratio = f"{lp99 / wp99:.2f}" if lp99 is not None and wp99 else "-"
goal = "met" if lp99 is not None and wp99 and lp99 <= 1.5 * wp99 else "NOT"
print(f"{fleet:<5} {run:>3} {lag.get('p50_us', '-'):>8}µ {lp99:>8}µ {wake.get('p50_us', '-'):>8}µ "
      f"{wp99:>8}µ {ratio:>7} {goal:>5} {steal_ms:>8}")
PY
    done
done
