"""Figures of Nacos 2.x clients on a 3-node cluster (issue 21), with the real
nacos-sdk-python 3.2.0 client. Not a test: it prints numbers.

Usage: python cluster_grpc_figures.py REGISTRY_BIN OUT_DIR [SAMPLES]

Starts three `registry` processes on loopback with the default timings
(synced-client grace 10 s, renewal every 2 s), gRPC on HTTP + 1000, then:

1. lag: SAMPLES (default 200) registrations, one at a time, by a client
   connected to node 0 only; for each, the time from the register call to
   the instance being listed (1.x HTTP list, polled every 2 ms) by node 1
   and by node 2 (both: the later of the two). p50/p99/max. Also the
   servers' own histogram `registry_cluster_client_lag_seconds` (a client's
   change on its node to its application on a peer) from /metrics.
2. kill -9: a "roaming" client given all three addresses and a "lone" one
   given only the roaming one's node, each with one instance; `kill -9` of
   that node; the time until a survivor holds the roaming client again
   (its redo: reconnect + re-register), whether its instance was ever
   missing from a survivor's list (polled every 10 ms), and the time until
   the lone client's instance (it never comes back) is gone from every
   survivor: the grace plus at most one renewal interval.
"""
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from v2.nacos import (ClientConfigBuilder, GRPCConfig, NacosNamingService,
                      RegisterInstanceParam)

BIN = sys.argv[1]
OUT = sys.argv[2]
SAMPLES = int(sys.argv[3]) if len(sys.argv) > 3 else 200


def fixed_ports(n):
    """HTTP ports from BASE_PORT (default 18930) whose +1000 is free too (Nacos
    clients assume it): below the kernel's ephemeral range, so that no outgoing
    connection takes one between this check and the node's bind, as it may a
    port that binding 0 handed out and this script let go."""
    base = int(os.environ.get("BASE_PORT", "18930"))
    out = []
    for p in range(base, base + n):
        for q in (p, p + 1000):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", q))
            except OSError:
                sys.exit(f"port {q} is already in use (set BASE_PORT=...)")
            finally:
                t.close()
        out.append(p)
    return out


PORTS = fixed_ports(3)
MEMBERS = ",".join(f"127.0.0.1:{p}" for p in PORTS)


def start(i):
    log = open(os.path.join(OUT, f"node{i}.log"), "ab")
    return subprocess.Popen(
        [BIN, "--listen", f"127.0.0.1:{PORTS[i]}", "--members", MEMBERS],
        stdout=subprocess.DEVNULL, stderr=log)


def get(i, path, timeout=2):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{PORTS[i]}{path}", timeout=timeout) as r:
            return r.read().decode()
    except Exception:  # a dead or busy node answers nothing
        return None


def lists(i, service, port):
    body = get(i, f"/nacos/v1/ns/instance/list?serviceName={service}")
    return body is not None and f'"port":{port}' in body


def metric(i, name):
    text = get(i, "/metrics") or ""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def client_config(servers):
    return (ClientConfigBuilder()
            .server_address(",".join(f"127.0.0.1:{PORTS[i]}" for i in servers))
            .log_level("WARNING")
            .cache_dir(tempfile.mkdtemp())
            .log_dir(tempfile.mkdtemp())
            .grpc_config(GRPCConfig(grpc_timeout=5000))
            .build())


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def histogram_quantiles(i, name):
    """p50/p99 upper bounds from a Prometheus histogram's buckets."""
    text = get(i, "/metrics") or ""
    buckets = []
    for line in text.splitlines():
        if line.startswith(name + "_bucket{"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), float(line.split()[-1])))
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    out = {}
    for q in (0.5, 0.99):
        out[q] = next(le for le, c in buckets if c >= q * total)
    return total, out


async def lag():
    client = await NacosNamingService.create_naming_service(client_config([0]))
    both = []
    for k in range(SAMPLES):
        port = 20000 + k
        service = f"lag-{k % 20}"
        t0 = time.monotonic()
        await client.register_instance(RegisterInstanceParam(
            service_name=service, ip="127.0.0.1", port=port))
        seen = {}
        while len(seen) < 2:
            for i in (1, 2):
                if i not in seen and lists(i, service, port):
                    seen[i] = time.monotonic() - t0
            if time.monotonic() - t0 > 10:
                raise SystemExit(f"registration {k} not listed by {set((1, 2)) - set(seen)} in 10 s")
            time.sleep(0.002)
        both.append(max(seen.values()))
    ms = [x * 1000 for x in both]
    print(f"lag (register on node 0 -> listed by nodes 1 and 2), {SAMPLES} samples: "
          f"p50 {pct(ms, 0.5):.1f} ms, p99 {pct(ms, 0.99):.1f} ms, max {max(ms):.1f} ms")
    for i in (1, 2):
        h = histogram_quantiles(i, "registry_cluster_client_lag_seconds")
        if h:
            total, q = h
            print(f"  node {i} registry_cluster_client_lag_seconds: {int(total)} samples, "
                  f"p50 <= {q[0.5] * 1000:g} ms, p99 <= {q[0.99] * 1000:g} ms (bucket bounds)")
    await client.shutdown()


async def failover(nodes):
    native = 'registry_cluster_clients{kind="native"}'
    base = [metric(i, native) for i in range(3)]
    roaming = await NacosNamingService.create_naming_service(client_config([0, 1, 2]))
    await roaming.register_instance(RegisterInstanceParam(
        service_name="failover", ip="127.0.0.1", port=7101))
    home = None
    deadline = time.monotonic() + 10
    while home is None and time.monotonic() < deadline:
        for i in range(3):
            if metric(i, native) > base[i]:
                home = i
        time.sleep(0.05)
    assert home is not None, "no node holds the roaming client"
    lone = await NacosNamingService.create_naming_service(client_config([home]))
    await lone.register_instance(RegisterInstanceParam(
        service_name="failover", ip="127.0.0.1", port=7102))
    survivors = [i for i in range(3) if i != home]
    while not all(lists(i, "failover", 7102) and lists(i, "failover", 7101) for i in survivors):
        time.sleep(0.01)
    held = [metric(i, native) for i in survivors]
    killed = time.monotonic()
    nodes[home].kill()
    nodes[home].wait()
    redo = gone = None
    polls = missing = 0
    while time.monotonic() - killed < 60 and (redo is None or gone is None):
        now = time.monotonic() - killed
        if redo is None and any(metric(i, native) > h for i, h in zip(survivors, held)):
            redo = now
        answers = [get(i, "/nacos/v1/ns/instance/list?serviceName=failover", 1) for i in survivors]
        for a in answers:
            if a is not None:
                polls += 1
                missing += '"port":7101' not in a
        if gone is None and all(a is not None and '"port":7102' not in a for a in answers):
            gone = now
        await asyncio.sleep(0.01)
    print(f"kill -9 of node {home} (grace 10 s, renewal 2 s): roaming client redone on a survivor "
          f"after {redo if redo is None else round(redo, 2)} s; its instance missing from "
          f"{missing} of {polls} survivor lists; the lone client's instance gone from every "
          f"survivor after {gone if gone is None else round(gone, 2)} s")
    for c in (roaming, lone):
        try:
            await asyncio.wait_for(c.shutdown(), 5)
        except Exception:  # the lone client's server is dead
            pass


def main():
    os.makedirs(OUT, exist_ok=True)
    nodes = [start(i) for i in range(3)]
    try:
        deadline = time.monotonic() + 30
        while not all(get(i, "/nacos/v1/console/health/readiness") is not None for i in range(3)):
            assert time.monotonic() < deadline, "cluster not ready"
            time.sleep(0.1)
        time.sleep(2)  # every member UP in every view
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()}")
        asyncio.run(lag())
        asyncio.run(failover(nodes))
    finally:
        for n in nodes:
            n.kill()


main()
