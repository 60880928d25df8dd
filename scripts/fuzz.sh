#!/usr/bin/env bash
# Bounded coverage-guided fuzzing of the wire parsers (registry-proto):
# each target runs for SECONDS (default 15) on the stable toolchain with
# cargo-fuzz (installed if missing). A crash fails the script and leaves
# the input under fuzz/artifacts/.
#
#   scripts/fuzz.sh [--build-only] [SECONDS]
#
# --build-only compiles every target and stops (scripts/test.sh builds them
# beside the tests and fuzzes after).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [[ "${1:-}" == "--build-only" ]]; then
    build_only=1
    shift
fi
secs="${1:-15}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked --quiet
fi
mkdir -p target
# All targets in one build first: one cargo run compiles them side by side on
# every core, where each `cargo fuzz run` below alone would compile its own
# binary one after the other. The runs then find them built.
(cd fuzz && cargo fuzz build --sanitizer none) >target/fuzz-build.log 2>&1 || {
    tail -n 40 target/fuzz-build.log >&2
    echo "fuzz targets do not build: see target/fuzz-build.log" >&2
    exit 1
}
((build_only == 0)) || exit 0
for target in http_request beat_json udp_ack udp_push distro_message distro_clients grpc_payload grpc_frame raft_message open_api dns_query; do
    mkdir -p "fuzz/corpus/$target"
    log="target/fuzz-$target.log"
    echo "fuzzing $target for ${secs}s"
    if ! (cd fuzz && cargo fuzz run --sanitizer none "$target" "corpus/$target" "seeds/$target" \
            -- -max_total_time="$secs" -print_final_stats=1) >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "fuzz target $target failed: see $log and fuzz/artifacts/$target/" >&2
        exit 1
    fi
    grep -E "^Done" "$log" || true
done
