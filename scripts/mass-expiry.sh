#!/usr/bin/env bash
# Beat latency during a mass expiry: the p99 of paced beats against a quiet
# registry, then while INSTANCES unbeaten instances (services of 10) turn
# unhealthy and are deleted. The registry runs with short lease timeouts
# (2 s unhealthy, 4 s deleted) so the expiry falls inside the window.
#
# The registry runs on core 0 (one worker), the load on core 1; set
# REGISTRY_BIN to measure another build (e.g. main's) side by side.
#
# Usage: scripts/mass-expiry.sh [INSTANCES=100000] [SECONDS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
instances="${1:-100000}"
secs="${2:-10}"
# SKIP_BUILD=1 measures the release binaries already built.
if [[ -z "${SKIP_BUILD:-}" ]]; then
    cargo build --release -q -p registry-server --bin registry -p benches --bin hardening
fi
bin="${REGISTRY_BIN:-target/release/registry}"
echo "machine: $(nproc) cores, $(uptime)"

log="$(mktemp)"
pid=""
cleanup() { [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; rm -f "$log"; }
trap cleanup EXIT
REGISTRY_LOG=warn taskset -c 0 "$bin" --listen 127.0.0.1:0 --workers 1 \
    --beat-timeout-ms 2000 --delete-timeout-ms 4000 --max-inflight 100000 >"$log" &
pid=$!
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
addr="$(sed -n 's/^registry listening on http:\/\/\([^ ]*\).*/\1/p' "$log")"
echo "registry $bin on $addr (core 0), load on core 1"
taskset -c 1 target/release/hardening mass-expiry --target "$addr" --instances "$instances" --seconds "$secs"
