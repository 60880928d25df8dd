#!/usr/bin/env bash
# User-space instructions per HTTP register of the whole server process,
# counted by callgrind while wrk drives one of scripts/wrk/register.lua's
# cases (issue 14, target 3). Deterministic enough to compare two builds,
# unlike wall-clock rates on a shared machine; the kernel's share (the
# loopback send and receive, most of a request) is not counted.
#
#   scripts/profile-register.sh [MODE] [SECONDS] [BIN] [OUT]
#       MODE     fresh | large | grow (default fresh)
#       SECONDS  of measured load (default 15); ~1-2k requests/s under callgrind
#       BIN      registry binary (default target/release/registry)
#       OUT      callgrind output prefix (default target/profile-register/MODE)
#
# Prints the requests answered, the instructions counted and their ratio,
# then the functions with the largest inclusive share. The counters are
# zeroed after `large`'s fill and a 3 s warm-up. Compare builds at similar
# request counts: a case's cost per request moves with the state it builds
# (services created, instances per service) and periodic tasks (the
# sweeper) are spread over the requests of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-fresh}"
secs="${2:-15}"
bin="${3:-target/release/registry}"
out="${4:-target/profile-register/$mode}"
command -v valgrind >/dev/null || { echo "valgrind not found" >&2; exit 2; }
command -v wrk >/dev/null || { echo "wrk not found" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
rm -f "$out".[0-9]* "$out.log"
lua="$PWD/scripts/wrk/register.lua"
port=18863
REGISTRY_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out.%p" "$bin" \
    --listen "127.0.0.1:$port" --workers 1 --max-connections 1000 --max-inflight 100000 \
    >/dev/null 2>"$out.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 300); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.2
done
if [ "$mode" = large ]; then
    # The same fill as scripts/bench-register.sh: 10,000 instances.
    eval "$(sed -n '/^fill_large() {/,/^}/p' scripts/bench-register.sh)"
    fill_large
fi
wrk -t1 -c32 -d3s -s "$lua" "http://127.0.0.1:$port" -- "$mode" 1 >/dev/null
callgrind_control -z "$pid" >/dev/null 2>&1
requests=$(wrk -t1 -c32 -d"${secs}s" -s "$lua" "http://127.0.0.1:$port" -- "$mode" 1 |
    awk '/requests in/ {print $1}')
callgrind_control -d "$pid" >/dev/null 2>&1
sleep 1
dump=$(ls -t "$out".*.1 | head -1)
ir=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$mode: $requests requests, $ir Ir, $((ir / requests)) Ir per request ($dump)"
callgrind_annotate --inclusive=yes "$dump" 2>/dev/null |
    grep -E '^ *[0-9,]+ \( *[0-9.]+%\)  .*(registry_|notifier|conn\.rs|papaya|httparse|tokio::time|cancellation)' |
    head -30 | cut -c1-180
