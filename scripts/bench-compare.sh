#!/usr/bin/env bash
# Compares two commits on this machine, in one job, and prints one Markdown verdict:
#
#   scripts/bench-compare.sh BASE HEAD        # e.g. main HEAD, HEAD~1 HEAD
#   scripts/bench-compare.sh BASE .           # "." is this working tree, uncommitted changes included
#
# 1. checks out both commits as worktrees under $TMPDIR and builds both (criterion
#    benches, loadgen where the commit has it) into target/gates, shared with
#    scripts/gates.sh so dependencies are compiled once; "." builds in place;
# 2. instruction-count gates (scripts/gates.sh): deterministic, BLOCKING;
# 3. criterion benches, base and head alternately (ABAB): base runs with
#    --save-baseline, head with --baseline; ADVICE only;
# 4. the loadgen smoke profile, base and head alternately (ABABAB), then
#    `report compare` over all runs (Welch's t-test across repetitions); ADVICE.
#
# Exit codes: 0 no gate regression, 1 a gate regressed, 2 the gates or the
# builds failed. A failing criterion or loadgen run is reported, not fatal.
# Wall-clock results on a shared 2-core machine are noisy: they are printed for
# a reader to weigh, never to fail on (see reports/README.md, "Comparing commits").
#
# Knobs (environment):
#   BENCH_FILTER   criterion filter, a regex on benchmark ids (default: the 1k
#                  fleet and the fan-out, ~40 s per side; "." runs everything)
#   BENCH_ROUNDS   criterion ABAB rounds (default 2; a change counts only when
#                  every round agrees)
#   BENCH_NOISE_PCT  criterion changes whose interval reaches within this are
#                  noise (default 5)
#   LOADGEN_RUNS   smoke runs per side (default 3, ~25 s each)
#   LOADGEN_PROFILE  loadgen profile (default smoke)
#   BENCH_SKIP_GATES=1  leave the gates out (CI runs scripts/gates.sh itself)
# Total on a busy 2-core machine with a warm target/gates: ~15 min without
# loadgen, ~20 min with it (builds 6-10, gates 2-3, criterion 4, loadgen 3);
# a cold target/gates adds ~7 min. Give CI timeouts room accordingly.
set -Eeuo pipefail
trap 'printf "bench-compare: failed at line %s\n" "$LINENO" >&2; exit 2' ERR
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

if (($# != 2)); then
    sed -n '2,6p' "$0" >&2
    exit 2
fi
filter="${BENCH_FILTER:-/1000\$|fanout}"
rounds="${BENCH_ROUNDS:-2}"
noise_pct="${BENCH_NOISE_PCT:-5}"
lg_runs="${LOADGEN_RUNS:-3}"
lg_profile="${LOADGEN_PROFILE:-smoke}"
target="$ROOT/target/gates"
say() { printf '\n==> %s\n' "$*" >&2; }

# One run at a time per target folder (gates.sh explains why); gates.sh,
# called below, runs under this lock.
mkdir -p "$target"
exec 9>"$target/.lock"
flock -n 9 || { echo "bench-compare: waiting for another gates or bench-compare run" >&2; flock 9; }
export GATES_LOCKED=1

resolve() {
    git -C "$ROOT" rev-parse --verify --quiet "$1^{commit}" ||
        { echo "bench-compare: no commit $1" >&2; exit 2; }
}
base_sha="$(resolve "$1")"
if [[ "$2" == "." ]]; then
    head_sha="$(git -C "$ROOT" rev-parse HEAD)-dirty"
else
    head_sha="$(resolve "$2")"
fi
base_label="$1 (${base_sha:0:10})"
head_label="$2 (${head_sha:0:10}${head_sha#"${head_sha%-dirty}"})"
out="$ROOT/target/bench-compare/${base_sha:0:10}-${head_sha:0:10}"
rm -rf "$out"
mkdir -p "$out"
scratch="$(mktemp -d -t bench-compare.XXXXXX)"
# shellcheck disable=SC2317 # run by the EXIT trap
remove_worktrees() {
    local tree
    for tree in "$scratch/base" "$scratch/head"; do
        [[ ! -d $tree ]] || git -C "$ROOT" worktree remove --force "$tree" 2>/dev/null || true
    done
    rm -rf "$scratch"
}
trap remove_worktrees EXIT

# Scratch trees drop workspace members their commit does not contain (commits
# from before loadgen was committed list it anyway); same rule as gates.sh.
drop_missing_members() {
    local dir="$1" member
    for member in $(sed -n '/^members = \[/,/^\]/p' "$dir/Cargo.toml" | grep -o '"[^"]*"' | tr -d '"'); do
        if [[ ! -f "$dir/$member/Cargo.toml" ]]; then
            echo "$(basename "$dir"): workspace member $member is not in this commit; dropped" >&2
            sed -i -e "/^ *\"${member//\//\\/}\",\$/d" -e "/^[a-z0-9_-]* = { path = \"${member//\//\\/}\" }\$/d" "$dir/Cargo.toml"
        fi
    done
}

git -C "$ROOT" worktree add --detach --quiet "$scratch/base" "$base_sha"
drop_missing_members "$scratch/base"
if [[ "$2" == "." ]]; then
    head_dir="$ROOT"
else
    git -C "$ROOT" worktree add --detach --quiet "$scratch/head" "$head_sha"
    drop_missing_members "$scratch/head"
    head_dir="$scratch/head"
fi
declare -A dir=([base]="$scratch/base" [head]="$head_dir")

# ---- 1. build both -----------------------------------------------------------
# One target folder for both sides (dependencies compile once). Cargo names a
# workspace crate's artifacts the same in every checkout and judges freshness by
# mtimes, so each side first cleans the workspace's own crates, and every
# executable is copied out right after its build (gates.sh does the same).
clean_workspace_crates() {
    local tree="$1"
    local -a pkgs
    mapfile -t pkgs < <(cd "$tree" && cargo metadata --no-deps --format-version 1 |
        python3 -c 'import json, sys; [print("-p", p["name"], sep="\n") for p in json.load(sys.stdin)["packages"]]')
    (cd "$tree" && CARGO_TARGET_DIR="$target" cargo clean --release --quiet "${pkgs[@]}")
}

declare -A has_loadgen=()
for side in base head; do
    say "building $side: criterion benches$([[ -f ${dir[$side]}/loadgen/Cargo.toml ]] && echo ", loadgen")"
    mkdir -p "$out/bin/$side"
    log="$out/build-$side.log"
    clean_workspace_crates "${dir[$side]}" >"$log" 2>&1 || { tail -n 30 "$log" >&2; exit 2; }
    (cd "${dir[$side]}" && CARGO_TARGET_DIR="$target" cargo bench -p benches --bench '*' --no-run \
        --message-format=json-render-diagnostics) 2>>"$log" >"$out/build-$side.json" ||
        { tail -n 30 "$log" >&2; exit 2; }
    # The bench executables cargo reports, copied out under their target names.
    python3 - "$out/build-$side.json" "$out/bin/$side" <<'PY'
import json, shutil, sys, os
for line in open(sys.argv[1]):
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["kind"] == ["bench"] and msg.get("executable"):
        shutil.copy2(msg["executable"], os.path.join(sys.argv[2], "bench-" + msg["target"]["name"]))
PY
    has_loadgen[$side]=0
    if [[ -f "${dir[$side]}/loadgen/Cargo.toml" ]]; then
        if (cd "${dir[$side]}" && CARGO_TARGET_DIR="$target" cargo build --release -p loadgen --bin loadgen) \
            >>"$log" 2>&1; then
            cp "$target/release/loadgen" "$out/bin/$side/loadgen"
            has_loadgen[$side]=1
        else
            echo "loadgen does not build at $side (see $log)" >&2
        fi
    fi
done

# ---- 2. instruction-count gates (blocking) -----------------------------------
say "instruction-count gates"
# `|| status=$?` (not set +e): the ERR trap would fire on the verdict otherwise.
gates_status=0
if [[ "${BENCH_SKIP_GATES:-0}" == 1 ]]; then
    echo "_skipped (BENCH_SKIP_GATES=1): scripts/gates.sh runs them on its own._" >"$out/gates.md"
    gates_status=3
else
    GATES_TARGET_DIR="$target" "$ROOT/scripts/gates.sh" --base-dir "${dir[base]}" \
        --head-dir "${dir[head]}" --out "$out/gates" "$base_sha" >"$out/gates.md" 2>"$out/gates.log" ||
        gates_status=$?
    cat "$out/gates.log" >&2
fi

# ---- 3. criterion, ABAB (advice) ---------------------------------------------
# CRITERION_HOME keeps both sides' baselines in one place, outside either tree.
# The executables run from the benches folder, as `cargo bench` runs them.
export CRITERION_HOME="$out/criterion"
mkdir -p "$CRITERION_HOME"
crit_args=(--bench --warm-up-time 1 --measurement-time 2 --noplot)
criterion() { # SIDE ROUND BASELINE-ARGS...
    local side="$1" round="$2" exe
    shift 2
    for exe in "$out/bin/$side"/bench-*; do
        (cd "${dir[$side]}/benches" && "$exe" "${crit_args[@]}" "$@" "$filter") ||
            { echo "$exe failed" >&2; return 1; }
    done >"$out/criterion-$side-$round.log" 2>&1
}
# A failing bench is reported in its section; only the gates set the exit code.
crit_failed=""
for ((r = 1; r <= rounds; r++)); do
    say "criterion round $r/$rounds: base (--save-baseline base)"
    criterion base "$r" --save-baseline base || { crit_failed="$out/criterion-base-$r.log"; break; }
    say "criterion round $r/$rounds: head (--baseline base)"
    criterion head "$r" --baseline-lenient base || { crit_failed="$out/criterion-head-$r.log"; break; }
    # Each head run rewrites change/estimates.json; keep this round's.
    mkdir -p "$out/criterion-changes/$r"
    (cd "$CRITERION_HOME" && find . -path '*/change/estimates.json' -exec cp --parents {} "$out/criterion-changes/$r/" \;)
done

# One table: per benchmark, the mean change and its 95 % interval in each
# round; "slower"/"faster" only when, in every round, the whole interval lies
# beyond the noise threshold on the same side (A/A runs on this machine move
# by 10-40 %, with intervals that exclude zero).
criterion_md="$(python3 - "$out/criterion-changes" "$rounds" "$noise_pct" <<'PY'
import json, os, sys
root, rounds, noise = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
runs = {}
for r in range(1, rounds + 1):
    base = os.path.join(root, str(r))
    for dirpath, _, files in os.walk(base):
        if dirpath.endswith("/change") and "estimates.json" in files:
            bench = os.path.relpath(os.path.dirname(dirpath), base)
            with open(os.path.join(dirpath, "estimates.json")) as f:
                mean = json.load(f)["mean"]
            ci = mean["confidence_interval"]
            runs.setdefault(bench, {})[r] = (mean["point_estimate"] * 100,
                                             ci["lower_bound"] * 100, ci["upper_bound"] * 100)
if not runs:
    print("_no criterion comparisons (no benchmark matched, or none has a base)_")
    sys.exit()
head = "| benchmark | " + " | ".join(f"round {r}" for r in range(1, rounds + 1)) + " | verdict |"
print(head)
print("| --- |" + " ---: |" * rounds + " --- |")
for bench in sorted(runs):
    cells, signs = [], set()
    for r in range(1, rounds + 1):
        if r not in runs[bench]:
            cells.append("-")
            signs.add(None)
            continue
        pt, lo, hi = runs[bench][r]
        cells.append(f"{pt:+.1f}% [{lo:+.1f}, {hi:+.1f}]")
        if lo > noise:
            signs.add("slower")
        elif hi < -noise:
            signs.add("faster")
        else:
            signs.add(None)
    verdict = signs.pop() if len(signs) == 1 and None not in signs else None
    label = {"slower": "**slower**", "faster": "faster", None: "no clear change"}[verdict]
    print(f"| {bench} | " + " | ".join(cells) + f" | {label} |")
PY
)"
if [[ -n "$crit_failed" ]]; then
    tail -n 20 "$crit_failed" >&2
    criterion_md="_a criterion run failed (see $crit_failed); rounds before it:_

$criterion_md"
fi

# ---- 4. loadgen smoke, ABABAB, and report compare (advice) -------------------
loadgen_md=""
if ((has_loadgen[base] && has_loadgen[head])); then
    # loadgen's own exit code (thresholds, verification) is advice here; the
    # report it writes is what gets compared.
    for ((i = 1; i <= lg_runs; i++)); do
        for side in base head; do
            say "loadgen $lg_profile run $i/$lg_runs: $side"
            run_dir="$out/loadgen/$side-$i"
            mkdir -p "$run_dir"
            sha_var="${side}_sha"
            (cd "${dir[$side]}" && "$out/bin/$side/loadgen" run --profile "$lg_profile" --quiet \
                --commit "${!sha_var}" --out "$run_dir") >"$run_dir.log" 2>&1 ||
                echo "loadgen $side run $i exited $? (see $run_dir.log)" >&2
        done
    done
    report_bin="${CARGO_TARGET_DIR:-$ROOT/target}/debug/report"
    (cd "$ROOT" && cargo build --workspace --profile test --bin report) >"$out/build-report.log" 2>&1
    mapfile -t base_runs < <(ls "$out"/loadgen/base-*/*.json 2>/dev/null)
    mapfile -t head_runs < <(ls "$out"/loadgen/head-*/*.json 2>/dev/null)
    if ((${#base_runs[@]} && ${#head_runs[@]})); then
        compare_args=("${base_runs[0]}" "${head_runs[0]}")
        ((${#base_runs[@]} > 1)) && compare_args+=(--repeat-base "${base_runs[@]:1}")
        ((${#head_runs[@]} > 1)) && compare_args+=(--repeat-head "${head_runs[@]:1}")
        lg_status=0
        loadgen_md="$("$report_bin" compare "${compare_args[@]}" 2>&1)" || lg_status=$?
        case $lg_status in
            0) loadgen_md+=$'\n\n_no regression beyond the policy (advice)._' ;;
            1) loadgen_md+=$'\n\n_`report compare` flags the rows above (advice: wall-clock on a shared machine; rerun before acting)._' ;;
            *) loadgen_md="_report compare could not compare the runs:_ $loadgen_md" ;;
        esac
    else
        loadgen_md="_skipped: loadgen wrote no report (see $out/loadgen/*.log)._"
    fi
else
    missing=()
    ((has_loadgen[base])) || missing+=("base")
    ((has_loadgen[head])) || missing+=("head")
    loadgen_md="_skipped: loadgen is not in (or does not build at) $(IFS=/; echo "${missing[*]}")._"
fi

# ---- the verdict --------------------------------------------------------------
case $gates_status in
    0) gates_word="pass" ;;
    1) gates_word="**FAIL: instruction-count regression**" ;;
    3) gates_word="gates skipped"; gates_status=0 ;;
    *) gates_word="**ERROR: the gates could not run** (see $out/gates.log)" ;;
esac
cat <<EOF

# bench-compare: $base_label -> $head_label

**Verdict: $gates_word.** Only the instruction-count gates block; the wall-clock sections are advice.

## 1. Instruction-count gates (blocking)

$(cat "$out/gates.md")

## 2. Criterion (advice)

Mean change of head against base per round (95 % interval), ${rounds} round(s) ABAB,
\`--warm-up-time 1 --measurement-time 2\`, filter \`$filter\`. "slower"/"faster" needs
every round's whole interval beyond ±${noise_pct} %.

$criterion_md

## 3. Loadgen \`$lg_profile\` (advice)

$loadgen_md

_Artifacts: ${out}_
EOF
exit $((gates_status > 1 ? 2 : gates_status))
