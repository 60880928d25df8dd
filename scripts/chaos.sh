#!/usr/bin/env bash
# A long randomised chaos run: 3 registry processes, each in its own network
# namespace joined by veth links, under a seeded schedule of partitions (links
# taken down: the leader or a follower cut off), kill -9 + restart and SIGSTOP,
# while a writer registers/deletes persistent instances through every node and
# an ephemeral instance keeps beating through the majority side. The checker
# (registry/server/tests/chaos_support) then requires every acknowledged write
# on every node, nothing deleted back, no acknowledgement from a cut-off node
# and a clear refusal from it, the ephemeral instance never absent on the
# majority side, and convergence within 20 s. A failure prints the seed and the
# whole history. CI runs the same test for 25 s with a seed from the clock.
#   scripts/chaos.sh [DURATION_SECONDS] [SEED]      (default 300, clock seed)
# Needs root (network namespaces); run it alone: it is timing-sensitive.
set -euo pipefail
cd "$(dirname "$0")/.."
duration="${1:-300}"
seed="${2:-$(date +%s%N)}"
echo "chaos: ${duration}s, seed ${seed} (rerun: scripts/chaos.sh ${duration} ${seed})"
CHAOS_DURATION_S="$duration" CHAOS_SEED="$seed" \
  cargo test -p registry-server --test server chaos:: -- --nocapture
