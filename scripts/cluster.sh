#!/usr/bin/env bash
# Starts an N-node registry cluster on loopback for manual runs:
#   scripts/cluster.sh 3            # nodes at 127.0.0.1:8848, :8849, :8850
# BASE_PORT (default 8848) moves the ports; REGISTRY_BIN names a prebuilt
# binary (default: builds the release one). Extra arguments after N go to
# every node (e.g. --beat-timeout-ms 5000). Logs: target/cluster/nodeI.log.
# Ctrl-C stops every node.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-3}"
shift || true
base="${BASE_PORT:-8848}"
if [ -z "${REGISTRY_BIN:-}" ]; then
    cargo build --release -p registry-server --bin registry
    REGISTRY_BIN=target/release/registry
fi
mkdir -p target/cluster
members=""
for i in $(seq 0 $((n - 1))); do
    members="${members:+$members,}127.0.0.1:$((base + i))"
done
pids=()
stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait
}
trap stop INT TERM EXIT
for i in $(seq 0 $((n - 1))); do
    "$REGISTRY_BIN" --listen "127.0.0.1:$((base + i))" --members "$members" "$@" \
        >"target/cluster/node$i.out" 2>"target/cluster/node$i.log" &
    pids+=("$!")
done
echo "cluster of $n: $members (logs in target/cluster/)"
echo "members:   curl http://127.0.0.1:$base/nacos/v1/core/cluster/nodes"
echo "readiness: curl http://127.0.0.1:$base/nacos/v1/console/health/readiness"
wait
