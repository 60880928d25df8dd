#!/usr/bin/env bash
# Normal-client latency under slowloris: the p99 of a paced beat/list mix
# against a quiet registry, then with SLOW connections dribbling request
# heads at 1 byte/s (reopened whenever the server closes them at its head
# deadline). Prints both p99s and their ratio (issue 13 asks for <= 2x).
#
# The registry runs on core 0 (one worker), the load on core 1; set
# REGISTRY_BIN to measure another build (e.g. main's) side by side.
#
# Usage: scripts/slowloris.sh [SLOW=2000] [SECONDS=10] [HEAD_TIMEOUT_MS=10000]
set -euo pipefail
cd "$(dirname "$0")/.."
slow="${1:-2000}"
secs="${2:-10}"
head_ms="${3:-10000}"
# SKIP_BUILD=1 measures the release binaries already built.
if [[ -z "${SKIP_BUILD:-}" ]]; then
    cargo build --release -q -p registry-server --bin registry -p benches --bin hardening
fi
bin="${REGISTRY_BIN:-target/release/registry}"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "machine: $(nproc) cores, $(uptime)"
echo "open files limit: $(ulimit -n)"

log="$(mktemp)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT
extra=()
"$bin" --help | grep -q -- --head-timeout-ms && extra=(--head-timeout-ms "$head_ms")
REGISTRY_LOG=warn taskset -c 0 "$bin" --listen 127.0.0.1:0 --workers 1 \
    --max-connections 20000 "${extra[@]}" >"$log" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
addr="$(sed -n 's/^registry listening on http:\/\/\([^ ]*\).*/\1/p' "$log")"
echo "registry $bin on $addr (core 0), load on core 1"
taskset -c 1 target/release/hardening slowloris --target "$addr" --slow "$slow" --seconds "$secs"
echo "registry RSS: $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status")"
