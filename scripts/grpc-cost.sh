#!/usr/bin/env bash
# Server instructions per operation end to end, both doors (issue 26, target 2):
# the release registry runs under callgrind, and for each operation the counters
# are zeroed, OPS requests are sent, and the counters dumped: everything the
# server ran for them (sockets, tokio, HTTP/1.1 or h2 and tonic, the handler,
# the store) divided by OPS. benches' `hotpaths` gates the handler part of the
# same paths in-process; this adds the transport both leave out.
#
#   scripts/grpc-cost.sh [OPS]            (default 2000)
#
# 2.x requests come from `conn-fleet --ops` over 16 connections (16 in flight,
# no health checks; their setup is inside the first count, ~1 %); 1.x requests
# are the Java 1.x client's, sent over one keep-alive connection. Not CI: a
# minute or two of valgrind. Env: PORT (18970), REGISTRY_BIN, FLEET_BIN, OUT
# (target/grpc-cost), SKIP_BUILD.
set -euo pipefail
cd "$(dirname "$0")/.."

OPS=${1:-2000}
PORT=${PORT:-18970}
REGISTRY_BIN=${REGISTRY_BIN:-target/release/registry}
FLEET_BIN=${FLEET_BIN:-target/release/conn-fleet}
OUT=${OUT:-target/grpc-cost}
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 2; }
if [ -z "${SKIP_BUILD:-}" ]; then
    cargo build --release -p registry-server --bin registry
    cargo build --release -p benches --bin conn-fleet --no-default-features --features fleet
fi
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.*
valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.%p" \
    "$REGISTRY_BIN" --listen "127.0.0.1:${PORT}" --workers 1 >"$OUT/registry.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do
    (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 1000))") 2>/dev/null && break
    sleep 0.1
done

# count NAME CMD...: zero the counters, run CMD, dump; prints Ir / OPS.
count() {
    local name="$1" dump
    shift
    callgrind_control -z "$server" >/dev/null
    "$@" >"$OUT/$name.client.log"
    callgrind_control -d "$name" "$server" >/dev/null
    sleep 1
    dump="$(ls -t "$OUT"/callgrind.* | head -1)"
    awk -v n="$OPS" -v name="$name" '/^(summary|totals):/ { printf "%-16s %10.0f Ir/op\n", name, $2 / n; exit }' "$dump"
}

fleet() {
    "$FLEET_BIN" --grpc "127.0.0.1:$((PORT + 1000))" --connections 16 --health-secs 0 \
        --ops "$OPS" --kinds "$1"
}

# The Java 1.x client's requests over one keep-alive connection, one at a time.
http() {
    python3 - "$PORT" "$OPS" "$1" <<'PY'
import socket, sys
port, ops, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
s = socket.create_connection(("127.0.0.1", port))
head = "Client-Version: Nacos-Java-Client:v1.4.6\r\nUser-Agent: Nacos-Java-Client:v1.4.6\r\nHost: 127.0.0.1\r\nConnection: Keep-Alive\r\n"
for i in range(ops):
    ip = f"10.2.{(i // 250) % 250}.{i % 250}"
    svc = f"DEFAULT_GROUP%40%40conn-fleet.ops.{i % 100}"
    if kind == "register":
        req = f"POST /nacos/v1/ns/instance?serviceName={svc}&ip={ip}&port=8080&weight=1.0&ephemeral=true&metadata=%7B%22version%22%3A%221.0.0%22%2C%22env%22%3A%22prod%22%7D HTTP/1.1\r\n{head}Content-Length: 0\r\n\r\n"
    elif kind == "list":
        req = f"GET /nacos/v1/ns/instance/list?serviceName={svc}&clusters=&healthyOnly=false HTTP/1.1\r\n{head}\r\n"
    else:
        req = f"DELETE /nacos/v1/ns/instance?serviceName={svc}&ip={ip}&port=8080&ephemeral=true HTTP/1.1\r\n{head}Content-Length: 0\r\n\r\n"
    s.sendall(req.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    headers, body = buf.split(b"\r\n\r\n", 1)
    length = int(next(l.split(b":")[1] for l in headers.split(b"\r\n") if l.lower().startswith(b"content-length")))
    while len(body) < length:
        body += s.recv(65536)
PY
}

count grpc-register fleet register
count grpc-query fleet query
count grpc-deregister fleet deregister
count http-register http register
count http-list http list
count http-deregister http deregister
