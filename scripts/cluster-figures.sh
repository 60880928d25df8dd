#!/usr/bin/env bash
# Figures of a 3-node cluster on loopback (not a test: it prints numbers).
#   scripts/cluster-figures.sh [PROFILE] [DURATION]     (default: smoke 20s)
# 1. load: loadgen PROFILE against the cluster (every member address when
#    loadgen accepts a list, else node 0, so 2/3 of writes are relayed);
#    then replication lag p50/p99 per node (owner's change -> applied here),
#    relayed requests/s and their round trip, RSS per node;
# 2. takeover: kill -9 of the node owning a beating instance, with Nacos's
#    default timings (probe 2 s, DOWN after 3): time until the survivors
#    list it DOWN and until a beat through a survivor is answered 10200.
# REGISTRY_BIN / LOADGEN_BIN name prebuilt binaries (default: release builds);
# BASE_PORT (default 18890) the first node's HTTP port (gRPC on +1000).
set -euo pipefail
cd "$(dirname "$0")/.."
profile="${1:-smoke}"
duration="${2:-20s}"
if [ -z "${REGISTRY_BIN:-}" ] || [ -z "${LOADGEN_BIN:-}" ]; then
    cargo build --release -p registry-server --bin registry -p loadgen --bin loadgen
fi
REGISTRY_BIN="${REGISTRY_BIN:-target/release/registry}"
LOADGEN_BIN="${LOADGEN_BIN:-target/release/loadgen}"
out=target/cluster-figures
mkdir -p "$out"

# Fixed ports below the kernel's ephemeral range (BASE_PORT, default 18890,
# gRPC on +1000): a port that binding 0 handed out and this script let go may
# be taken by any outgoing connection before the node binds it again.
base="${BASE_PORT:-18890}"
p0=$base p1=$((base + 1)) p2=$((base + 2))
for p in "$p0" "$p1" "$p2" $((p0 + 1000)) $((p1 + 1000)) $((p2 + 1000)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        echo "port $p is already in use (set BASE_PORT=...)" >&2
        exit 1
    fi
done
ports=("$p0" "$p1" "$p2")
members="127.0.0.1:$p0,127.0.0.1:$p1,127.0.0.1:$p2"
pids=()
start() {
    "$REGISTRY_BIN" --listen "127.0.0.1:${ports[$1]}" --members "$members" \
        >"$out/node$1.out" 2>>"$out/node$1.log" &
    pids[$1]=$!
}
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for i in 0 1 2; do start "$i"; done
for i in 0 1 2; do
    for _ in $(seq 1 200); do
        curl -sf "http://127.0.0.1:${ports[$i]}/nacos/v1/console/health/readiness" >/dev/null && break
        sleep 0.05
    done
done
sleep 3 # every node UP in every view
echo "machine: $(nproc) cores; $(uptime)"

metrics() { for i in 0 1 2; do curl -s "http://127.0.0.1:${ports[$i]}/metrics" >"$out/$1-node$i.prom"; done; }
metrics before
if "$LOADGEN_BIN" run --help 2>/dev/null | grep -q "comma-separated"; then
    target="http://127.0.0.1:$p0,http://127.0.0.1:$p1,http://127.0.0.1:$p2"
else
    target="http://127.0.0.1:$p0"
fi
echo "load: loadgen $profile for $duration against $target"
started=$(date +%s.%N)
"$LOADGEN_BIN" run --profile "$profile" --duration "$duration" --target "$target" --quiet \
    >"$out/loadgen.txt" 2>&1 || echo "(loadgen exit $? - see $out/loadgen.txt)"
ended=$(date +%s.%N)
metrics after
for i in 0 1 2; do
    echo "node$i RSS: $(awk '/VmRSS/{print $2, $3}' "/proc/${pids[$i]}/status")"
done

python3 - "$out" "$started" "$ended" <<'EOF'
import sys
out, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
def parse(path):
    m = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.rsplit(" ", 1)
        m[k.replace("{}", "")] = float(v)
    return m
def hist(m, name):
    b = sorted(((float(k.split('le="')[1].split('"')[0]) if 'le="+Inf"' not in k else float("inf")), v)
               for k, v in m.items() if k.startswith(name + "_bucket"))
    return b, m.get(name + "_count", 0), m.get(name + "_sum", 0)
def quantile(buckets, count, q):
    for le, c in buckets:
        if c >= q * count:
            return le
    return float("inf")
secs = t1 - t0
for i in range(3):
    b, a = parse(f"{out}/before-node{i}.prom"), parse(f"{out}/after-node{i}.prom")
    lag_b, n, s = hist(a, "registry_cluster_replication_lag_seconds")
    lag0, n0, s0 = hist(b, "registry_cluster_replication_lag_seconds")
    delta = [(le, c - dict(lag0).get(le, 0)) for le, c in lag_b]
    dn = n - n0
    rel = a.get("registry_cluster_relayed_total", 0) - b.get("registry_cluster_relayed_total", 0)
    rb, rn, rs = hist(a, "registry_cluster_relay_seconds")
    _, rn0, rs0 = hist(b, "registry_cluster_relay_seconds")
    mean_relay = (rs - rs0) / (rn - rn0) * 1e3 if rn > rn0 else 0
    print(f"node{i}: applied {int(dn)} replicated states; lag p50 <= {quantile(delta, dn, .5)*1e3:.0f} ms, "
          f"p99 <= {quantile(delta, dn, .99)*1e3:.0f} ms (bucket bounds); "
          f"relayed {rel:.0f} ({rel/secs:.0f}/s), relay round trip mean {mean_relay:.2f} ms; "
          f"checksum repairs {a.get('registry_cluster_checksum_repairs_total', 0):.0f}")
EOF
tail -n 30 "$out/loadgen.txt" | grep -Ei "beat|register|query|errors" | head -12 || true

# Takeover: a beating instance of a service owned by node 2.
svc=$(python3 - "$p0" "$p1" "$p2" <<'EOF'
import sys
addrs = sorted("127.0.0.1:" + p for p in sys.argv[1:])
node2 = "127.0.0.1:" + sys.argv[3]
def jhash(s):
    h = 0
    for c in s.encode("utf-16-le")[::2]:
        h = (31 * h + c) & 0xffffffff
    return h - (1 << 32) if h >= 1 << 31 else h
def responsible(name, n):
    h = jhash(name)
    r = -((-h) % 2147483647) if h < 0 else h % 2147483647  # Java's % truncates
    return abs(r) % n
for i in range(10000):
    name = f"takeover-{i}"
    if addrs[responsible("DEFAULT_GROUP@@" + name, 3)] == node2:
        print(name)
        break
EOF
)
base0="http://127.0.0.1:$p0/nacos/v1/ns/instance"
curl -s -X POST "$base0?serviceName=$svc&ip=10.9.9.9&port=9" >/dev/null
(while true; do curl -s -X PUT "$base0/beat?serviceName=$svc&ip=10.9.9.9&port=9" >/dev/null; sleep 1; done) &
beater=$!
sleep 2
t_kill=$(date +%s%N)
kill -9 "${pids[2]}"
down=""
served=""
for _ in $(seq 1 600); do
    now=$(date +%s%N)
    if [ -z "$down" ] && curl -s "http://127.0.0.1:$p0/nacos/v1/core/cluster/nodes" | python3 -c "
import json,sys; d=json.load(sys.stdin)['data']; sys.exit(0 if any(m['address']=='127.0.0.1:$p2' and m['state']=='DOWN' for m in d) else 1)"; then
        down=$(( (now - t_kill) / 1000000 ))
    fi
    if [ -z "$served" ] && curl -s -X PUT "$base0/beat?serviceName=$svc&ip=10.9.9.9&port=9" | grep -q 10200; then
        served=$(( (now - t_kill) / 1000000 ))
    fi
    [ -n "$down" ] && [ -n "$served" ] && break
    sleep 0.05
done
kill "$beater" 2>/dev/null || true
listed=$(curl -s "$base0/list?serviceName=$svc" | grep -c '"port":9' || true)
echo "takeover after kill -9 (default timings): node 2 DOWN on node 0 after ${down:-?} ms; beats served again after ${served:-?} ms; instance still listed: $listed"
