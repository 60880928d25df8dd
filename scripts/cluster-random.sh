#!/usr/bin/env bash
# The randomised 2.x cluster test (registry/server/tests/cluster_grpc_random.rs)
# run longer than CI does: RUNS seeds (default 10), each with OPS steps
# (default 200) and RESTARTS node restarts (default 6). Stops at the first
# failing seed, which the test prints with its history
# (replay one: GRPC_CLUSTER_SEED=<n> scripts/cluster-random.sh).
#
#   RUNS=20 OPS=400 scripts/cluster-random.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10}
[ -n "${GRPC_CLUSTER_SEED:-}" ] && runs=1
cargo test -p registry-server --test server --no-run
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for i in $(seq 1 "$runs"); do
    echo "run $i of $runs"
    if ! GRPC_CLUSTER_OPS=${OPS:-200} GRPC_CLUSTER_RESTARTS=${RESTARTS:-6} \
        cargo test -p registry-server --test server cluster_grpc_random:: -- --nocapture >"$log" 2>&1; then
        cat "$log"
        echo "failed (the seed and the history are above)" >&2
        exit 1
    fi
    grep -E "GRPC_CLUSTER_SEED|steps," "$log"
done
