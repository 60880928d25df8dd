#!/usr/bin/env bash
# Overload: offered load far past capacity against the release `registry`
# binary, on loopback only. Two parts, SECONDS each (default 20):
#
# 1. Persistent writes (the durable path): the `overload` test of
#    registry/server/tests/durability.rs, scaled up, against the release
#    binary: CLIENTS (default 400) closed-loop clients registering
#    persistent instances with --max-pending-writes 16, --max-inflight 48,
#    --max-connections 96. It prints admitted vs shed (503), the admitted
#    p50/p99, RSS each second, then kills the registry with SIGKILL,
#    restarts it on the same data directory and fails if any acknowledged
#    write is missing.
# 2. Ephemeral traffic (register/beat/list mix): wrk with 2000 connections
#    against --max-connections 256, the registry pinned to core 0 with one
#    worker and wrk to core 1. Prints wrk's figures, the registry's refused
#    and shed counters, and its RSS each second.
#
#   scripts/overload.sh [SECONDS] [CLIENTS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
clients="${2:-400}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build --release -q -p registry-server --bin registry
ulimit -n "$(ulimit -Hn)" || true

echo "== 1. persistent writes: $clients clients for ${secs}s against 16 pending writes"
REGISTRY_BIN="$PWD/target/release/registry" OVERLOAD_SECS="$secs" OVERLOAD_CLIENTS="$clients" \
    cargo test -q -p registry-server --test server durability::overload -- --nocapture 2>&1 |
    grep -E '^overload|test result|panicked|assert'

echo
echo "== 2. ephemeral mix: wrk, 2000 connections for ${secs}s against --max-connections 256"
work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
REGISTRY_LOG=warn taskset -c 0 target/release/registry --listen 127.0.0.1:0 --workers 1 \
    --max-connections 256 >"$work/out" 2>"$work/err" &
registry=$!
pids+=("$registry")
addr=""
for _ in $(seq 300); do
    addr="$(sed -n 's|^registry listening on http://\([^ ]*\) .*|\1|p' "$work/out")"
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { echo "registry did not start:"; cat "$work/err"; exit 1; }
for i in $(seq 1 10); do
    curl -s -o /dev/null -XPOST "http://$addr/nacos/v1/ns/instance?serviceName=ovl-list&ip=10.9.0.$i&port=8080"
done
cat >"$work/mix.lua" <<'LUA'
-- One in four registers a new ephemeral instance, one in four beats it,
-- half list a 10-instance service.
local counter = 0
function init(args) counter = math.random(0, 1000) * 1000000 end
local function ip_of(i)
  return string.format("10.%d.%d.%d", math.floor(i / 65536) % 256, math.floor(i / 256) % 256, i % 256)
end
function request()
  counter = counter + 1
  local r, i = counter % 4, math.floor(counter / 4)
  if r == 0 then
    return wrk.format("POST", "/nacos/v1/ns/instance?serviceName=ovl-eph-" .. (i % 1000) .. "&ip=" .. ip_of(i) .. "&port=8080")
  elseif r == 1 then
    return wrk.format("PUT", "/nacos/v1/ns/instance/beat?serviceName=ovl-eph-" .. (i % 1000) .. "&ip=" .. ip_of(i) .. "&port=8080")
  end
  return wrk.format("GET", "/nacos/v1/ns/instance/list?serviceName=ovl-list")
end
LUA
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$registry/status"; }
echo "RSS before: $(rss) KiB"
(
    for _ in $(seq "$secs"); do
        sleep 1
        printf '%s ' "$(rss)"
    done
    echo
) >"$work/rss" &
sampler=$!
taskset -c 1 wrk -t1 -c2000 -d"${secs}s" --latency -s "$work/mix.lua" "http://$addr" 2>&1 |
    grep -E 'Latency|50%|90%|99%|requests in|Requests/sec|Non-2xx|Socket errors'
wait "$sampler"
echo "RSS each second (KiB): $(cat "$work/rss")"
curl -s "http://$addr/metrics" |
    grep -E '^registry_(http_connections_refused_total|http_requests_shed_total|instances|http_requests_total\{route="(instance_register|instance_beat|instance_list)",status="(200|503)"\})' || true
echo "RSS after: $(rss) KiB"
