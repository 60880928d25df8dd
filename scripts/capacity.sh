#!/usr/bin/env bash
# `loadgen capacity` against the release `registry` binary, pinned as
# scripts/loadtest.sh pins a run: the registry on core 0, loadgen on core 1.
#
#   scripts/capacity.sh [PROFILE] [extra `loadgen capacity` flags...]
#   scripts/capacity.sh nacos-1x-report --duration 20s --max-steps 8
#
# SLOs default to `beat.p99<50ms` and `*.errors<=0` (override with SLOS="...;...").
# Writes capacity.json and capacity.html under target/capacity/.
# loadgen busy-polls as in scripts/loadtest.sh (BUSY_POLL=0 turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${1:-nacos-1x-report}
shift || true
PORT=${PORT:-18850}
REGISTRY_CPU=${REGISTRY_CPU:-0}
LOADGEN_CPU=${LOADGEN_CPU:-1}
BUSY_POLL=${BUSY_POLL:-1}
REGISTRY_WORKERS=${REGISTRY_WORKERS:-1}
LOADGEN=${LOADGEN:-target/release/loadgen}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
SLOS=${SLOS:-"beat.p99<50ms;*.errors<=0"}
OUT=${OUT:-target/capacity}

if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -p registry-server --bin registry -p loadgen --bin loadgen
fi
ulimit -n "$(ulimit -Hn)" || true

# Another server on the port (a previous run's registry still shutting down)
# would take this run's load and leave it measuring the wrong process.
if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
    echo "port ${PORT} is already in use (set PORT=...)" >&2
    exit 1
fi
taskset -c "$REGISTRY_CPU" "$REGISTRY_BIN" --listen "127.0.0.1:${PORT}" \
    --workers "$REGISTRY_WORKERS" >target/capacity-registry.log 2>&1 &
REGISTRY=$!
# Stopped and waited for, so that the next run finds the port free.
trap 'kill $REGISTRY 2>/dev/null && wait $REGISTRY 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    if ! kill -0 "$REGISTRY" 2>/dev/null; then
        echo "the registry did not start:" >&2
        cat target/capacity-registry.log >&2
        exit 1
    fi
    (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null && break
    sleep 0.1
done

# A spinning loadgen runs under the normal scheduler even when this script runs
# under chrt: the kernel throttles real-time tasks that use more than 95 % of a
# second (sched_rt_runtime_us), which would stall it for 50 ms every second.
SPIN=()
NORMAL=()
if [ "$BUSY_POLL" != 0 ]; then
    SPIN=(--busy-poll)
    NORMAL=(chrt -o 0)
fi
SLO_FLAGS=()
IFS=';' read -ra SLO_LIST <<<"$SLOS"
for slo in "${SLO_LIST[@]}"; do SLO_FLAGS+=(--slo "$slo"); done
"${NORMAL[@]}" taskset -c "$LOADGEN_CPU" "$LOADGEN" capacity --profile "$PROFILE" "${SLO_FLAGS[@]}" \
    --target "http://127.0.0.1:${PORT}" --registry-pid "$REGISTRY" --workers 1 \
    --pinning "registry=cpu${REGISTRY_CPU} loadgen=cpu${LOADGEN_CPU}" "${SPIN[@]}" --out "$OUT" "$@"
