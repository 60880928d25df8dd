#!/usr/bin/env bash
# HTTP throughput of the registry against the floor, on one core.
#
# The server under test is pinned to core 0 with one worker thread and wrk
# to core 1. Measured in one run: the floor (benches' http-floor), GET
# instance/list (a service with 10 instances), PUT instance/beat (light
# beats over registered instances) and POST instance (new instances), each
# plain (32 connections) and pipelined (16 requests per write). The floor
# answers with as many bytes of body as the list does (FLOOR_BODY_BYTES=N
# sets another size). Prints
# requests/s, latency percentiles, the server's CPU share and requests per
# second of server CPU, and each as a ratio of the floor's. On a shared
# machine the per-CPU-second ratio is the robust one: a neighbour's build
# takes core 0 from both servers alike only within one measurement.
#
# Usage: scripts/bench-http.sh [SECONDS]   (default 10 per measurement)
#   DEPTHS="1 16"           pipeline depths to run (default both)
#   CASES="list register beat"  which registry cases to run (default all)
#   REGISTRY_BIN=path       a registry binary to measure instead of this tree's
#   FLOOR_BIN=path          an http-floor binary instead of this tree's release build
#   FLOOR_BODY_BYTES=N      the floor's body size (default: the list answer's)
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
registry_bin="${REGISTRY_BIN:-target/release/registry}"
[ -n "${REGISTRY_BIN:-}" ] || cargo build --release -q -p registry-server --bin registry
floor_bin="${FLOOR_BIN:-target/release/http-floor}"
[ -n "${FLOOR_BIN:-}" ] || cargo build --release -q -p benches --bin http-floor
lua="$PWD/scripts/wrk/registry.lua"
port_floor=18801
port_reg=18802
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

REGISTRY_LOG=warn taskset -c 0 "$registry_bin" --listen "127.0.0.1:$port_reg" --workers 1 \
    --max-connections 1000 --max-inflight 100000 >/dev/null &
pids+=($!)
pid_reg=$!
cases="${CASES:-list register beat}"
has() { [[ " $cases " == *" $1 "* ]]; }
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port_reg/" && break; sleep 0.1; done

base="http://127.0.0.1:$port_reg/nacos/v1/ns"
for i in $(seq 1 10); do
    curl -s -o /dev/null -XPOST "$base/instance?serviceName=bench-list&ip=10.9.0.$i&port=8080&metadata=version%3D1.0.0"
done

# The floor writes answers as large as the list's (FLOOR_BODY_BYTES=64 for the
# old do-nothing floor), so the kernel's copy of the answer is in both rates
# and the ratio is what the handler itself costs.
list_bytes=$(curl -s "$base/instance/list?serviceName=bench-list" | wc -c)
floor_bytes="${FLOOR_BODY_BYTES:-$list_bytes}"
taskset -c 0 "$floor_bin" --listen "127.0.0.1:$port_floor" --workers 1 \
    --body-bytes "$floor_bytes" >/dev/null &
pids+=($!)
pid_floor=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port_floor/" && break; sleep 0.1; done

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# Runs wrk against the server `pid`; prints "rate p50 p90 p99 non2xx cpu%
# per-cpu-s" (latencies as wrk prints them).
measure() { # pid url mode depth [count]
    local conns=32 t0 t1 out
    t0=$(ticks "$1")
    out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency -s "$lua" "$2" -- "$3" "$4" "${5:-1}" 2>&1)
    t1=$(ticks "$1")
    echo "$out" | awk -v ticks="$((t1 - t0))" -v hz="$hz" -v s="$secs" '
        /Requests\/sec/ {rate=$2} / requests in / {n=$1}
        /^ +50%/ {p50=$2} /^ +90%/ {p90=$2} /^ +99%/ {p99=$2}
        / Non-2xx or 3xx responses/ {bad=$NF}
        END {cpu = ticks / hz; printf "%s %s %s %s %s %.0f %.0f\n", rate, p50, p90, p99,
            (bad==""?0:bad), 100 * cpu / s, (cpu > 0 ? n / cpu : 0)}'
}

echo "uptime: $(uptime)"
echo "list answer: $list_bytes B of body; floor answer: $floor_bytes B of body"
printf '%-22s %-10s %10s %7s %8s %11s %7s %8s %8s %8s %7s\n' case mode "req/s" "floor%" \
    "server%" "req/cpu-s" "floor%" p50 p90 p99 non2xx
report() { # name mode result floor_rate floor_per_cpu
    read -r rate p50 p90 p99 bad cpu per_cpu <<<"$3"
    local ratio cpu_ratio
    ratio=$(awk -v r="$rate" -v f="$4" 'BEGIN { printf "%.0f%%", 100 * r / f }')
    cpu_ratio=$(awk -v r="$per_cpu" -v f="$5" 'BEGIN { printf "%.0f%%", (f > 0 ? 100 * r / f : 0) }')
    printf '%-22s %-10s %10.0f %7s %7s%% %11s %7s %8s %8s %8s %7s\n' "$1" "$2" "$rate" "$ratio" \
        "$cpu" "$per_cpu" "$cpu_ratio" "$p50" "$p90" "$p99" "$bad"
}

for depth in ${DEPTHS:-1 16}; do
    label=$([ "$depth" = 1 ] && echo plain || echo "pipelined-$depth")
    floor=$(measure "$pid_floor" "http://127.0.0.1:$port_floor" floor "$depth")
    read -r floor_rate _ _ _ _ _ floor_cpu <<<"$floor"
    report floor "$label" "$floor" "$floor_rate" "$floor_cpu"
    if has list; then
        report "GET instance/list" "$label" \
            "$(measure "$pid_reg" "http://127.0.0.1:$port_reg" list "$depth")" "$floor_rate" "$floor_cpu"
    fi
    if has register; then
        report "POST instance (new)" "$label" \
            "$(measure "$pid_reg" "http://127.0.0.1:$port_reg" register "$depth")" "$floor_rate" "$floor_cpu"
    fi
    has beat || continue
    # The beat fleet: 50k instances over 5k services, registered in one
    # pipelined burst; the beat script cycles over them.
    beat_n=50000
    python3 - "$port_reg" "$beat_n" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
batch = 2000
for start in range(0, n, batch):
    reqs = b"".join(
        b"POST /nacos/v1/ns/instance?serviceName=bench-beat-%d&ip=10.%d.%d.%d&port=8080 HTTP/1.1\r\nHost: x\r\n\r\n"
        % (i % 5000, (i >> 16) & 255, (i >> 8) & 255, i & 255) for i in range(start, min(n, start + batch)))
    s.sendall(reqs)
    want, got = min(n, start + batch) - start, 0
    buf = b""
    while got < want:
        buf += s.recv(1 << 20)
        got = buf.count(b"HTTP/1.1 200")
s.close()
PY
    report "PUT instance/beat" "$label" \
        "$(measure "$pid_reg" "http://127.0.0.1:$port_reg" beat "$depth" "$beat_n")" "$floor_rate" "$floor_cpu"
done
echo "registry: $(curl -s "$base/operator/metrics")"
