#!/usr/bin/env bash
# The DNS door's rate against the HTTP list's, for the same service, on one
# server core.
#
# The registry is pinned to core 0 with one worker thread (--workers 1) and
# the clients to core 1. One service of 10 instances (bench-list, as
# scripts/bench-http.sh's list case) is registered, then, in one run holding
# the bench lock ($BENCH_LOCK, default target/bench.lock): DNS A and SRV
# queries for bench-list.nacos. over UDP with EDNS (benches' dns-rate,
# WINDOW queries in flight from one thread), DNS A over one TCP connection
# with 16 queries pipelined (RFC 7766), and
# GET instance/list for the same service (wrk, 32 connections, plain and
# pipelined 16 deep, as bench-http). Prints each rate, the server's CPU share
# and its answers per second of server CPU, and each DNS figure as a ratio of
# the HTTP list's. On a shared machine the per-CPU-second ratio is the robust
# one: a neighbour's build takes core 0 from every case alike only within
# one measurement.
#
# Usage: scripts/bench-dns.sh [SECONDS]   (default 10 per measurement)
#   WINDOW=N           DNS queries in flight (default 32)
#   EDNS=N             the EDNS size the DNS queries offer (default 1232; 0: none)
#   REGISTRY_BIN=path  a registry binary to measure instead of this tree's
#   DNS_RATE_BIN=path  a dns-rate binary instead of this tree's release build
#   BENCH_LOCK=file    the lock every benchmark on this machine takes
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
window="${WINDOW:-32}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
target="${CARGO_TARGET_DIR:-target}"
registry_bin="${REGISTRY_BIN:-$target/release/registry}"
rate_bin="${DNS_RATE_BIN:-$target/release/dns-rate}"
if [ -z "${REGISTRY_BIN:-}" ] || [ -z "${DNS_RATE_BIN:-}" ]; then
    cargo build --release -q -p registry-server --bin registry -p benches --bin dns-rate
fi
lua="$PWD/scripts/wrk/registry.lua"
port_http=18822
port_dns=18823
pid=
cleanup() { [ -z "$pid" ] || kill "$pid" 2>/dev/null || true; }
trap cleanup EXIT

REGISTRY_LOG=warn taskset -c 0 "$registry_bin" --listen "127.0.0.1:$port_http" \
    --dns-listen "127.0.0.1:$port_dns" --workers 1 \
    --max-connections 1000 --max-inflight 100000 >/dev/null &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port_http/" && break; sleep 0.1; done
base="http://127.0.0.1:$port_http/nacos/v1/ns"
for i in $(seq 1 10); do
    curl -s -o /dev/null -XPOST "$base/instance?serviceName=bench-list&ip=10.9.0.$i&port=8080&metadata=version%3D1.0.0"
done
list_bytes=$(curl -s "$base/instance/list?serviceName=bench-list" | wc -c)

ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
# "rate cpu% per-cpu-s" from a rate, a count and the server's ticks.
figures() { # rate count ticks
    awk -v r="$1" -v n="$2" -v t="$3" -v hz="$hz" -v s="$secs" 'BEGIN {
        cpu = t / hz; printf "%.0f %.0f %.0f\n", r, 100 * cpu / s, (cpu > 0 ? n / cpu : 0) }'
}
dns() { # qtype [window [--tcp]] -> "rate cpu% per-cpu-s bytes"
    local t0 t1 out rate bytes
    t0=$(ticks)
    out=$(taskset -c 1 "$rate_bin" --dns "127.0.0.1:$port_dns" --service bench-list \
        --instances 0 --qtype "$1" --edns "${EDNS:-1232}" --seconds "$secs" \
        --window "${2:-$window}" ${3:-})
    t1=$(ticks)
    rate=$(echo "$out" | sed 's/.*"dns_queries_per_s":\([0-9.]*\).*/\1/')
    bytes=$(echo "$out" | sed 's/.*"answer_bytes":\([0-9]*\).*/\1/')
    echo "$(figures "$rate" "$(awk -v r="$rate" -v s="$secs" 'BEGIN { print r * s }')" \
        $((t1 - t0))) $bytes"
}
list() { # depth -> "rate cpu% per-cpu-s bytes"
    local t0 t1 out rate n
    t0=$(ticks)
    out=$(taskset -c 1 wrk -t1 -c32 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port_http" \
        -- list "$1" 2>&1)
    t1=$(ticks)
    rate=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
    n=$(echo "$out" | awk '/ requests in / { print $1 }')
    if echo "$out" | grep -q 'Non-2xx'; then echo "wrk: non-2xx answers" >&2; exit 1; fi
    echo "$(figures "$rate" "$n" $((t1 - t0))) $list_bytes"
}

lock="${BENCH_LOCK:-target/bench.lock}"
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock 9
echo "uptime: $(uptime)"
echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo +dirty)"
a=$(dns A)
srv=$(dns SRV)
tcp_a=$(dns A 16 --tcp)
plain=$(list 1)
piped=$(list 16)
flock -u 9

read -r plain_rate _ plain_cpu _ <<<"$plain"
read -r piped_rate _ piped_cpu _ <<<"$piped"
printf '%-26s %10s %8s %11s %7s %12s %12s\n' case "req/s" "server%" "req/cpu-s" bytes \
    "vs plain" "vs piped16"
row() { # name figures
    read -r rate cpu per_cpu bytes <<<"$2"
    printf '%-26s %10s %7s%% %11s %7s %12s %12s\n' "$1" "$rate" "$cpu" "$per_cpu" "$bytes" \
        "$(awk -v a="$per_cpu" -v b="$plain_cpu" 'BEGIN { printf "%.2fx", a / b }')" \
        "$(awk -v a="$per_cpu" -v b="$piped_cpu" 'BEGIN { printf "%.2fx", a / b }')"
}
row "DNS A (UDP, window $window)" "$a"
row "DNS SRV (UDP, window $window)" "$srv"
row "DNS A (TCP, piped16)" "$tcp_a"
row "GET instance/list plain" "$plain"
row "GET instance/list piped16" "$piped"
echo "ratios are of answers per server CPU-second; raw rates: DNS A $(echo "$a" | cut -d' ' -f1)/s" \
    "vs list $plain_rate/s plain, $piped_rate/s pipelined"
echo "dns metrics:"
curl -s "http://127.0.0.1:$port_http/metrics" | grep '^registry_dns_\(queries\|answers\|truncated\|cached\)' || true
