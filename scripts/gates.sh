#!/usr/bin/env bash
# Deterministic microbenchmark gates: instructions per operation (callgrind Ir)
# of the registry's hot paths, for BASE and for this working tree, compared by
# `report gates` against reports/gates/policy.toml (2 % by default).
#
#   scripts/gates.sh [--record] [--head-dir DIR] [--base-dir DIR] [--out DIR] [BASE_REF]
#   scripts/gates.sh --pin
#
#   BASE_REF      commit to compare against (default HEAD~1)
#   --record      also copy head's counts to reports/history/gates-<date>-<sha>.json
#   --head-dir    tree measured as head (default: this working tree)
#   --base-dir    an existing checkout of BASE_REF (default: a worktree under /tmp)
#   --out         where the JSON files and callgrind outputs go (default target/gates/out)
#   --pin         measure this (committed, clean) tree only and write its counts
#                 to benches/gates-baseline.json, the pinned baseline; commit
#                 that file, saying why the counts moved
#
# Head is judged twice, and fails on either: against BASE_REF (a regression
# in one commit), and against the pinned baseline benches/gates-baseline.json
# (growth just under the threshold per commit adds up there: past it, the gate
# fails until someone re-pins deliberately). The pinned file must have been
# measured with head's hotpaths program and toolchain; if not, re-pin. When
# base could not run head's program (it predates an API the program uses) and
# ran its own, the sides measure different code, so that comparison is shown
# but advisory and the pinned one decides.
#
# Then the gate tests itself: it measures http-register and grpc-register again
# with REGISTRY_SLOW_HANDLER_FOR_GATE_TEST set (registry/server/src/gate_test.rs:
# extra work inside the real handlers) and fails (exit 2) unless `report gates`
# calls both a regression, so a gate that stopped measuring the real handlers
# cannot pass unseen.
#
# Exit codes: 0 no regression; 1 a hot path grew beyond its threshold (against
# BASE_REF or the pinned baseline) or is measured on one side only; 2 the gate
# itself could not run (build, valgrind, no or stale pinned baseline, a failed
# self-test, or no baseline: BASE_REF missing even after `git fetch --deepen`,
# or it does not build). GATES_ALLOW_NO_BASE=1 turns "no baseline" into a
# comparison with the pinned baseline only (a local run on a commit that
# predates the benches crate); CI never sets it.
#
# Why instruction counts: on a shared 2-core machine wall-clock results move by
# tens of percent, the instruction count of one binary on one input by a few
# instructions. Each hot path runs N and 2N times in `hotpaths` (a fixed
# fixture, benches/src/bin/hotpaths.rs); (Ir(2N) - Ir(N)) / N cancels set-up.
#
# Both sides run the same `hotpaths` program, head's (or this checkout's when
# head has none), copied into base's scratch worktree: a change to a fixture or
# loop must not read as a change in the code under test, and commits from
# before the program existed can still be measured. If that program does not
# build against base (an API it uses changed), base's own copy is used when it
# has one; if neither builds, there is no baseline and the gate fails (exit 2).
#
# A base whose sources of what hotpaths compiles equal head's (a commit of
# tests, scripts, docs, loadgen or fuzz targets only) is not built or
# measured: the same code gives the same counts, and base's are head's.
#
# Cost: both sides build into target/gates, which keeps dependencies between
# runs. hotpaths calls the server's handlers, so it needs registry-server's
# graph (~175 crates when cold; a base that runs its own older program without
# the server builds with --no-default-features, ~55), cold ~330 s on 2 cores
# (jemalloc's C build and registry-server's one codegen unit the longest
# steps); then each side rebuilds the workspace's crates, ~130 s, mostly
# registry-server (see clean_workspace_crates and the `gates` profile below).
# The measurement runs the two sides in parallel, ~40 s, the self-test ~15 s.
set -Eeuo pipefail
# Any unexpected failure exits 2, so that 1 always means "a hot path regressed".
trap 'printf "gates: failed at line %s\n" "$LINENO" >&2; exit 2' ERR
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

record=0
pin=0
head_dir="$ROOT"
base_dir=""
out=""
base_ref="HEAD~1"
while (($#)); do
    case "$1" in
        --record) record=1 ;;
        --pin) pin=1 ;;
        --head-dir) head_dir="$(cd "$2" && pwd)"; shift ;;
        --base-dir) base_dir="$(cd "$2" && pwd)"; shift ;;
        --out) out="$2"; shift ;;
        -h | --help) sed -n '2,46p' "$0"; exit 0 ;;
        -*) echo "gates: unknown option $1" >&2; exit 2 ;;
        *) base_ref="$1" ;;
    esac
    shift
done

target="${GATES_TARGET_DIR:-$ROOT/target/gates}"
out="${out:-$target/out}"
harness_rel="benches/src/bin/hotpaths.rs"
pinned="$ROOT/benches/gates-baseline.json"
slow_var="REGISTRY_SLOW_HANDLER_FOR_GATE_TEST"
say() { printf 'gates: %s\n' "$*" >&2; }

command -v valgrind >/dev/null || { say "valgrind not found (apt-get install valgrind)"; exit 2; }

# One run at a time per target folder: a build of one run between another's
# clean and build would hand that run the wrong code (see clean_workspace_crates).
# bench-compare.sh takes the same lock and sets GATES_LOCKED for this script.
mkdir -p "$target"
if [[ -z "${GATES_LOCKED:-}" ]]; then
    exec 9>"$target/.lock"
    flock -n 9 || { say "waiting for another gates or bench-compare run"; flock 9; }
fi

# No baseline is a failure unless asked otherwise: a gate that passes when it
# measured nothing (a shallow clone, a base that no longer builds) hides every
# regression behind it.
have_base=1
no_baseline() {
    echo "no baseline for gates at $base_ref: $*"
    if [[ "${GATES_ALLOW_NO_BASE:-0}" == 1 ]]; then
        echo "(GATES_ALLOW_NO_BASE=1: judged against the pinned baseline only)"
        have_base=0
        return 0
    fi
    echo "the gate cannot judge this change; fix the base or set GATES_ALLOW_NO_BASE=1 deliberately"
    exit 2
}
base_sha=""
if ((pin)); then
    have_base=0
elif ! base_sha="$(git -C "$ROOT" rev-parse --verify --quiet "${base_ref}^{commit}")"; then
    # A shallow clone (CI's default) lacks the parent: fetch enough history.
    if [[ "$(git -C "$ROOT" rev-parse --is-shallow-repository)" == true ]]; then
        say "$base_ref is not in this shallow clone; git fetch --deepen=50"
        git -C "$ROOT" fetch --quiet --deepen=50 >&2 || say "git fetch --deepen failed"
    fi
    base_sha="$(git -C "$ROOT" rev-parse --verify --quiet "${base_ref}^{commit}")" ||
        no_baseline "no such commit in this clone"
fi
# "-dirty" marks a head with changes beyond the files this script and cargo
# touch in scratch trees (workspace manifest, lock file, harness).
head_commit="$(git -C "$head_dir" rev-parse HEAD)"
if [[ "$head_dir" == "$ROOT" ]]; then
    changes="$(git -C "$ROOT" status --porcelain)"
else
    changes="$(git -C "$head_dir" status --porcelain -- . ':(exclude)Cargo.toml' ':(exclude)Cargo.lock' ":(exclude)$harness_rel")"
fi
[[ -z "$changes" ]] || head_commit+="-dirty"
if ((record || pin)) && [[ "$head_commit" == *-dirty ]]; then
    say "--record and --pin keep reference results: commit first, or pass --head-dir of a clean checkout"
    exit 2
fi
# Only this script's own files are cleared: --out may name a folder with others.
mkdir -p "$out/cg"
rm -f "$out"/cg/*.out "$out"/cg/*.log "$out"/{base,head,plain,slowed}.json "$out"/hotpaths-*

# A scratch worktree of BASE unless the caller gave one; removed on exit.
cleanup=()
# shellcheck disable=SC2317 # run by the EXIT trap
remove_worktrees() {
    local tree
    for tree in "${cleanup[@]}"; do
        git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || rm -rf "$tree"
    done
}
trap remove_worktrees EXIT
if ((have_base)) && [[ -z "$base_dir" ]]; then
    base_dir="$(mktemp -d /tmp/gates-base.XXXXXX)"
    cleanup+=("$base_dir")
    git -C "$ROOT" worktree add --detach --quiet "$base_dir" "$base_sha"
fi

# Commits made before loadgen was committed list it as a workspace member
# without its folder, and cargo refuses such a workspace. Scratch trees drop
# members whose folder is missing (never the caller's own working tree).
drop_missing_members() {
    local dir="$1" member
    [[ "$dir" == "$ROOT" ]] && return 0
    for member in $(sed -n '/^members = \[/,/^\]/p' "$dir/Cargo.toml" | grep -o '"[^"]*"' | tr -d '"'); do
        if [[ ! -f "$dir/$member/Cargo.toml" ]]; then
            say "$(basename "$dir"): workspace member $member is not in this commit; dropped"
            sed -i -e "/^ *\"${member//\//\\/}\",\$/d" -e "/^[a-z0-9_-]* = { path = \"${member//\//\\/}\" }\$/d" "$dir/Cargo.toml"
        fi
    done
}

# The program both sides run: head's own, or this checkout's when head's
# commit has none (a scratch tree of an older commit).
harness="$head_dir/$harness_rel"
if [[ "$head_dir" != "$ROOT" ]] && ! git -C "$head_dir" cat-file -e "HEAD:$harness_rel" 2>/dev/null; then
    harness="$ROOT/$harness_rel"
fi
[[ -f "$harness" ]] || { say "no $harness_rel in $head_dir or $ROOT"; exit 2; }
cp "$harness" "$out/hotpaths.rs"

# The profile both sides build with, `gates`: release's code generation for
# the workspace's crates (opt-level 3, one codegen unit, so a change in one
# function does not move its neighbours between units, and their counts with
# them) without release's fat LTO, a whole-program pass over the server's
# ~175 crates that was a long single-threaded step of each side's build (CI
# builds both, cold); dependencies, the same on both sides, build in parallel
# units. Given here rather than in Cargo.toml so that a base from before it
# builds with exactly head's settings. Counts measured with it differ from a
# release binary's: head, base and the pinned baseline all use it.
profile=(--profile gates
    --config 'profile.gates.inherits="release"'
    --config 'profile.gates.lto=false'
    --config 'profile.gates.debug=false'
    --config 'profile.gates.package."*".codegen-units=16')

# Both sides build into one target folder so dependencies compile once. But
# cargo gives a workspace crate the same artifact name in every checkout and
# judges freshness by mtimes, so a tree checked out before the other side's
# build would silently reuse the other side's code. Each build therefore first
# cleans the workspace's own crates (dependencies stay), and the binary is
# copied out at once.
clean_workspace_crates() {
    local dir="$1"
    local -a pkgs
    mapfile -t pkgs < <(cd "$dir" && cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; [print("-p", p["name"], sep="\n") for p in json.load(sys.stdin)["packages"]]')
    (cd "$dir" && CARGO_TARGET_DIR="$target" cargo clean "${profile[@]}" --quiet "${pkgs[@]}")
}

# The wire-to-core mapping hotpaths measures (encode_list, ip) is the crate
# registry-convert, and benches builds without the server with
# --no-default-features: a cold gate compiles the core, the wire formats and
# their few dependencies in release, not the server's graph (tonic, openraft,
# redb). Commits from before that split kept the mapping in the server
# (registry/server/src/convert.rs), where a harness using registry_convert
# cannot reach it. In a scratch tree of such a commit, that same file is made
# the registry-convert crate, with this checkout's manifests for it and for
# benches: the tree's own code, built as lean as head's, runs the same
# program. The files are put back after the build (a caller's tree, such as
# bench-compare's, builds its benches afterwards).
adopted=""
adopt_convert_crate() {
    local dir="$1"
    [[ "$dir" != "$ROOT" && ! -f "$dir/registry/convert/Cargo.toml" ]] || return 1
    [[ -f "$dir/registry/server/src/convert.rs" && -f "$dir/benches/Cargo.toml" ]] || return 1
    grep -q 'registry_convert' "$dir/$harness_rel" || return 1
    adopted="$out/adopted"
    rm -rf "$adopted" && mkdir -p "$adopted"
    cp "$dir/Cargo.toml" "$adopted/workspace.toml"
    cp "$dir/benches/Cargo.toml" "$adopted/benches.toml"
    [[ ! -f "$dir/Cargo.lock" ]] || cp "$dir/Cargo.lock" "$adopted/"
    mkdir -p "$dir/registry/convert/src"
    cp "$dir/registry/server/src/convert.rs" "$dir/registry/convert/src/lib.rs"
    cp "$ROOT/registry/convert/Cargo.toml" "$dir/registry/convert/Cargo.toml"
    cp "$ROOT/benches/Cargo.toml" "$dir/benches/Cargo.toml"
    sed -i -e 's|^    "registry/proto",$|&\n    "registry/convert",|' \
        -e 's|^registry-proto = { path = "registry/proto" }$|&\nregistry-convert = { path = "registry/convert" }|' \
        "$dir/Cargo.toml"
    say "$(basename "$dir"): predates registry-convert; its registry/server/src/convert.rs built as that crate"
}
restore_adopted() {
    local dir="$1"
    [[ -n "$adopted" ]] || return 0
    cp "$adopted/workspace.toml" "$dir/Cargo.toml"
    cp "$adopted/benches.toml" "$dir/benches/Cargo.toml"
    [[ ! -f "$adopted/Cargo.lock" ]] || cp "$adopted/Cargo.lock" "$dir/Cargo.lock"
    rm -rf "$dir/registry/convert" "$adopted"
    adopted=""
}

# build DIR SIDE: builds hotpaths in DIR and copies it to $out/hotpaths-SIDE.
# Without a lint wrapper scripts/test.sh may have set: the gate measures
# code, and a lint in an older base must not cost it its baseline.
build() {
    local dir="$1" side="$2" built=0
    # A program calling the server (registry_server::bench) needs the
    # benches crate's default features; an older one only the core's.
    local -a features=()
    grep -q 'registry_server::' "$dir/$harness_rel" || features=(--no-default-features)
    adopt_convert_crate "$dir" || true
    {
        clean_workspace_crates "$dir" &&
            (cd "$dir" && CARGO_TARGET_DIR="$target" env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS \
                cargo build "${profile[@]}" -p benches --bin hotpaths "${features[@]}")
    } >"$out/build-$side.log" 2>&1 && built=1
    restore_adopted "$dir"
    ((built)) || return 1
    cp "$target/gates/hotpaths" "$out/hotpaths-$side"
}

drop_missing_members "$head_dir"
((have_base == 0)) || drop_missing_members "$base_dir"
if [[ "$harness" != "$head_dir/$harness_rel" ]]; then
    mkdir -p "$(dirname "$head_dir/$harness_rel")"
    cp "$out/hotpaths.rs" "$head_dir/$harness_rel"
fi
# Built before the base so a broken head fails the gate rather than passing it.
say "building hotpaths for head ($head_dir)"
if ! build "$head_dir" head; then
    tail -n 30 "$out/build-head.log" >&2
    say "head does not build"
    exit 2
fi

# build_base: builds base's hotpaths (head's program, else base's own), or
# finds there is no baseline.
base_harness="$out/hotpaths.rs"
build_base() {
    if [[ ! -f "$base_dir/benches/Cargo.toml" ]]; then
        no_baseline "${base_sha:0:10} has no benches crate"
        return 0
    fi
    local base_own="$out/hotpaths-base-own.rs"
    git -C "$base_dir" show "HEAD:$harness_rel" >"$base_own" 2>/dev/null || rm -f "$base_own"
    mkdir -p "$(dirname "$base_dir/$harness_rel")"
    cp "$out/hotpaths.rs" "$base_dir/$harness_rel"
    say "building hotpaths for base $base_ref (${base_sha:0:10})"
    build "$base_dir" base && return 0
    if [[ -f "$base_own" ]] && ! cmp -s "$base_own" "$out/hotpaths.rs"; then
        say "head's hotpaths does not build at base; using base's own"
        cp "$base_own" "$base_dir/$harness_rel"
        base_harness="$base_own"
        build "$base_dir" base && return 0
    fi
    tail -n 30 "$out/build-base.log" >&2
    no_baseline "hotpaths does not build at ${base_sha:0:10} (build log: $out/build-base.log)"
}
# A base whose sources of everything hotpaths compiles are head's own (the
# commit changed only tests, scripts, docs, loadgen, fuzz targets) builds the
# same program from the same code: its counts are head's, and the second
# build and measurement (minutes of a cold CI run) would only repeat them.
# Only for a clean head at its commit, where "head's sources" is a commit.
same_sources=0
build_inputs=(registry benches Cargo.toml Cargo.lock rust-toolchain rust-toolchain.toml .cargo
    ':(exclude)registry/*/tests' ':(exclude)*.md' ':(exclude)benches/gates-baseline.json')
if ((have_base)) && [[ "$head_commit" != *-dirty ]] &&
    git -C "$head_dir" diff --quiet "$base_sha" "$head_commit" -- "${build_inputs[@]}" 2>/dev/null; then
    same_sources=1
    say "base ${base_sha:0:10} compiles the same sources as head for hotpaths: its counts are head's"
elif ((have_base)); then
    build_base
fi

# The report tool of this checkout (head's may predate `report gates`), built
# the way scripts/test.sh builds it (test profile, and its lint wrapper when it
# passes one), so that after scripts/test.sh in CI this is a no-op instead of
# minutes of compiling its JSON Schema dependencies.
# REPORT_BIN names one already built: scripts/test.sh runs this script beside
# `cargo test`, which holds the target folder's lock until the last test ends.
report="${REPORT_BIN:-}"
# scripts/test.sh starts this script beside its own build, which makes
# REPORT_BIN: wait for it (bounded; that build failing ends the whole run).
if [[ -n "$report" && ! -x "$report" ]]; then
    say "waiting for $report (built by the caller)"
    for _ in $(seq 1 1800); do
        [[ -x "$report" ]] && break
        sleep 1
    done
    [[ -x "$report" ]] || { say "$report did not appear within 30 min"; exit 2; }
fi
if [[ -z "$report" ]]; then
    say "building report"
    (cd "$ROOT" && cargo build --workspace --profile test --bin report) \
        >"$out/build-report.log" 2>&1 || { tail -n 30 "$out/build-report.log" >&2; exit 2; }
    report="${CARGO_TARGET_DIR:-$ROOT/target}/debug/report"
fi

# Address-space randomisation off where the kernel lets us: jemalloc orders
# and merges its extents by address, so with it on the same binary's count of
# a large set-up (register-200k fills 200,000 instances) moves by ~4 M
# instructions from run to run, ±9k per operation at its N, enough to fail the
# gate at random. With it off, runs agree to a few instructions per operation.
no_aslr=()
if setarch "$(uname -m)" -R true 2>/dev/null; then
    no_aslr=(setarch "$(uname -m)" -R)
else
    say "setarch -R is not permitted here: counts of large set-ups may vary"
fi

# ir BIN OP N SIDE: callgrind's total instruction count of `BIN OP N`.
ir() {
    local file="$out/cg/$4-$2-$3.out"
    "${no_aslr[@]}" valgrind --tool=callgrind --callgrind-out-file="$file" "$1" "$2" "$3" \
        >/dev/null 2>"$file.log" || { say "valgrind failed: $1 $2 $3 (see $file.log)"; return 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

# measure SIDE COMMIT DIR HARNESS [OP...]: writes $out/SIDE.json with every
# operation, or the OPs named, of $out/hotpaths-SIDE (head's for the self-test).
measure() {
    local side="$1" commit="$2" dir="$3" harness_file="$4"
    shift 4
    local bin="$out/hotpaths-$side" ops="" op n ir_n ir_2n per_op
    [[ -x "$bin" ]] || bin="$out/hotpaths-head"
    while read -r op n; do
        if (($#)) && [[ " $* " != *" $op "* ]]; then
            continue
        fi
        ir_n="$(ir "$bin" "$op" "$n" "$side")"
        ir_2n="$(ir "$bin" "$op" "$((2 * n))" "$side")"
        per_op="$(awk -v a="$ir_n" -v b="$ir_2n" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')"
        ops+="${ops:+,}
    {\"name\": \"$op\", \"iterations\": $n, \"ir_n\": $ir_n, \"ir_2n\": $ir_2n, \"ir_per_op\": $per_op}"
    done < <("$bin" --list)
    cat >"$out/$side.json" <<EOF
{
  "schema_version": 1,
  "kind": "instruction-counts",
  "commit": "$commit",
  "recorded_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "rustc": "$(cd "$dir" && rustc --version)",
  "valgrind": "$(valgrind --version)",
  "harness": "$(git hash-object "$harness_file")",
  "ops": [$ops
  ]
}
EOF
}

say "measuring under callgrind (both sides in parallel)"
measure head "$head_commit" "$head_dir" "$out/hotpaths.rs" &
head_job=$!
base_job=""
if ((have_base && !same_sources)); then
    measure base "$base_sha" "$base_dir" "$base_harness" &
    base_job=$!
fi
status=0
wait "$head_job" || status=2
if [[ -n "$base_job" ]]; then
    wait "$base_job" || status=2
fi
((status == 0)) || exit 2
if ((same_sources)); then
    sed "s/\"commit\": \"$head_commit\"/\"commit\": \"$base_sha\"/" "$out/head.json" >"$out/base.json"
fi

if ((pin)); then
    cp "$out/head.json" "$pinned"
    say "pinned $pinned at ${head_commit:0:10}: commit it, saying why the counts moved"
    exit 0
fi
if ((record)); then
    day="$(git -C "$head_dir" log -1 --format=%cd --date=format:%Y%m%d)"
    dest="$ROOT/reports/history/gates-$day-${head_commit:0:10}.json"
    mkdir -p "$(dirname "$dest")"
    cp "$out/head.json" "$dest"
    say "recorded $dest"
fi

# `|| rc=$?`: exit 1 (a regression) is an answer here, not a failure.
policy="$ROOT/reports/gates/policy.toml"
verdict=0
if ((have_base)); then
    base_verdict=0
    "$report" gates "$out/base.json" "$out/head.json" --policy "$policy" || base_verdict=$?
    ((base_verdict != 2)) || exit 2
    if ((base_verdict == 1)) && [[ "$base_harness" != "$out/hotpaths.rs" ]]; then
        echo
        echo "(advisory: base ran its own, older hotpaths program, so the two sides measure"
        echo " different code; the pinned baseline below decides)"
    elif ((base_verdict == 1)); then
        verdict=1
    fi
    echo
fi

# The self-test: the real handlers, slowed, must fail the gate.
selftest_ops=(http-register grpc-register)
say "self-test: ${selftest_ops[*]} with $slow_var set must fail the gate"
measure plain "$head_commit" "$head_dir" "$out/hotpaths.rs" "${selftest_ops[@]}" &
plain_job=$!
(
    export "$slow_var=${GATES_SELF_TEST_ROUNDS:-1000}"
    measure slowed "$head_commit-slowed" "$head_dir" "$out/hotpaths.rs" "${selftest_ops[@]}"
) &
slowed_job=$!
wait "$plain_job" || exit 2
wait "$slowed_job" || exit 2
selftest_rc=0
"$report" gates "$out/plain.json" "$out/slowed.json" --policy "$policy" >"$out/self-test.md" ||
    selftest_rc=$?
for op in "${selftest_ops[@]}"; do
    if ((selftest_rc != 1)) || ! grep -q "^| $op .*REGRESSION" "$out/self-test.md"; then
        cat "$out/self-test.md" >&2
        say "self-test FAILED: $op with its real handler slowed did not fail the gate"
        exit 2
    fi
done
say "self-test passed: the slowed handlers failed the gate ($out/self-test.md)"

# The pinned baseline: measured with this very program and toolchain, or
# stale (exit 2 until re-pinned).
if [[ ! -f "$pinned" ]]; then
    say "no pinned baseline $pinned: run scripts/gates.sh --pin on a clean tree and commit the file"
    exit 2
fi
echo "Against the pinned baseline (benches/gates-baseline.json):"
echo
pinned_verdict=0
"$report" gates "$pinned" "$out/head.json" --policy "$policy" --same-harness || pinned_verdict=$?
if ((pinned_verdict == 2)); then
    say "the pinned baseline cannot be compared: if hotpaths.rs or the toolchain changed, re-pin (scripts/gates.sh --pin) and commit it"
    exit 2
fi
((pinned_verdict == 0)) || verdict=1

if ((verdict == 1)); then
    echo
    echo "Inspect a regressed path with: callgrind_annotate $out/cg/head-OP-N.out (and base-OP-N.out)"
fi
exit "$verdict"
