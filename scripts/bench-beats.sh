#!/usr/bin/env bash
# Pipelined light beats against the release registry on one core, at several
# pipeline depths, with the server's CPU share of each run, so a reader can tell
# a server-bound rate (share ~100 %) from a generator-bound one, and the beats
# per second of server CPU (beats / the registry's user+system seconds): what one
# dedicated core would answer, readable even when other work shares core 0.
#
# The registry runs pinned to core 0 with one worker, wrk to core 1 (as in
# scripts/bench-http.sh); 50k instances over 5k services are registered first
# (INSTANCES=n for another count, over n/10 services; at 1M the working set
# is far past the caches, as in a capacity run)
# and the beat script cycles over them. Each depth runs SECONDS (default 5).
#
#   scripts/bench-beats.sh [SECONDS] [DEPTH...]     (default depths: 16 32 64)
#   REGISTRY_BIN=path CONNECTIONS=32 scripts/bench-beats.sh 5 16 64
#   HEADERS=java scripts/bench-beats.sh    (the Java client's headers: ~480-byte beats)
#   INSTANCES=1000000 scripts/bench-beats.sh 20 64
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"
shift || true
depths=("$@")
((${#depths[@]})) || depths=(16 32 64)
conns="${CONNECTIONS:-32}"
bin="${REGISTRY_BIN:-target/release/registry}"
port="${PORT:-18803}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
[[ -x "$bin" ]] || cargo build --release -q -p registry-server --bin registry
REGISTRY_LOG=warn taskset -c 0 "$bin" --listen "127.0.0.1:$port" --workers 1 \
    --max-connections 1000 --max-inflight 100000 >/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done

n="${INSTANCES:-50000}"
python3 - "$port" "$n" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
for start in range(0, n, 2000):
    end = min(n, start + 2000)
    s.sendall(b"".join(
        b"POST /nacos/v1/ns/instance?serviceName=bench-beat-%d&ip=10.%d.%d.%d&port=8080 HTTP/1.1\r\nHost: x\r\n\r\n"
        % (i % max(1, n // 10), (i >> 16) & 255, (i >> 8) & 255, i & 255) for i in range(start, end)))
    buf = b""
    while buf.count(b"HTTP/1.1 200") < end - start:
        buf += s.recv(1 << 20)
s.close()
PY

ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
echo "uptime: $(uptime)"
printf '%-6s %12s %10s %14s %9s %9s %8s\n' depth "beats/s" "server%" "beats/cpu-s" p50 p99 non2xx
for depth in "${depths[@]}"; do
    t0=$(ticks)
    out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" --latency -s scripts/wrk/registry.lua \
        "http://127.0.0.1:$port" -- beat "$depth" "$n" "${HEADERS:-}" 2>&1)
    t1=$(ticks)
    echo "$out" | awk -v d="$depth" -v ticks="$((t1 - t0))" -v hz="$hz" -v s="$secs" '
        /Requests\/sec/ {rate=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2}
        / requests in / {n=$1} / Non-2xx or 3xx responses/ {bad=$NF}
        END {cpu = ticks / hz; printf "%-6s %12.0f %9.0f%% %14.0f %9s %9s %8s\n",
            d, rate, 100 * cpu / s, (cpu > 0 ? n / cpu : 0), p50, p99, (bad==""?0:bad)}'
done
