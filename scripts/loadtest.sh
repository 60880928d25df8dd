#!/usr/bin/env bash
# A loadgen profile against the release `registry` binary on a 2-core machine:
# the registry pinned to core 0, loadgen to core 1 (with --registry-pid, so the
# report carries the registry's RSS and CPU seconds).
#
#   scripts/loadtest.sh [PROFILE] [extra `loadgen run` flags...]
#   scripts/loadtest.sh nacos-1x-report --duration 30s
#
# Exit code: loadgen's (0 ok, 3 thresholds, 4 generator fell behind, 5 verification).
#
# loadgen runs with --busy-poll (BUSY_POLL=0 turns it off): on one host the sender
# of a loopback segment pays the receiver's wake-up, so a generator that sleeps
# between responses costs the registry ~11 % of its core at 2.2M instances in
# cross-core wake-ups, which no remote client would charge it. loadgen's own CPU
# figures then read 100 %: measure loadgen's cost per request with BUSY_POLL=0.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${1:-nacos-1x-report}
shift || true
PORT=${PORT:-18849}
REGISTRY_CPU=${REGISTRY_CPU:-0}
LOADGEN_CPU=${LOADGEN_CPU:-1}
BUSY_POLL=${BUSY_POLL:-1}
REGISTRY_WORKERS=${REGISTRY_WORKERS:-1}
LOADGEN=${LOADGEN:-target/release/loadgen}     # another build of loadgen to use
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}

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
    --workers "$REGISTRY_WORKERS" >target/loadtest-registry.log 2>&1 &
REGISTRY=$!
# Stopped and waited for, so that the next run finds the port free.
trap 'kill $REGISTRY 2>/dev/null && wait $REGISTRY 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    if ! kill -0 "$REGISTRY" 2>/dev/null; then
        echo "the registry did not start:" >&2
        cat target/loadtest-registry.log >&2
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
set +e
TIMED=()
[ -x /usr/bin/time ] && TIMED=(/usr/bin/time -f "loadgen: %e s wall, %U s user, %S s system, %M KiB max RSS")
"${TIMED[@]}" "${NORMAL[@]}" taskset -c "$LOADGEN_CPU" "$LOADGEN" run --profile "$PROFILE" \
    --target "http://127.0.0.1:${PORT}" --registry-pid "$REGISTRY" --workers 1 \
    --pinning "registry=cpu${REGISTRY_CPU} loadgen=cpu${LOADGEN_CPU}" "${SPIN[@]}" "$@"
code=$?
set -e
echo "loadgen exit code ${code}; registry log: target/loadtest-registry.log"
exit "$code"
