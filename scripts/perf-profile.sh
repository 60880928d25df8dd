#!/usr/bin/env bash
# Where the server's CPU goes, by `perf record`, for the two issue 26 limits
# that were measured but not explained (docs/benchmarks.md):
#
#   push  target 4: a push to SUBSCRIBED subscribed 2.x connections. The
#         release registry on core 0 (one worker), `conn-fleet` on core 1
#         holding CONNECTIONS clients; perf attaches once every stream is set
#         up and subscribed and records SECONDS of the push rounds (one change
#         a second, each pushed to every subscriber).
#   list  target 5: 16-deep pipelined GET instance/list of a 10-instance
#         service (4.4 KB answers) from wrk on core 1 (scripts/wrk/registry.lua).
#   floor the same pipelined load against benches' `http-floor`, answering
#         FLOOR_BODY_BYTES of body (default 4299, the 10-instance list's
#         answer; 64 for the do-nothing floor), for comparison with `list`.
#
#   scripts/perf-profile.sh push|list|floor [SECONDS]
#
# Prints the server's CPU seconds in the window (and, for push, pushes
# received, so CPU per push), the split between kernel and user space, the
# inclusive share of the syscalls and of the main frames, the self-time
# groups of scripts/perf_groups.py's table and the top symbols. Call graphs are
# unwound with DWARF (the release profile keeps line tables, no frame
# pointers). Env: REGISTRY_BIN, FLEET_BIN, FLOOR_BIN (release binaries,
# default target/release/...), OUT (perf.data and reports, default
# target/perf-profile), FREQ (sampling Hz, default 499), CONNECTIONS (10000),
# SUBSCRIBED (10000), ROUNDS (30), HOLD (conn-fleet --hold-secs, 0: with
# SUBSCRIBED=0 HOLD=30 the window sees health checks alone), PORT (18950);
# PERF_STAT=1 counts syscalls and context switches (perf stat) instead. Not for CI: perf needs
# perf_event access and a quiet-enough machine; shares stay meaningful on a
# busy one, rates do not.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:?push|list|floor}"
secs="${2:-15}"
registry_bin="${REGISTRY_BIN:-target/release/registry}"
fleet_bin="${FLEET_BIN:-target/release/conn-fleet}"
floor_bin="${FLOOR_BIN:-target/release/http-floor}"
out="${OUT:-target/perf-profile}"
freq="${FREQ:-499}"
port="${PORT:-18950}"
mkdir -p "$out"
data="$out/$mode.data"
hz=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_http() { # port
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return; sleep 0.1; done
    echo "no server on port $1" >&2
    exit 1
}

# Records `secs` of the server `pid`; prints its CPU seconds in the window.
record() { # pid
    local t0 t1
    t0=$(ticks "$1")
    if [ -n "${PERF_STAT:-}" ]; then
        # Counts instead of samples: syscalls and context switches per
        # operation, at a fraction of the sampling's overhead.
        perf stat -e task-clock,context-switches,syscalls:sys_enter_writev,syscalls:sys_enter_write \
            -e syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read \
            -e syscalls:sys_enter_epoll_wait -p "$1" -- sleep "$secs" 2>&1 |
            grep -E '^ +[0-9]' | tee "$out/$mode.stat.txt"
    else
        perf record -F "$freq" --call-graph dwarf,16384 -p "$1" -o "$data" -- sleep "$secs" \
            >"$out/$mode.record.log" 2>&1
    fi
    t1=$(ticks "$1")
    awk -v t="$((t1 - t0))" -v hz="$hz" -v s="$secs" \
        'BEGIN { printf "server CPU in the window: %.2f s of %s s (%.0f %%)\n", t / hz, s, 100 * t / hz / s }'
}

echo "machine: $(nproc) cores; $(uptime)"
case "$mode" in
push)
    conns="${CONNECTIONS:-10000}"
    subs="${SUBSCRIBED:-10000}"
    ulimit -n "$((conns + 1000))"
    REGISTRY_LOG=warn taskset -c 0 "$registry_bin" --listen "127.0.0.1:$port" --workers 1 \
        --grpc-max-connections "$((conns + 100))" --grpc-max-sockets "$((conns + 1000))" \
        >"$out/push.registry.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait_http "$port"
    taskset -c 1 "$fleet_bin" --grpc "127.0.0.1:$((port + 1000))" --connections "$conns" \
        --subscribe "$subs" --rounds "${ROUNDS:-30}" --hold-secs "${HOLD:-0}" --server-pid "$pid" \
        --metrics "127.0.0.1:$port" >"$out/push.fleet.json" 2>"$out/push.fleet.log" &
    fleet=$!
    pids+=("$fleet")
    # Streams set up: the registry holds a socket per connection. Then the
    # fleet waits a health round (6 s) and subscribes; start in the rounds.
    until [ "$(ls "/proc/$pid/fd" | wc -l)" -ge "$conns" ]; do
        kill -0 "$fleet" 2>/dev/null || { cat "$out/push.fleet.log" >&2; exit 1; }
        sleep 0.5
    done
    sleep 10
    pushes0=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^registry_push_acked_total/ {s += $2} END {print s + 0}')
    f0=$(ticks "$fleet")
    record "$pid"
    f1=$(ticks "$fleet")
    awk -v t="$((f1 - f0))" -v hz="$hz" 'BEGIN { printf "conn-fleet CPU in the window: %.2f s\n", t / hz }'
    pushes1=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^registry_push_acked_total/ {s += $2} END {print s + 0}')
    echo "pushes acknowledged in the window: $((pushes1 - pushes0))"
    wait "$fleet" || true
    echo "conn-fleet: $(cat "$out/push.fleet.json")"
    ;;
list | floor)
    if [ "$mode" = list ]; then
        REGISTRY_LOG=warn taskset -c 0 "$registry_bin" --listen "127.0.0.1:$port" --workers 1 \
            --max-connections 1000 --max-inflight 100000 >/dev/null 2>&1 &
    else
        taskset -c 0 "$floor_bin" --listen "127.0.0.1:$port" --workers 1 \
            --body-bytes "${FLOOR_BODY_BYTES:-4299}" >/dev/null 2>&1 &
    fi
    pid=$!
    pids+=("$pid")
    wait_http "$port"
    for i in $(seq 1 10); do
        curl -s -o /dev/null -XPOST "http://127.0.0.1:$port/nacos/v1/ns/instance?serviceName=bench-list&ip=10.9.0.$i&port=8080&metadata=version%3D1.0.0"
    done
    taskset -c 1 wrk -t1 -c32 -d"$((secs + 4))s" -s scripts/wrk/registry.lua \
        "http://127.0.0.1:$port" -- "$mode" 16 >"$out/$mode.wrk.log" 2>&1 &
    pids+=($!)
    sleep 2
    record "$pid"
    wait "${pids[-1]}" || true
    grep -E 'Requests/sec|requests in' "$out/$mode.wrk.log"
    ;;
*)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac

[ -z "${PERF_STAT:-}" ] || exit 0
report() { perf report -i "$data" --stdio --no-header "$@" 2>/dev/null; }
echo "== kernel / user (self)"
report --no-children --sort dso -g none --percent-limit 1 | grep -E '^ +[0-9]'
echo "== syscalls and main frames (inclusive)"
report --children --sort sym -g none --percent-limit 0.5 |
    grep -E '__x64_sys_|net_rx_action|h2::|hyper::|tonic::|prost::|registry_\w+::' |
    grep -vE 'closure_env|TrackedFuture|\(inlined\)' | head -30
echo "== self-time groups"
report --no-children --sort sym -g none --percent-limit 0 | python3 scripts/perf_groups.py
echo "== top symbols (self)"
report --no-children --sort sym -g none --percent-limit 0.7 | grep -E '^ +[0-9]' | head -40
if [ "$mode" = push ]; then
    echo "== by task (share of all samples)"
    perf script -i "$data" --inline 2>/dev/null | python3 scripts/perf_tasks.py
fi
