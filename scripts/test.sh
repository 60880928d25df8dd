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

step() { printf '\n==> %s (at %ds)\n' "$*" "$SECONDS"; }

step "test dependencies"
scripts/deps/clients.sh
scripts/deps/chromium.sh
scripts/deps/selenium.sh

step "rustfmt"
cargo fmt --all -- --check

step "clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "tests"
cargo test --workspace

step "benches (each run once as a smoke test)"
cargo test --workspace --benches

step "fuzzing (bounded)"
scripts/fuzz.sh "${FUZZ_SECONDS:-15}"

step "instruction-count gates against the previous commit (blocking)"
scripts/gates.sh HEAD~1
