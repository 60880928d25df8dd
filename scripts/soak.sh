#!/usr/bin/env bash
# Soak: loadgen's smoke profile against the release `registry` binary, run
# after run for MINUTES, while the registry's RSS is sampled every 10 s from
# /proc/PID/status. Prints the samples, the RSS at the end of each run and
# the last/first ratios. Exits non-zero if a loadgen run failed or the RSS
# at the end of the last run exceeds that at the end of the second by more
# than 15%: the first two runs warm the allocator's arenas, the list cache
# and the connection buffers; after that, runs must not grow it.
#
# The registry keeps persistent state in a temporary --data-dir, pinned to
# core 0 with one worker; loadgen runs on core 1 (as scripts/loadtest.sh).
#
#   scripts/soak.sh [MINUTES]        (default 5; each run is about 70 s)
set -euo pipefail
cd "$(dirname "$0")/.."
minutes="${1:-5}"
cargo build --release -q -p registry-server --bin registry -p loadgen --bin loadgen
ulimit -n "$(ulimit -Hn)" || true

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

REGISTRY_LOG=warn taskset -c 0 target/release/registry --listen 127.0.0.1:0 --workers 1 \
    --data-dir "$work/data" >"$work/registry.out" 2>"$work/registry.err" &
registry=$!
pids+=("$registry")
addr=""
for _ in $(seq 300); do
    addr="$(sed -n 's|^registry listening on http://\([^ ]*\) .*|\1|p' "$work/registry.out")"
    [ -n "$addr" ] && break
    sleep 0.1
done
[ -n "$addr" ] || { echo "registry did not start:"; cat "$work/registry.err"; exit 1; }
echo "registry pid $registry on $addr; soaking for $minutes min"

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$registry/status"; }
start=$(date +%s)
(
    while kill -0 "$registry" 2>/dev/null; do
        echo "$(( $(date +%s) - start )) $(rss)"
        sleep 10
    done
) >"$work/rss" &
pids+=("$!")

end=$(( start + minutes * 60 ))
run=0
failed=0
: >"$work/run-ends"
while [ "$(date +%s)" -lt "$end" ]; do
    run=$(( run + 1 ))
    set +e
    taskset -c 1 target/release/loadgen run --profile smoke --target "http://$addr" \
        --duration 60s --workers 1 --quiet --registry-pid "$registry" \
        --out "$work/loadgen-$run" >"$work/loadgen-$run.log" 2>&1
    code=$?
    set -e
    echo "run $run: loadgen exit $code, registry RSS $(rss) KiB at its end"
    echo "$(rss)" >>"$work/run-ends"
    if [ "$code" -ne 0 ]; then
        failed=1
        tail -20 "$work/loadgen-$run.log"
    fi
done

echo
echo "RSS samples (seconds KiB):"
cat "$work/rss"
first=$(head -1 "$work/rss" | cut -d' ' -f2)
last=$(tail -1 "$work/rss" | cut -d' ' -f2)
awk -v f="$first" -v l="$last" 'BEGIN { printf "first %d KiB, last %d KiB, last/first %.2f (first is before any load)\n", f, l, l / f }'
echo "RSS at the end of each run (KiB): $(tr '\n' ' ' <"$work/run-ends")"
base_run=$(( run >= 3 ? 2 : 1 ))
base_end=$(sed -n "${base_run}p" "$work/run-ends")
last_end=$(tail -1 "$work/run-ends")
verdict=$(awk -v f="$base_end" -v l="$last_end" 'BEGIN { r = l / f; printf "%.2f %s", r, (r <= 1.15 ? "flat" : "GROWING") }')
echo "end of run $base_run: $base_end KiB, end of run $run: $last_end KiB, ratio ${verdict}"
[ "$failed" -eq 0 ] || { echo "a loadgen run failed"; exit 1; }
case "$verdict" in *GROWING) exit 1 ;; esac
