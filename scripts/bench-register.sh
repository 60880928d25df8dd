#!/usr/bin/env bash
# Register throughput of this registry and of r-nacos, side by side, each
# server pinned to core 0 with one worker and wrk to core 1 (issue 14).
#
#   scripts/bench-register.sh [SECONDS] [RNACOS_BIN]   (default 10 s each;
#                                                       RNACOS_BIN also from the environment)
#
# Cases (scripts/wrk/register.lua), each with 32 plain keep-alive connections:
#   fresh  every register creates a service;
#   large  every register changes an instance of a 10,000-instance service;
#   grow   1,000 services growing by one instance per register.
# Prints requests/s per case and server, large/fresh and ours/r-nacos, and each
# server's CPU share with its requests per CPU-second (a share well under 100 %
# means wrk, not the server, set the rate).
# r-nacos is skipped when no binary is given or it is missing (install it with
# `cargo install rnacos --version 0.8.8 --locked --root DIR`, then pass
# DIR/bin/rnacos).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
rnacos="${2:-${RNACOS_BIN:-}}"
command -v wrk >/dev/null || { echo "wrk not found" >&2; exit 2; }
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
[ -x "$REGISTRY_BIN" ] || cargo build --release -q -p registry-server --bin registry
lua="$PWD/scripts/wrk/register.lua"
port=18803
scratch="$(mktemp -d)"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"; }
trap cleanup EXIT

start() { # ours|rnacos
    if [ "$1" = ours ]; then
        REGISTRY_LOG=warn taskset -c 0 "$REGISTRY_BIN" --listen "127.0.0.1:$port" --workers 1 \
            --max-connections 1000 --max-inflight 100000 >/dev/null 2>&1 &
    else
        (cd "$scratch" && RNACOS_HTTP_PORT=$port RNACOS_GRPC_PORT=$((port + 1000)) \
            RNACOS_HTTP_CONSOLE_PORT=0 RNACOS_HTTP_WORKERS=1 RUST_LOG=warn \
            RNACOS_CONFIG_DB_DIR="$scratch/db-$RANDOM" exec taskset -c 0 "$rnacos" >/dev/null 2>&1) &
    fi
    pid=$!
    for _ in $(seq 200); do
        curl -s -o /dev/null "http://127.0.0.1:$port/" && return 0
        sleep 0.1
    done
    echo "$1 did not start" >&2; exit 2
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }

# Fills bench-large with 10,000 instances over one pipelined connection.
fill_large() {
    python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
n, batch = 10000, 500
for start in range(0, n, batch):
    reqs = b"".join(
        b"POST /nacos/v1/ns/instance?serviceName=bench-large&ip=10.%d.%d.%d&port=8080 HTTP/1.1\r\nHost: x\r\n\r\n"
        % ((i >> 16) & 255, (i >> 8) & 255, i & 255) for i in range(start, min(n, start + batch)))
    s.sendall(reqs)
    want, got, buf = min(n, start + batch) - start, 0, b""
    while got < want:
        buf += s.recv(1 << 20)
        got = buf.count(b"HTTP/1.1 ")
PY
}

# The server's CPU ticks (user + system, all its threads).
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)

measure() { # mode -> "req/s server-cpu-share"
    local t0 t1 rps
    t0=$(ticks)
    rps=$(taskset -c 1 wrk -t1 -c32 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port" -- "$1" 1 2>&1 |
        awk '/Requests\/sec/ {print $2} / Non-2xx/ {print "non2xx " $NF > "/dev/stderr"}')
    t1=$(ticks)
    echo "$rps $(awk -v t="$((t1 - t0))" -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f", t / hz / s }')"
}

declare -A rate share
servers=(ours)
if [ -n "$rnacos" ] && [ -x "$rnacos" ]; then
    servers+=(rnacos)
else
    echo "# r-nacos skipped: pass its binary as the second argument or in RNACOS_BIN" >&2
fi
echo "# $(uptime)"
for server in "${servers[@]}"; do
    for mode in fresh large grow; do
        start "$server"
        [ "$mode" = large ] && fill_large
        read -r "rate[$server.$mode]" "share[$server.$mode]" < <(measure "$mode")
        stop
    done
done
printf '%-8s %12s %12s %12s %12s\n' server fresh large grow large/fresh
for server in "${servers[@]}"; do
    printf '%-8s %12.0f %12.0f %12.0f %12s\n' "$server" "${rate[$server.fresh]}" "${rate[$server.large]}" \
        "${rate[$server.grow]}" "$(awk -v a="${rate[$server.large]}" -v b="${rate[$server.fresh]}" 'BEGIN{printf "%.2f", a/b}')"
done
# A rate with the server under ~95 % of its core is the generator's, not the
# server's: requests per server CPU-second compare servers either way.
printf '\n%-8s %14s %14s %14s   (requests per server CPU-second; server CPU share)\n' server fresh large grow
for server in "${servers[@]}"; do
    printf '%-8s' "$server"
    for mode in fresh large grow; do
        printf ' %8.0f %4.0f%%' "$(awk -v r="${rate[$server.$mode]}" -v c="${share[$server.$mode]}" 'BEGIN{print (c > 0 ? r / c : 0)}')" \
            "$(awk -v c="${share[$server.$mode]}" 'BEGIN{print 100 * c}')"
    done
    echo
done
if [ -n "${rate[rnacos.fresh]:-}" ]; then
    for mode in fresh large grow; do
        printf 'ours/r-nacos %-6s %.2fx\n' "$mode" "$(awk -v a="${rate[ours.$mode]}" -v b="${rate[rnacos.$mode]}" 'BEGIN{print a/b}')"
    done
fi
