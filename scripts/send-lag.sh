#!/usr/bin/env bash
# loadgen's own clock (issue 24's figures): send lag p50/p99, connection wait
# p50/p99 and corrected-minus-uncorrected p50 of the query operation at a few
# request rates, for the 1.x fleet (HTTP) and the 2.x fleet (gRPC), without and
# with --busy-poll. The registry runs pinned to SERVER_CPU, loadgen (one worker)
# to CLIENT_CPU; each run is one steady phase of DURATION at RATE queries/s on a
# small fleet (100 instances, no subscribers), so the rate is what loadgen must
# send on time and little else.
#
# Send lag is what a request waited inside loadgen (from the moment it could be
# written to the write); connection wait is what it waited for its connection
# (earlier answers, a reconnect) before that. Corrected minus uncorrected is both.
# For the 2.x fleet a request is written when the socket takes its last byte, and
# q_p50/q_p99 are the part of its send lag it queued in loadgen's HTTP/2 client
# (from the call's start to that byte; "-" for HTTP, whose writes are the socket's).
#
#   scripts/send-lag.sh                       # 1k 10k 100k, both fleets, both modes
#   RATES="1000" DURATION=3s FLEETS=http MODES=plain scripts/send-lag.sh
#
# srv_cpu and lg_cpu are the registry's and loadgen's CPU time over the run's length
# (loadgen's from `/usr/bin/time`, "-" without it), to tell which side saturated when
# the achieved rate falls short: loadgen's includes its wait before each due time
# (it spins the last LEAD of it), so it reads high long before loadgen is the limit.
#
# steal_ms is the time the hypervisor took CLIENT_CPU away during the run
# (/proc/stat's steal column; 0 on bare metal): a busy-polling vCPU never halts, so
# a host that is short of CPU deschedules it, and its requests wait that long.
#
# Builds release once (set SKIP_BUILD=1 to reuse target/release); hold the bench
# lock while it runs on a shared machine (flock "$BENCH_LOCK" scripts/send-lag.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

RATES=${RATES:-"1000 10000 100000"}
FLEETS=${FLEETS:-"http grpc"}
MODES=${MODES:-"plain busy"}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-64}
PIPELINE=${PIPELINE:-4}
PORT=${PORT:-18870}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
OUT=${OUT:-target/send-lag}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
LOADGEN_BIN=${LOADGEN_BIN:-target/release/loadgen}

if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -q -p registry-server --bin registry -p loadgen --bin loadgen
fi
mkdir -p "$OUT"
profile="$OUT/send-lag.toml"
cat >"$profile" <<TOML
name = "send-lag"
description = "one steady phase of queries at a set rate on a small fleet"
thresholds = []
[fleet]
services = 10
instances = 100
subscribers = 0
watched_services = 0
beat_interval = "5s"
[load]
rate = 1000
[steady]
duration = "$DURATION"
query_rate = 1000
[drain]
rate = 1000
[connections]
count = $CONNECTIONS
pipeline = $PIPELINE
[grpc]
clients = $CONNECTIONS
[generator]
workers = 1
TOML

server=""
stop() { [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; server=""; }; }
trap stop EXIT

printf '%-5s %-6s %8s %9s %9s %9s %9s %9s %9s %9s %10s %10s %8s %7s %8s\n' fleet mode rate achieved \
    lag_p50 lag_p99 q_p50 q_p99 wait_p50 wait_p99 c-u_p50 errors srv_cpu lg_cpu steal_ms
# CLIENT_CPU's steal time so far, in clock ticks (USER_HZ).
steal() { awk -v c="cpu$CLIENT_CPU" '$1 == c { print $9 }' /proc/stat; }
for fleet in $FLEETS; do
    for mode in $MODES; do
        for rate in $RATES; do
            if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
                echo "port ${PORT} is already in use (set PORT=...)" >&2
                exit 1
            fi
            taskset -c "$SERVER_CPU" "$REGISTRY_BIN" --listen "127.0.0.1:${PORT}" --workers 1 \
                >"$OUT/registry.log" 2>&1 &
            server=$!
            for _ in $(seq 100); do
                (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1000))") 2>/dev/null && break
                sleep 0.1
            done
            name="$fleet-$mode-$rate"
            rm -rf "${OUT:?}/$name"
            busy=()
            [ "$mode" = busy ] && busy=(--busy-poll)
            timed=()
            [ -x /usr/bin/time ] && timed=(/usr/bin/time -f '%U %S' -o "$OUT/$name.cpu")
            rm -f "$OUT/$name.cpu"
            steal_before=$(steal)
            taskset -c "$CLIENT_CPU" "${timed[@]}" "$LOADGEN_BIN" run --profile "$profile" \
                --target "http://127.0.0.1:${PORT}" --protocol "$fleet" --query-rate "$rate" \
                --registry-pid "$server" --pinning "registry cpu $SERVER_CPU, loadgen cpu $CLIENT_CPU" \
                --out "$OUT/$name" --quiet "${busy[@]}" >"$OUT/$name.log" 2>&1 || true
            steal_ms=$(( ($(steal) - steal_before) * 1000 / $(getconf CLK_TCK) ))
            stop
            report=$(ls "$OUT/$name"/*.json 2>/dev/null | head -1 || true)
            if [ -z "$report" ]; then
                echo "$name: no report (see $OUT/$name.log)" >&2
                continue
            fi
            python3 - "$report" "$fleet" "$mode" "$rate" "$OUT/$name.cpu" "$steal_ms" <<'PY'
import json, os, sys
report, fleet, mode, rate, cpu_file, steal_ms = sys.argv[1:7]
r = json.load(open(report))
q = next((o for o in r["operations"] if o["name"] == "query"), None)
if q is None:
    print(f"{fleet:<5} {mode:<6} {rate:>8} no query operation"); sys.exit()
def p(block, key):
    return block["summary"][key] if block else 0
lag, wait, queue = q.get("send_lag"), q.get("connection_wait"), q.get("client_queue")
def qp(key):
    return f"{queue['summary'][key]}µ" if queue else "-"

cu = q["corrected"]["summary"]["p50_us"] - q["uncorrected"]["summary"]["p50_us"]
# The steady phase's achieved query rate (the run's length includes load and drain).
steady = [o for ph in r.get("phases", []) if ph["phase"] == "steady" for o in ph["ops"]
          if o["name"] == "query"]
achieved = steady[0]["achieved_rate"] if steady else q["achieved_rate"]
length = max(r["duration_s"], 1e-9)
srv = (r.get("server") or {}).get("cpu_seconds")
srv_cpu = "-" if srv is None else f"{100 * srv / length:.0f}%"
lg_cpu = "-"
if os.path.exists(cpu_file):
    try:
        cpu = sum(float(x) for x in open(cpu_file).read().split()[-2:])
        lg_cpu = f"{100 * cpu / length:.0f}%"
    except ValueError:
        pass
print(f"{fleet:<5} {mode:<6} {rate:>8} {achieved:>9.0f} {p(lag,'p50_us'):>8}µ "
      f"{p(lag,'p99_us'):>8}µ {qp('p50_us'):>9} {qp('p99_us'):>9} {p(wait,'p50_us'):>8}µ {p(wait,'p99_us'):>8}µ {cu:>9}µ {q['errors']:>10}"
      f" {srv_cpu:>8} {lg_cpu:>7} {steal_ms:>8}")
PY
        done
    done
done
echo "reports under $OUT"
