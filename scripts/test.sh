#!/usr/bin/env bash
# Every test of the project, as CI runs it (.ci/run calls this script).
# Installs what the tests need first: the real Nacos clients (Python and
# Node) under target/compat, Debian's Chromium and chromedriver for the
# HTML report test and the console's browser test, Selenium (the console
# test's WebDriver client) under target/compat, and cargo-fuzz for the
# bounded fuzzing run.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Each step prints its duration when it ends, and the run ends (pass or
# fail) with every step's time: CI's budget is 20 minutes cold on 2 cores,
# and this table says where it goes.
step_name=""
step_start=0
step_times=()
end_step() {
    [[ -n "$step_name" ]] || return 0
    local took=$((SECONDS - step_start))
    printf '==> %s: %ds\n' "$step_name" "$took"
    step_times+=("$(printf '%6ds  %s' "$took" "$step_name")")
    step_name=""
}
step() {
    end_step
    step_name="$*"
    step_start=$SECONDS
    printf '\n==> %s (at %ds)\n' "$*" "$SECONDS"
}
step_summary() {
    end_step
    printf '\n==> step times\n'
    printf '%s\n' "${step_times[@]}"
    printf '%6ds  total\n' "$SECONDS"
}
trap step_summary EXIT

# Work that waits on the network or is measured in instructions, not
# seconds, runs beside the CPU-bound steps instead of after them (together
# they were 340 s of the 1479 s cold run at 6a75e66). Each such job writes its
# own log under target/ci-logs; `finish NAME` waits for it and fails the run
# with its log's tail when it failed.
mkdir -p target/ci-logs
declare -A job_pid=()
background() {
    local name="$1"
    shift
    # Its own process group (setsid), so that a failing run stops it whole.
    setsid "$@" >"target/ci-logs/$name.log" 2>&1 &
    job_pid[$name]=$!
    printf '==> started in the background: %s (log target/ci-logs/%s.log)\n' "$name" "$name"
}
finish() {
    local name="$1" rc=0
    wait "${job_pid[$name]}" || rc=$?
    unset "job_pid[$name]"
    cat "target/ci-logs/$name.log"
    if ((rc != 0)); then
        printf '==> %s failed (exit %d)\n' "$name" "$rc" >&2
        exit "$rc"
    fi
}
stop_background() {
    local pid
    for pid in "${job_pid[@]}"; do
        kill -- "-$pid" 2>/dev/null || true
    done
}
trap 'stop_background; step_summary' EXIT

# Downloads and installs (pip, npm, apt) while the build compiles.
background "test dependencies" bash -c 'scripts/deps/clients.sh && scripts/deps/dns.sh && scripts/deps/chromium.sh && scripts/deps/selenium.sh && scripts/deps/mariadb.sh'

step "rustfmt"
cargo fmt --all -- --check

# STYLE: no non-test function over ~80 lines without a comment saying why.
step "function length (scripts/long_functions.py)"
python3 scripts/long_functions.py

# Clippy (-D warnings) runs inside the build of every target rather than as
# `cargo clippy`, a check-only pass whose dependency metadata no build can
# reuse: that pass compiled the whole dependency graph a second time (514 s
# of a 2008 s cold run on 2 cores). clippy-driver as the workspace's rustc
# wrapper is what `cargo clippy` itself runs, with the same lints and
# arguments; `cargo build --workspace --all-targets` lints the same targets
# `cargo clippy --workspace --all-targets` checks, and a lint fails the
# build. The steps after it run with the same wrapper and profile, so they
# reuse this build instead of compiling the workspace again.
clippy_driver="$(command -v clippy-driver || rustup which clippy-driver)"
linted=(env RUSTC_WORKSPACE_WRAPPER="$clippy_driver" CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__)


step "clippy -D warnings, building every target"
"${linted[@]}" cargo build --workspace --all-targets --profile test

step "test dependencies (installed during the build)"
finish "test dependencies"

# Beside the tests (many of them mostly wait: on elections, timeouts, child
# processes): the fuzz targets' build, and the instruction-count gates
# against the previous commit, whose counts do not depend on the CPU they get
# (callgrind counts instructions; its two builds, in target/gates, are most
# of its time). Gates run without the lint wrapper (it measures code, see
# gates.sh) and with this build's `report`, as `cargo test` holds the target
# lock. Started with the build instead, the gates took half the CPU from it
# (each background job is its own session, and the kernel's autogroups
# share CPU between sessions, so `nice` only orders a job's own processes):
# the cold run at bba8278 took 1889 s against 1633 s at 59088c4.
background "fuzz build" nice -n 19 scripts/fuzz.sh --build-only
background "gates" env REPORT_BIN="$PWD/target/debug/report" nice -n 19 scripts/gates.sh HEAD~1

# CI shows the tail of a run: a failed test run ends with each failure's
# panic line and the start of its message, not only the failing names (the
# chaos test's message, with its history and node logs, is thousands of
# lines, and its cause was cut from what CI showed).
failure_digest() {
    printf '\n==> why the tests failed (panic lines from %s)\n' "$1"
    grep -A8 -- "panicked at" "$1" | head -n 120 || true
}

step "tests"
tests_rc=0
"${linted[@]}" cargo test --workspace 2>&1 | tee target/ci-logs/tests.log || tests_rc=$?
if ((tests_rc != 0)); then
    failure_digest target/ci-logs/tests.log
    exit "$tests_rc"
fi

# The users' CI recipe (scripts/ci-compare.sh, examples/ci/github-actions.yml)
# on a small profile, base and head both this build's binaries (an A/A run, so it
# cannot rot; a loose policy, as one short run's tail on a shared machine is noise).
step "load comparison recipe (scripts/ci-compare.sh, A/A)"
BASE_BIN=target/debug HEAD_BIN=target/debug PROFILE=smoke \
    LOADGEN_ARGS="--instances 300 --services 30 --subscribers 20 --watched-services 5 --rate 1000 --duration 3s --query-rate 100 --churn-rate 10 --workers 1" \
    REPORT_ARGS="--policy scripts/ci-compare-aa.toml" scripts/ci-compare.sh HEAD HEAD

step "benches (each run once as a smoke test)"
"${linted[@]}" cargo test --workspace --benches

step "fuzzing (bounded; its build ran beside the tests)"
finish "fuzz build"
# 5 s a target keeps the cold run under 25 minutes with nine targets (the cold
# run at 48c4972 took 1615 s with 8 s); long runs are `scripts/fuzz.sh SECONDS`.
scripts/fuzz.sh "${FUZZ_SECONDS:-5}"

step "instruction-count gates against the previous commit (blocking; ran beside the tests)"
finish "gates"
