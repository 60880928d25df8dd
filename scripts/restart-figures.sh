#!/usr/bin/env bash
# Restarts under the 2.x fleet (issue 34): starts a 3-node registry cluster on
# loopback, writes the operator's restart script the profiles' faults run
# (RESTART_NODES: `rolling` stops each member with SIGTERM and starts it again,
# the next once it is ready; `full` kills all three with SIGKILL and starts them
# again), runs loadgen's profile against the members and prints its fault section.
#
#   scripts/restart-figures.sh [nacos-2x-restart|nacos-2x-full-restart] [LOADGEN ARGS...]
#
# BASE_PORT (default 28848, gRPC on +1000); REGISTRY_BIN and LOADGEN_BIN
# (default target/release/{registry,loadgen}: build them first, one at a time);
# OUT (default target/restart-figures): node logs, the restart script, the report;
# NODE_LOG (default warn) is the nodes' REGISTRY_LOG.
# Exits with loadgen's exit code (3: a threshold of the profile failed).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-nacos-2x-restart}"
shift || true
base="${BASE_PORT:-28848}"
REGISTRY_BIN=$(realpath "${REGISTRY_BIN:-target/release/registry}")
LOADGEN_BIN=$(realpath "${LOADGEN_BIN:-target/release/loadgen}")
OUT=$(realpath -m "${OUT:-target/restart-figures}")
mkdir -p "$OUT"
members="" targets=""
for i in 0 1 2; do
    members="${members:+$members,}127.0.0.1:$((base + i))"
    targets="${targets:+$targets,}http://127.0.0.1:$((base + i))"
done

# The operator's script: one function per action, each returning once every
# member it started answers readiness (bounded: 60 s per node).
cat >"$OUT/restart.sh" <<EOF
#!/usr/bin/env bash
set -u
start() {
    REGISTRY_LOG=${NODE_LOG:-warn} "$REGISTRY_BIN" --listen "127.0.0.1:\$((${base} + \$1))" --members "$members" \\
        >>"$OUT/node\$1.out" 2>>"$OUT/node\$1.log" &
    echo \$! >"$OUT/node\$1.pid"
}
ready() {
    for _ in \$(seq 1 600); do
        curl -sf "http://127.0.0.1:\$((${base} + \$1))/nacos/v1/console/health/readiness" >/dev/null && return 0
        sleep 0.1
    done
    echo "node \$1 not ready after 60 s" >&2; return 1
}
stop() {
    local pid; pid=\$(cat "$OUT/node\$1.pid")
    kill -"\$2" "\$pid" 2>/dev/null
    for _ in \$(seq 1 300); do kill -0 "\$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "\$pid" 2>/dev/null; return 0
}
case "\$1" in
start) for i in 0 1 2; do start \$i; done; for i in 0 1 2; do ready \$i || exit 1; done ;;
rolling) for i in 0 1 2; do stop \$i TERM; start \$i; ready \$i || exit 1; echo "\$(date +%T.%N) node \$i restarted" >&2; done ;;
full) for i in 0 1 2; do stop \$i KILL; done; for i in 0 1 2; do start \$i; done
      for i in 0 1 2; do ready \$i || exit 1; done; echo "\$(date +%T.%N) all restarted" >&2 ;;
down) for i in 0 1 2; do [ -f "$OUT/node\$i.pid" ] && stop \$i TERM; done ;;
*) echo "usage: \$0 start|rolling|full|down" >&2; exit 2 ;;
esac
EOF
chmod +x "$OUT/restart.sh"
trap '"$OUT/restart.sh" down' EXIT INT TERM
"$OUT/restart.sh" start
echo "cluster: $members (logs and restart.sh in $OUT)"
set +e
RESTART_NODES="$OUT/restart.sh" "$LOADGEN_BIN" run --profile "$profile" --target "$targets" \
    --out "$OUT" --quiet "$@"
rc=$?
set -e
report=$(ls -t "$OUT"/loadgen-"$profile"-*.json | head -1)
"$(dirname "$LOADGEN_BIN")/report" show "$report" 2>/dev/null | sed -n '/Faults/,/^$/p' ||
    echo "(report binary not found; the fault section is in $report)"
echo "loadgen exit code $rc; report $report"
exit "$rc"
