#!/usr/bin/env bash
# Cache misses of one beat in a fleet far past the caches (issue 14): runs
# `beat-fleet` (benches/src/bin/beat-fleet.rs) under callgrind's cache
# simulator, once beating the store and once `--dry` (the loop alone), and
# prints per beat: instructions (Ir), L1 data misses (D1mr + D1mw) and
# last-level data misses (DLmr + DLmw), the loop's own cost subtracted.
#
#   scripts/beat-misses.sh [BEAT_FLEET_BINARY] [-- beat-fleet flags]
#
# The fleet is built uninstrumented (`--instr-atstart=no`, a few times
# faster), then `callgrind_control -i on` turns the simulation on before the
# warm-up beats; only the function `measured` is counted. The simulated
# caches are fixed (32 KiB 8-way L1, 32 MiB 16-way LL, 64-byte lines, the
# shape of this VM's EPYC), and the run is under `setarch -R`, so the counts
# do not depend on the host or on address randomisation.
#
# Cost: ~1.5 minutes and ~2.5 GB of memory per run at the default 2M
# instances (two runs). Not a CI gate.
set -Eeuo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
bin="$ROOT/target/release/beat-fleet"
if (($#)) && [[ "$1" != "--" ]]; then bin="$1"; shift; fi
[[ "${1:-}" == "--" ]] && shift
out="$(mktemp -d -t beat-misses.XXXXXX)"
# BEAT_MISSES_KEEP=DIR keeps the callgrind outputs there (callgrind_annotate).
trap 'if [[ -n "${BEAT_MISSES_KEEP:-}" ]]; then mkdir -p "$BEAT_MISSES_KEEP"; cp "$out"/*.cg "$BEAT_MISSES_KEEP"/; fi; rm -rf "$out"' EXIT
caches=(--I1=32768,8,64 --D1=32768,8,64 --LL=33554432,16,64)

# run NAME [flags]: one instrumented run; prints its event totals.
run() {
    local name="$1"; shift
    mkfifo "$out/$name.in"
    setarch -R valgrind --tool=callgrind --cache-sim=yes "${caches[@]}" \
        --instr-atstart=no --toggle-collect='*measured*' \
        --callgrind-out-file="$out/$name.cg" \
        "$bin" --wait "$@" <"$out/$name.in" >"$out/$name.json" 2>"$out/$name.log" &
    local pid=$!
    exec 3>"$out/$name.in"
    until grep -q 'beat-fleet: ready' "$out/$name.log"; do
        kill -0 "$pid" 2>/dev/null || { cat "$out/$name.log" >&2; exit 2; }
        sleep 1
    done
    callgrind_control -i on "$pid" >/dev/null 2>&1
    echo go >&3
    exec 3>&-
    wait "$pid"
    local events totals
    events="$(grep '^events:' "$out/$name.cg" | cut -d' ' -f2-)"
    totals="$(grep '^totals:' "$out/$name.cg" | cut -d' ' -f2-)"
    printf '%s\n%s\n' "$events" "$totals" >"$out/$name.totals"
    cat "$out/$name.json" >&2
}

run store "$@"
run dry --dry "$@"
beats="$(sed -n 's/.*"beats":\([0-9]*\).*/\1/p' "$out/store.json")"
python3 - "$out/store.totals" "$out/dry.totals" "$beats" <<'PY'
import sys
def load(p):
    ev, tot = open(p).read().split("\n")[:2]
    return dict(zip(ev.split(), map(int, tot.split())))
s, d, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
per = lambda k: (s.get(k, 0) - d.get(k, 0)) / n
print(f"beats {n}")
print(f"Ir per beat        {per('Ir'):8.1f}")
print(f"D1 misses per beat {per('D1mr') + per('D1mw'):8.2f}  (reads {per('D1mr'):.2f}, writes {per('D1mw'):.2f})")
print(f"LL misses per beat {per('DLmr') + per('DLmw'):8.2f}  (reads {per('DLmr'):.2f}, writes {per('DLmw'):.2f})")
print(f"dry loop per beat: Ir {d['Ir']/n:.1f}, D1 {(d.get('D1mr',0)+d.get('D1mw',0))/n:.3f}, LL {(d.get('DLmr',0)+d.get('DLmw',0))/n:.3f}")
PY
