#!/usr/bin/env bash
# The 2.x fleet against a real cluster (issue 21, item 6): starts an N-node
# registry cluster on loopback (default 3), runs `loadgen --protocol grpc
# --target a,b,c` with its clients spread over the members, optionally kills one
# member with SIGKILL in the middle of the steady phase (its clients reconnect to
# a survivor and redo there), and exits with loadgen's exit code: 0 only when
# every member still answering holds what loadgen registered and every
# subscription converged (loadgen checks each member after the steady phase and
# after the drain).
#
#   scripts/loadgen-cluster.sh [N]
#
# KILL_AFTER=S kills node 1 S seconds after loadgen starts (default: none);
# PROFILE (default grpc-smoke); BASE_PORT (default 18880, gRPC on +1000: below
# the kernel's ephemeral range, which an outgoing connection may take first);
# REGISTRY_BIN and LOADGEN_BIN (default target/release/{registry,loadgen}: build
# them first, one at a time); OUT (default target/loadgen-cluster): node logs
# and loadgen's report. Extra loadgen arguments: LOADGEN_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-3}"
base="${BASE_PORT:-18880}"
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
LOADGEN_BIN=${LOADGEN_BIN:-target/release/loadgen}
OUT=${OUT:-target/loadgen-cluster}
mkdir -p "$OUT"
members="" targets=""
for i in $(seq 0 $((n - 1))); do
    members="${members:+$members,}127.0.0.1:$((base + i))"
    targets="${targets:+$targets,}http://127.0.0.1:$((base + i))"
done
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap stop EXIT INT TERM
for i in $(seq 0 $((n - 1))); do
    "$REGISTRY_BIN" --listen "127.0.0.1:$((base + i))" --members "$members" \
        >"$OUT/node$i.out" 2>"$OUT/node$i.log" &
    pids+=("$!")
done
for i in $(seq 0 $((n - 1))); do
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$((base + i))/nacos/v1/console/health/readiness" >/dev/null && break
        sleep 0.1
    done
done
echo "cluster of $n: $members (logs in $OUT)"
if [ -n "${KILL_AFTER:-}" ]; then
    (sleep "$KILL_AFTER" && kill -9 "${pids[1]}" && echo "killed node 1 (pid ${pids[1]})") &
fi
set +e
# shellcheck disable=SC2086
"$LOADGEN_BIN" run --profile "${PROFILE:-grpc-smoke}" --protocol grpc --target "$targets" \
    --out "$OUT" ${LOADGEN_ARGS:-}
rc=$?
set -e
echo "loadgen exit code $rc"
exit "$rc"
