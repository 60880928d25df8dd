#!/usr/bin/env bash
# Compare a load profile across two commits, for any CI: builds the base and the
# head (each in its own git worktree and target dir), runs the same profile
# against each one's registry with the same pinning, and writes
# `report compare` as Markdown (to stdout, to $OUT/compare.md and, on GitHub
# Actions, to the job summary). Exit code: 0 no regression, 1 a regression,
# 2 anything else (a build, a run or a verification failed).
#
#   scripts/ci-compare.sh BASE_REF [HEAD_REF]      # HEAD_REF defaults to HEAD
#   scripts/ci-compare.sh origin/main HEAD
#
# Environment:
#   PROFILE            loadgen profile (default smoke)
#   LOADGEN_ARGS       extra `loadgen run` flags, the same for both sides
#   REPORT_ARGS        extra `report compare` flags (e.g. --policy FILE,
#                      --allow-generator-limited, --allow-invalid)
#   REGISTRY_CPU, LOADGEN_CPU   cores to pin the registry and loadgen to (0, 1)
#   BASE_BIN, HEAD_BIN directories holding already built `registry`, `loadgen`
#                      and `report` binaries for a side: that side is not built
#                      (CI reuses the binaries it just tested)
#   OUT                where the reports go (default target/ci-compare)
#   PORT               the registry's HTTP port; gRPC is +1000, as 2.x clients
#                      assume (default 18860: below the kernel's ephemeral range,
#                      so no outgoing connection can take it before the bind; a
#                      random port from that range once failed a CI run). The
#                      script reads back the address the registry printed.
#
# For a project that ships its own Nacos-compatible server or client, replace
# `start_registry` with how your server starts; loadgen and report only need a
# URL. The GitHub Actions form is examples/ci/github-actions.yml.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
    sed -n '2,13p' "$0" >&2
    exit 2
fi
BASE_REF=$1
HEAD_REF=${2:-HEAD}
PROFILE=${PROFILE:-smoke}
REGISTRY_CPU=${REGISTRY_CPU:-0}
LOADGEN_CPU=${LOADGEN_CPU:-1}
OUT=${OUT:-target/ci-compare}
PORT=${PORT:-18860}
read -r -a loadgen_args <<<"${LOADGEN_ARGS:-}"
read -r -a report_args <<<"${REPORT_ARGS:-}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# One core each when the machine has two; no pinning on a single core. Arrays,
# not a function, so that `&` and $! are the registry process itself.
PIN_REGISTRY=()
PIN_LOADGEN=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    PIN_REGISTRY=(taskset -c "$REGISTRY_CPU")
    PIN_LOADGEN=(taskset -c "$LOADGEN_CPU")
fi

# Builds REF's binaries into $OUT/REF-NAME/bin unless DIR is given; prints the bin dir.
binaries() {
    local name=$1 ref=$2 given=$3
    if [ -n "$given" ]; then
        (cd "$given" && pwd)
        return
    fi
    local tree="$OUT/$name-tree"
    git worktree remove --force "$tree" 2>/dev/null || true
    git worktree add --detach "$tree" "$ref" >&2
    (cd "$tree" && CARGO_TARGET_DIR="$OUT/$name-target" cargo build --release \
        -p registry-server --bin registry -p loadgen --bin loadgen -p reports --bin report >&2)
    git worktree remove --force "$tree" >&2
    echo "$OUT/$name-target/release"
}

start_registry() {
    local bin=$1 log=$2
    "${PIN_REGISTRY[@]}" "$bin/registry" --listen "127.0.0.1:${PORT}" --workers 1 >"$log" 2>&1 &
    REGISTRY=$!
    # The registry prints "registry listening on http://ADDR" once it is
    # bound and its state is loaded; a port already taken ends it with the
    # bind's error, which is shown below.
    local addr=""
    for _ in $(seq 400); do
        if ! kill -0 "$REGISTRY" 2>/dev/null; then
            echo "the registry did not start (if its port ${PORT} or gRPC's is taken, set PORT=...):" >&2
            cat "$log" >&2
            return 2
        fi
        addr=$(sed -n 's|^registry listening on http://\([^ ]*\).*|\1|p' "$log" | head -n 1)
        [ -n "$addr" ] && break
        sleep 0.05
    done
    if [ -z "$addr" ]; then
        echo "the registry did not say where it listens (log: $log)" >&2
        return 2
    fi
    TARGET="http://${addr}"
}

stop_registry() {
    if [ -n "${REGISTRY:-}" ]; then
        kill "$REGISTRY" 2>/dev/null || true
        wait "$REGISTRY" 2>/dev/null || true
        REGISTRY=
    fi
}
trap stop_registry EXIT

# Runs the profile against SIDE's registry; the report is $OUT/SIDE/*.json.
run_side() {
    local side=$1 bin=$2 ref=$3
    rm -rf "${OUT:?}/$side"
    start_registry "$bin" "$OUT/$side-registry.log" || return 2
    local code=0
    "${PIN_LOADGEN[@]}" "$bin/loadgen" run --profile "$PROFILE" --quiet \
        --target "$TARGET" --registry-pid "$REGISTRY" \
        --pinning "registry=cpu${REGISTRY_CPU} loadgen=cpu${LOADGEN_CPU}" \
        --commit "$(git rev-parse --short "$ref")" --out "$OUT/$side" \
        "${loadgen_args[@]}" || code=$?
    stop_registry
    # 3 (thresholds) and 4 (generator fell behind) leave a report, and `report
    # compare` then refuses it, naming the run and why, unless REPORT_ARGS holds
    # --allow-invalid. A failed verification leaves nothing to compare.
    if [ "$code" -ne 0 ] && [ "$code" -ne 3 ] && [ "$code" -ne 4 ]; then
        echo "loadgen against $side ($ref) exited $code" >&2
        return 2
    fi
    ls "$OUT/$side"/*.json
}

base_bin=$(binaries base "$BASE_REF" "${BASE_BIN:-}") || exit 2
head_bin=$(binaries head "$HEAD_REF" "${HEAD_BIN:-}") || exit 2
base_json=$(run_side base "$base_bin" "$BASE_REF") || exit 2
head_json=$(run_side head "$head_bin" "$HEAD_REF") || exit 2

code=0
"$head_bin/report" compare "$base_json" "$head_json" --format markdown \
    "${report_args[@]}" >"$OUT/compare.md" || code=$?
cat "$OUT/compare.md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$OUT/compare.md" >>"$GITHUB_STEP_SUMMARY"
fi
exit "$code"
