#!/usr/bin/env bash
# A big node joins (issue 34 item 3): a 3-node registry cluster on loopback
# (Raft over --data-dir, Distro for the ephemeral instances) is loaded with
# the nacos-1x-report fleet (1.1M instances over 600k services by default)
# by loadgen, then a fourth node starts with --cluster-join and is added
# with `registry members add`. Prints how long the new node took to hold
# every instance its peers hold (from its start and from the add), its peak
# memory, the peers' peaks, and each node's count of state parts it could
# not send for size (registry_cluster_oversize_total: it must be 0).
#
#   scripts/join-figures.sh
#
# INSTANCES, SERVICES (default 1100000, 600000), LOAD_RATE (registrations a
# second, default 4000; three test-profile nodes sharing two cores time out
# some registrations even at 2500); BASE_PORT (default 38848); REGISTRY_BIN
# and LOADGEN_BIN (default target/release/{registry,loadgen}: build them
# first, one at a time); OUT (default target/join-figures): node logs and the
# loadgen report. The instances are registered once and never beat: the
# nodes tell clients to beat hourly and keep an instance two hours, so the
# figure is the join's, not 220k beats a second on two cores.
# Exits 1 when the new node does not converge within JOIN_LIMIT_S (default
# 600) or a part was skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
instances="${INSTANCES:-1100000}"
services="${SERVICES:-600000}"
rate="${LOAD_RATE:-4000}"
base="${BASE_PORT:-38848}"
limit="${JOIN_LIMIT_S:-600}"
REGISTRY_BIN=$(realpath "${REGISTRY_BIN:-target/release/registry}")
LOADGEN_BIN=$(realpath "${LOADGEN_BIN:-target/release/loadgen}")
OUT=$(realpath -m "${OUT:-target/join-figures}")
rm -rf "$OUT" && mkdir -p "$OUT"

addr() { echo "127.0.0.1:$((base + $1))"; }
members="$(addr 0),$(addr 1),$(addr 2)"
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop_all EXIT INT TERM

# Hourly beats, two hours to expire: the fleet registers once.
timings=(--beat-interval-ms 3600000 --beat-timeout-ms 7200000 --delete-timeout-ms 7200000)
start() { # index, members, extra flags...
    local i="$1" list="$2"
    shift 2
    REGISTRY_LOG=warn "$REGISTRY_BIN" --listen "$(addr "$i")" --members "$list" \
        --data-dir "$OUT/data$i" "${timings[@]}" "$@" >"$OUT/node$i.out" 2>"$OUT/node$i.log" &
    pids+=("$!")
    echo "$!" >"$OUT/node$i.pid"
}
ready() {
    for _ in $(seq 1 1200); do
        curl -sf "http://$(addr "$1")/nacos/v1/console/health/readiness" >/dev/null && return 0
        sleep 0.1
    done
    echo "node $1 not ready after 120 s" >&2
    tail -20 "$OUT/node$1.log" >&2
    exit 1
}
metric() { # node, name: the first sample's value, 0 when absent or unreadable
    local text
    text=$(curl -sf "http://$(addr "$1")/metrics") || { echo 0; return 0; }
    awk -v n="$2" '$1 == n && !found { v = $2; found = 1 } END { print found ? v : 0 }' <<<"$text"
}
peak_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$(cat "$OUT/node$1.pid")/status"; }

# Every member sees the others UP: a write relayed while the views still
# differ is refused as Nacos refuses it ("invalid redirect request").
all_up() { # node, how many
    [ "$(curl -sf "http://$(addr "$1")/nacos/v1/core/cluster/nodes" | grep -o '"state":"UP"' | wc -l)" -eq "$2" ]
}
views_agree() { # how many nodes
    for _ in $(seq 1 600); do
        local ok=1
        for i in $(seq 0 $(($1 - 1))); do all_up "$i" "$1" || ok=0; done
        ((ok)) && return 0
        sleep 0.1
    done
    echo "the members' views did not agree within 60 s" >&2
    exit 1
}
# The count every node of 0..N-1 reports, once it has held still for 2 s.
settled_count() {
    local last="" same=0 now
    for _ in $(seq 1 1200); do
        now=""
        for i in $(seq 0 $(($1 - 1))); do now="$now $(metric "$i" registry_instances)"; done
        if [ "$now" == "$last" ] && [ "$(echo "$now" | tr ' ' '\n' | sort -u | grep -c .)" -eq 1 ]; then
            same=$((same + 1))
            ((same >= 10)) && { echo "$now" | awk '{ print $1 }'; return 0; }
        else
            same=0
        fi
        last="$now"
        sleep 0.2
    done
    echo "the nodes' instance counts did not settle: $now" >&2
    exit 1
}

for i in 0 1 2; do start "$i" "$members"; done
for i in 0 1 2; do ready "$i"; done
views_agree 3

cat >"$OUT/join.toml" <<EOF
name = "join-fleet"
description = "the nacos-1x-report fleet, registered once (no beats, no drain)"
thresholds = ["*.errors<=0"]
[fleet]
services = $services
instances = $instances
subscribers = 0
watched_services = 0
beat_interval = "1h"
[load]
rate = $rate
[steady]
duration = "1s"
[drain]
enabled = false
[connections]
count = 32
pipeline = 32
EOF
targets="http://$(addr 0),http://$(addr 1),http://$(addr 2)"
echo "loading $instances instances over $services services into $members at $rate/s"
set +e
"$LOADGEN_BIN" run --profile "$OUT/join.toml" --target "$targets" --out "$OUT" --quiet
echo "loadgen exit code $?; report in $OUT"
set -e
want=$(settled_count 3)
echo "the three members agree on $want instances"

# The fourth node: started with --cluster-join, then added on node 0.
joined_at=$(date +%s.%N)
start 3 "$members,$(addr 3)" --cluster-join
ready_wait_start=$(date +%s.%N)
"$REGISTRY_BIN" members add "$(addr 3)" --server "$(addr 0)" >"$OUT/add.out"
added_at=$(date +%s.%N)
converged=""
while awk -v s="$joined_at" -v l="$limit" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - s < l) }'; do
    have=$(metric 3 registry_instances)
    if [ "$have" -ge "$want" ]; then
        converged=$(date +%s.%N)
        break
    fi
    sleep 0.2
done
oversize=0
for i in 0 1 2 3; do
    o=$(metric "$i" registry_cluster_oversize_total)
    oversize=$((oversize + ${o%.*}))
    echo "node $i: $(metric "$i" registry_instances) instances, $(metric "$i" registry_services) services, peak $(( $(peak_kib "$i") / 1024 )) MiB, parts skipped for size: $o"
done
if [ -z "$converged" ]; then
    echo "FAILED: node 3 holds $(metric 3 registry_instances) of $want instances after ${limit} s" >&2
    exit 1
fi
awk -v j="$joined_at" -v r="$ready_wait_start" -v a="$added_at" -v c="$converged" 'BEGIN {
    printf "node 3 held all %s instances %.1f s after its start (%.1f s after the add; the add took %.1f s)\n", "'"$want"'", c - j, c - a, a - r
}'
if ((oversize != 0)); then
    echo "FAILED: $oversize state parts were skipped for size" >&2
    exit 1
fi
