#!/usr/bin/env bash
# Generation efficiency of loadgen against wrk, on a 2-core machine.
#
# http-floor (a minimal HTTP/1.1 server answering every request with a fixed
# 64-byte body) runs pinned to core 0; wrk and then `loadgen bench-http` run
# pinned to core 1 against it, plain (one request per connection at a time) and
# pipelined (16 requests per write), alternating ROUNDS times. loadgen records
# every latency in mergeable HdrHistograms while wrk keeps only its own stats.
# Prints each rate and loadgen/wrk per mode (target: >= 90 %).
#
#   scripts/bench-loadgen.sh            # defaults below
#   DURATION=5s ROUNDS=1 scripts/bench-loadgen.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
DEPTH=${DEPTH:-16}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18848}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
URL="http://127.0.0.1:${PORT}"

if ! command -v wrk >/dev/null; then
    apt-get update -qq && apt-get install -y -qq wrk
fi
cargo build --release -p benches --bin http-floor -p loadgen --bin loadgen

taskset -c "$SERVER_CPU" target/release/http-floor --listen "127.0.0.1:${PORT}" --workers 1 &
FLOOR=$!
trap 'kill $FLOOR 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null && break
    sleep 0.1
done

LUA=$(mktemp --suffix=.lua)
cat >"$LUA" <<LUA
init = function(args)
   local r = {}
   for i = 1, ${DEPTH} do r[i] = wrk.format(nil, "/") end
   req = table.concat(r)
end
request = function() return req end
LUA

rate_of() { awk '/^Requests\/sec/ {print $2}'; }

run_wrk() { # depth
    if [ "$1" = 1 ]; then
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" "$URL/" | rate_of
    else
        taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNECTIONS" -d"$DURATION" -s "$LUA" "$URL/" | rate_of
    fi
}

run_loadgen() { # depth
    local out
    out=$(taskset -c "$CLIENT_CPU" target/release/loadgen bench-http --target "$URL" \
        --connections "$CONNECTIONS" --pipeline "$1" --duration "$DURATION" --workers 1)
    printf '%s\n' "$out" >&2
    printf '%s\n' "$out" | rate_of
}

for depth in 1 "$DEPTH"; do
    mode=$([ "$depth" = 1 ] && echo plain || echo "pipelined x${depth}")
    wrk_sum=0; lg_sum=0
    for round in $(seq "$ROUNDS"); do
        w=$(run_wrk "$depth"); l=$(run_loadgen "$depth")
        echo "round ${round} ${mode}: wrk ${w} req/s, loadgen ${l} req/s"
        wrk_sum=$(awk -v a="$wrk_sum" -v b="$w" 'BEGIN {print a + b}')
        lg_sum=$(awk -v a="$lg_sum" -v b="$l" 'BEGIN {print a + b}')
    done
    awk -v m="$mode" -v w="$wrk_sum" -v l="$lg_sum" -v n="$ROUNDS" 'BEGIN {
        printf "RESULT %-14s wrk %10.0f req/s  loadgen %10.0f req/s  loadgen/wrk %5.1f %%\n", m, w / n, l / n, 100 * l / w }'
done
rm -f "$LUA"
