#!/usr/bin/env bash
# Figures of persistent writes replicated by Raft, 3 nodes on loopback (not a
# test: it prints numbers). Load from scripts/raft_load.py (Python, raw HTTP/1.1).
#   scripts/raft-figures.sh [SECONDS]          (default 10 per load run)
# 1. durable writes/s and latency, closed loop (16 connections) and pipelined
#    (8 connections x 64 in flight), connections spread over the 3 nodes
#    (2/3 of writes relayed to the leader); the leader's commit latency
#    histogram (proposal -> committed and applied); the same two loads against
#    ONE node with --data-dir (the single-node group-commit path) for the ratio;
# 2. failover: one write every 10 ms through the nodes in turn; kill -9 of the
#    leader; time until a survivor reports itself leader and until the first
#    write acknowledged after the kill;
# 3. snapshot transfer: 100k persistent instances, kill -9 a follower, wipe its
#    data directory, restart it: time until it has installed the snapshot and
#    applied up to the leader's index; snapshot size.
# REGISTRY_BIN names a prebuilt binary (default: target/release/registry).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
if [ -z "${REGISTRY_BIN:-}" ]; then
    cargo build --release -p registry-server --bin registry
fi
BIN="${REGISTRY_BIN:-target/release/registry}"
out=target/raft-figures
rm -rf "$out"
mkdir -p "$out"
load() { python3 scripts/raft_load.py "$@"; }

read -r p0 p1 p2 p3 < <(python3 -c '
import socket
s=[socket.socket() for _ in range(4)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
ports=("$p0" "$p1" "$p2")
members="127.0.0.1:$p0,127.0.0.1:$p1,127.0.0.1:$p2"
addrs="$members"
common=(--udp-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --health-check-interval-ms 0
        --max-instances-per-service 100000)
pids=()
start() {
    "$BIN" --listen "127.0.0.1:${ports[$1]}" --members "$members" --data-dir "$out/data$1" \
        --raft-snapshot-logs 5000 "${common[@]}" >"$out/node$1.out" 2>>"$out/node$1.log" &
    pids[$1]=$!
}
single=""
cleanup() {
    for p in "${pids[@]}" $single; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
ready() {
    for _ in $(seq 1 400); do
        curl -sf "http://127.0.0.1:$1/nacos/v1/console/health/readiness" >/dev/null && return 0
        sleep 0.05
    done
    echo "node on $1 not ready" >&2
    return 1
}
role() {
    curl -s --max-time 1 "http://127.0.0.1:$1/nacos/v1/core/cluster/nodes" | python3 -c '
import json, sys
me = sys.argv[1]
try:
    d = json.load(sys.stdin)["data"]
    print(next(m["extendInfo"].get("raftRole", "?") for m in d if m["address"] == me))
except Exception:
    print("?")' "127.0.0.1:$1"
}
leader() { for i in 0 1 2; do [ "$(role "${ports[$i]}")" = LEADER ] && { echo "$i"; return; }; done; echo -1; }
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1==n {print $2; exit}'; }
p99_commit() {
    curl -s "http://127.0.0.1:$1/metrics" | python3 -c '
import sys
b = []
for l in sys.stdin:
    if l.startswith("registry_raft_commit_seconds_bucket"):
        le = l.split("le=\"")[1].split("\"")[0]
        b.append((float("inf") if le == "+Inf" else float(le), float(l.rsplit(" ", 1)[1])))
    if l.startswith("registry_raft_commit_seconds_count"):
        n = float(l.rsplit(" ", 1)[1])
    if l.startswith("registry_raft_commit_seconds_sum"):
        s = float(l.rsplit(" ", 1)[1])
b.sort()
def q(p):
    for le, c in b:
        if c >= p * n:
            return le
print("entries=%d mean=%.2fms p50<=%sms p99<=%sms" % (n, 1e3 * s / max(n, 1), q(0.5) * 1e3, q(0.99) * 1e3))'
}

for i in 0 1 2; do start "$i"; done
for i in 0 1 2; do ready "${ports[$i]}"; done
sleep 2
echo "machine: $(nproc) cores; $(uptime)"
echo "binary: $BIN"
l=$(leader)
echo "leader: node $l"

echo "== 1. durable writes, 3 nodes (Raft) =="
load closed "$addrs" "$secs" 16
echo "commit latency on the leader: $(p99_commit "${ports[$l]}")"
load pipelined "$addrs" "$secs" 8 64
echo "commit latency on the leader (cumulative): $(p99_commit "${ports[$l]}")"
echo "entries proposed: $(metric "${ports[$l]}" registry_raft_proposals_total), writes committed: $(metric "${ports[$l]}" registry_raft_committed_total)"

echo "== 1b. the same loads, ONE node with --data-dir (no --members) =="
"$BIN" --listen "127.0.0.1:$p3" --data-dir "$out/single" "${common[@]}" >"$out/single.out" 2>"$out/single.log" &
single=$!
ready "$p3"
load closed "127.0.0.1:$p3" "$secs" 16
load pipelined "127.0.0.1:$p3" "$secs" 8 64
kill "$single"; wait "$single" 2>/dev/null || true; single=""
echo "uptime: $(uptime)"

echo "== 2. failover: kill -9 of the leader under a write every 10 ms =="
python3 scripts/raft_load.py failover "$addrs" >"$out/failover.json" &
writer=$!
sleep 2
l=$(leader)
killed=$(date +%s.%N)
kill -9 "${pids[$l]}"
new=-1
while :; do
    for i in 0 1 2; do
        [ "$i" = "$l" ] && continue
        [ "$(role "${ports[$i]}")" = LEADER ] && new=$i
    done
    [ "$new" != -1 ] && break
    sleep 0.02
done
elected=$(date +%s.%N)
sleep 4
kill -TERM "$writer"; wait "$writer" 2>/dev/null || true
python3 - "$killed" "$elected" "$l" "$new" "$out/failover.json" <<'EOF'
import json, sys
killed, elected, old, new = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
f = json.load(open(sys.argv[5]))
after = [w for w in f["failure_windows"] if w["until"] >= killed]
# The writer rotates over every address, the dead one included: the first
# acknowledged write after the kill ends the first failure window.
resumed = min((w["until"] for w in after), default=killed) - killed
print("killed node %s; node %s seen as leader after %.2f s (polled with curl); first write acknowledged %.2f s after the kill (%d writes in all)"
      % (old, new, elected - killed, resumed, f["writes"]))
EOF
start "$l"
ready "${ports[$l]}"

echo "== 3. snapshot transfer of 100k persistent instances =="
load fill "$addrs" 100000
sleep 2
l=$(leader)
v=$(( (l + 1) % 3 ))
target=$(metric "${ports[$l]}" registry_raft_applied_index)
echo "leader node $l applied index $target; snapshots built: $(metric "${ports[$l]}" registry_raft_snapshots_built_total), last snapshot $(metric "${ports[$l]}" registry_raft_snapshot_bytes) bytes"
kill -9 "${pids[$v]}"; wait "${pids[$v]}" 2>/dev/null || true
rm -rf "$out/data$v"
t0=$(date +%s.%N)
start "$v"
while :; do
    inst=$(metric "${ports[$v]}" registry_raft_snapshots_installed_total || true)
    applied=$(metric "${ports[$v]}" registry_raft_applied_index || true)
    if [ "${inst:-0}" != "" ] && [ "${inst:-0}" != 0 ] && [ "${applied:-0}" -ge "$target" ] 2>/dev/null; then break; fi
    sleep 0.05
done
t1=$(date +%s.%N)
python3 -c "print('wiped node $v: snapshot installed and caught up to index $target in %.2f s after its restart (process start included)' % ($t1 - $t0))"
echo "received: $(metric "${ports[$v]}" registry_raft_snapshot_received_bytes_total) bytes in $(metric "${ports[$v]}" registry_raft_snapshot_chunks_received_total) chunks; its snapshot: $(metric "${ports[$v]}" registry_raft_snapshot_bytes) bytes"
for i in 0 1 2; do
    echo "node$i RSS: $(awk '/VmRSS/{print $2, $3}' "/proc/${pids[$i]}/status")"
done
echo "uptime: $(uptime)"
