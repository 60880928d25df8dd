#!/usr/bin/env bash
# Figures of persistent writes replicated by Raft, 3 or 5 nodes on loopback (not
# a test: it prints numbers). Load from scripts/raft_load.py (Python, raw HTTP/1.1).
#   scripts/raft-figures.sh [SECONDS] [NODES]  (default 10 per load run, 3 nodes)
# 1. durable writes/s and latency, closed loop (16 connections) and pipelined
#    (8 connections x 64 in flight), connections spread over the nodes
#    (all but 1/NODES of writes relayed to the leader); the leader's commit
#    latency histogram (proposal -> committed and applied); writes per log
#    entry with 16 and with 1,000 closed-loop writers; with 3 nodes, the same
#    two loads against ONE node with --data-dir (the single-node group-commit
#    path) for the ratio;
# 2. failover: one write every 10 ms through the nodes in turn; kill -9 of the
#    leader; time until a survivor reports itself leader and until the first
#    write acknowledged after the kill;
# 3. snapshot transfer: 100k persistent instances, kill -9 a follower, wipe its
#    data directory, restart it: time until it has installed the snapshot and
#    applied up to the leader's index; snapshot size; every node's RSS and its
#    parts (registry_memory_bytes) after the fill and after the transfer.
# REGISTRY_BIN names a prebuilt binary (default: target/release/registry);
# BASE_PORT (default 18910) the first node's HTTP port.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
n="${2:-3}"
last=$((n - 1))
if [ -z "${REGISTRY_BIN:-}" ]; then
    cargo build --release -p registry-server --bin registry
fi
BIN="${REGISTRY_BIN:-target/release/registry}"
out=target/raft-figures
rm -rf "$out"
mkdir -p "$out"
load() { python3 scripts/raft_load.py "$@"; }

# Fixed HTTP ports below the kernel's ephemeral range (BASE_PORT, default
# 18910; gRPC binds port 0): a port that binding 0 handed out and this script
# let go may be taken by any outgoing connection before the node binds it.
base="${BASE_PORT:-18910}"
all=()
for i in $(seq 0 "$n"); do
    p=$((base + i))
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        echo "port $p is already in use (set BASE_PORT=...)" >&2
        exit 1
    fi
    all+=("$p")
done
ports=("${all[@]:0:n}")
p3="${all[n]}"
members=$(printf '127.0.0.1:%s,' "${ports[@]}")
members="${members%,}"
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
leader() { for i in $(seq 0 "$last"); do [ "$(role "${ports[$i]}")" = LEADER ] && { echo "$i"; return; }; done; echo -1; }
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

per_entry() {
    local p c
    p=$(metric "${ports[$l]}" registry_raft_proposals_total)
    c=$(metric "${ports[$l]}" registry_raft_committed_total)
    python3 -c "import sys; p, c = float(sys.argv[1]) - $1, float(sys.argv[2]) - $2; print('%d writes in %d entries: %.1f writes per entry' % (c, p, c / max(p, 1)))" "$p" "$c"
}
memory() {
    for i in $(seq 0 "$last"); do
        [ -e "/proc/${pids[$i]}/status" ] || continue
        echo "node$i $(role "${ports[$i]}") RSS: $(awk '/VmRSS/{print $2, $3}' "/proc/${pids[$i]}/status"); parts (MB): $(curl -s "http://127.0.0.1:${ports[$i]}/metrics" | awk '/^registry_memory_bytes\{/ {split($1, a, "\""); printf "%s=%.1f ", a[2], $2 / 1e6}')"
    done
}

for i in $(seq 0 "$last"); do start "$i"; done
for i in $(seq 0 "$last"); do ready "${ports[$i]}"; done
sleep 2
echo "machine: $(nproc) cores; $(uptime)"
echo "binary: $BIN"
l=$(leader)
echo "leader: node $l"

echo "== 1. durable writes, $n nodes (Raft) =="
p0=$(metric "${ports[$l]}" registry_raft_proposals_total)
c0=$(metric "${ports[$l]}" registry_raft_committed_total)
load closed "$addrs" "$secs" 16
echo "16 writers: $(per_entry "$p0" "$c0")"
echo "commit latency on the leader: $(p99_commit "${ports[$l]}")"
load pipelined "$addrs" "$secs" 8 64
echo "commit latency on the leader (cumulative): $(p99_commit "${ports[$l]}")"
echo "entries proposed: $(metric "${ports[$l]}" registry_raft_proposals_total), writes committed: $(metric "${ports[$l]}" registry_raft_committed_total)"
p0=$(metric "${ports[$l]}" registry_raft_proposals_total)
c0=$(metric "${ports[$l]}" registry_raft_committed_total)
load closed "$addrs" "$secs" 1000
echo "1,000 writers: $(per_entry "$p0" "$c0")"

if [ "$n" = 3 ]; then
echo "== 1b. the same loads, ONE node with --data-dir (no --members) =="
"$BIN" --listen "127.0.0.1:$p3" --data-dir "$out/single" "${common[@]}" >"$out/single.out" 2>"$out/single.log" &
single=$!
ready "$p3"
load closed "127.0.0.1:$p3" "$secs" 16
load pipelined "127.0.0.1:$p3" "$secs" 8 64
kill "$single"; wait "$single" 2>/dev/null || true; single=""
fi
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
    for i in $(seq 0 "$last"); do
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
v=$(( (l + 1) % n ))
echo "after the fill:"
memory
target=$(metric "${ports[$l]}" registry_raft_applied_index)
echo "leader node $l applied index $target; snapshots built: $(metric "${ports[$l]}" registry_raft_snapshots_built_total), last snapshot $(metric "${ports[$l]}" registry_raft_snapshot_bytes) bytes"
kill -9 "${pids[$v]}"; wait "${pids[$v]}" 2>/dev/null || true
rm -rf "$out/data$v"
t0=$(date +%s.%N)
start "$v"
caught=1
while :; do
    if python3 -c "import sys, time; sys.exit(time.time() - $t0 < 180)"; then
        caught=0
        echo "wiped node $v did NOT catch up within 180 s; its log ends:"
        tail -n 20 "$out/node$v.log" | cut -c1-400
        break
    fi
    inst=$(metric "${ports[$v]}" registry_raft_snapshots_installed_total || true)
    applied=$(metric "${ports[$v]}" registry_raft_applied_index || true)
    if [ "${inst:-0}" != "" ] && [ "${inst:-0}" != 0 ] && [ "${applied:-0}" -ge "$target" ] 2>/dev/null; then break; fi
    sleep 0.05
done
t1=$(date +%s.%N)
[ "$caught" = 1 ] && python3 -c "print('wiped node $v: snapshot installed and caught up to index $target in %.2f s after its restart (process start included)' % ($t1 - $t0))"
echo "received: $(metric "${ports[$v]}" registry_raft_snapshot_received_bytes_total) bytes in $(metric "${ports[$v]}" registry_raft_snapshot_chunks_received_total) chunks; its snapshot: $(metric "${ports[$v]}" registry_raft_snapshot_bytes) bytes"
echo "after the transfer:"
memory
echo "uptime: $(uptime)"
