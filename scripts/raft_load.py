#!/usr/bin/env python3
"""Persistent-write load for scripts/raft-figures.sh (not a test: it prints numbers).

  raft_load.py closed ADDRS SECONDS CONNS          closed loop: each connection sends one
                                                  persistent registration, waits, repeats
  raft_load.py pipelined ADDRS SECONDS CONNS DEPTH each connection keeps DEPTH requests in flight
  raft_load.py fill ADDRS COUNT                    registers COUNT instances (pipelined), once
  raft_load.py failover ADDRS                      one write every 10 ms through every node in
                                                  turn; prints each failure window (the script
                                                  kills the leader meanwhile); stops on SIGTERM

ADDRS: host:port,host:port,... Connections are spread over the addresses (writes to a
follower are relayed to the leader, as a client's would be). Prints one JSON line.
"""
import json
import signal
import socket
import sys
import threading
import time

def request(addr, service, port):
    return ("POST /nacos/v1/ns/instance?serviceName=%s&ip=10.%d.%d.%d&port=%d&ephemeral=false HTTP/1.1\r\n"
            "Host: %s\r\nContent-Length: 0\r\n\r\n" % (
                service, (port >> 16) & 255, (port >> 8) & 255, port & 255, 1 + port % 60000, addr)).encode()


class Conn:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.addr = addr
        self.s = socket.create_connection((host, int(port)), timeout=60)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def read_response(self):
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end >= 0:
                head = self.buf[:head_end].decode("latin-1")
                length = 0
                for line in head.split("\r\n")[1:]:
                    k, _, v = line.partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v.strip())
                total = head_end + 4 + length
                if len(self.buf) >= total:
                    status = int(head.split(" ", 2)[1])
                    self.buf = self.buf[total:]
                    return status
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def closed(addrs, seconds, conns):
    lat, errors = [], [0]
    lock = threading.Lock()
    stop = time.time() + seconds

    def worker(i):
        c = Conn(addrs[i % len(addrs)])
        n = 0
        mine = []
        while time.time() < stop:
            n += 1
            t = time.perf_counter()
            c.s.sendall(request(c.addr, "closed%d" % (i % 50), i * 100000 + n))
            status = c.read_response()
            if status == 200:
                mine.append(time.perf_counter() - t)
            else:
                errors[0] += 1
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(conns)]
    t0 = time.time()
    [t.start() for t in ts]
    [t.join() for t in ts]
    took = time.time() - t0
    return {"mode": "closed", "conns": conns, "writes": len(lat), "errors": errors[0],
            "writes_per_s": round(len(lat) / took), "p50_ms": round(pct(lat, 0.5) * 1e3, 2),
            "p99_ms": round(pct(lat, 0.99) * 1e3, 2)}


def pipelined(addrs, seconds, conns, depth, total=None, service="pipe"):
    done, errors = [0], [0]
    lock = threading.Lock()
    stop = time.time() + seconds
    per_conn = None if total is None else (total + conns - 1) // conns

    def worker(i):
        c = Conn(addrs[i % len(addrs)])
        sent = ok = bad = 0
        inflight = 0
        while True:
            more = time.time() < stop if per_conn is None else sent < per_conn
            batch = b""
            while more and inflight < depth and (per_conn is None or sent < per_conn):
                batch += request(c.addr, "%s%d" % (service, (i * 7 + sent) % 1000), i * 1000000 + sent)
                sent += 1
                inflight += 1
            if batch:
                c.s.sendall(batch)
            if inflight == 0:
                break
            status = c.read_response()
            inflight -= 1
            if status == 200:
                ok += 1
            else:
                bad += 1
        with lock:
            done[0] += ok
            errors[0] += bad

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(conns)]
    t0 = time.time()
    [t.start() for t in ts]
    [t.join() for t in ts]
    took = time.time() - t0
    return {"mode": "pipelined" if total is None else "fill", "conns": conns, "depth": depth,
            "writes": done[0], "errors": errors[0], "seconds": round(took, 2),
            "writes_per_s": round(done[0] / took)}


def failover(addrs):
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    windows, first_fail, n = [], None, 0
    while running[0]:
        n += 1
        addr = addrs[n % len(addrs)]
        t = time.time()
        try:
            c = Conn(addr)
            c.s.settimeout(3)
            c.s.sendall(request(addr, "failover", n))
            ok = c.read_response() == 200
            c.s.close()
        except OSError:
            ok = False
        if not ok and first_fail is None:
            first_fail = t
        if ok and first_fail is not None:
            windows.append({"from": round(first_fail, 3), "until": round(time.time(), 3)})
            first_fail = None
        time.sleep(0.01)
    print(json.dumps({"mode": "failover", "writes": n, "failure_windows": windows}), flush=True)


def main():
    mode, addrs = sys.argv[1], sys.argv[2].split(",")
    if mode == "closed":
        print(json.dumps(closed(addrs, float(sys.argv[3]), int(sys.argv[4]))))
    elif mode == "pipelined":
        print(json.dumps(pipelined(addrs, float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
    elif mode == "fill":
        print(json.dumps(pipelined(addrs, 1e9, 8, 64, total=int(sys.argv[3]), service="fill")))
    elif mode == "failover":
        failover(addrs)


main()
