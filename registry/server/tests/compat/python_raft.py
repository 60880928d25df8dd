"""Drives the real nacos-sdk-python 1.0.0 client against a Raft cluster.

Usage: python_raft.py ADDR,ADDR,ADDR SECONDS

Registers persistent instances (ephemeral=False) of one service, a new port
every 100 ms, for SECONDS while the test kills the Raft leader. The client
picks a server and moves to the next on a connection error or a 5xx, as it
does against Nacos. A request the kill cuts off (accepted, then reset: the
SDK retries only refused connections, timeouts and 5xx) fails in the client
as it would against Nacos and is not acknowledged; the client has one
request in flight, so the one kill cuts at most one. Every registration the
client saw acknowledged must be in the final list. Prints "python raft: all checks passed" and its counts.
"""
import http.client
import sys
import time

import nacos
from nacos.exception import NacosException, NacosRequestException

addrs, seconds = sys.argv[1], float(sys.argv[2])
client = nacos.NacosClient(addrs, namespace="public")


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


acked = set()
errors = cut = 0
port = 20000
deadline = time.time() + seconds
while time.time() < deadline:
    port += 1
    try:
        if client.add_naming_instance("py-raft", "127.0.0.1", port, ephemeral=False) is True:
            acked.add(port)
    except (NacosException, NacosRequestException) as e:
        errors += 1
        print("request failed: %r" % e, file=sys.stderr)
    except (ConnectionError, http.client.HTTPException) as e:
        cut += 1
        print("request cut off: %r" % e, file=sys.stderr)
    time.sleep(0.1)

check(cut <= 1, "one kill cut off %d requests" % cut)

check(len(acked) >= seconds * 3, "too few registrations acknowledged: %d" % len(acked))
# Reads are local: a follower may apply the last commits a moment later.
visible_by = time.time() + 5
while True:
    try:
        hosts = client.list_naming_instance("py-raft")["hosts"]
        listed = {h["port"] for h in hosts if not h.get("ephemeral", True)}
        if acked <= listed:
            break
    except (NacosException, NacosRequestException):
        listed = set()
    check(time.time() < visible_by, "acknowledged but not listed: %r" % sorted(acked - listed))
    time.sleep(0.1)
first = min(acked)
check(client.remove_naming_instance("py-raft", "127.0.0.1", first, ephemeral=False) is True,
      "deregister returns ok")
print("python raft: all checks passed acked=%d errors=%d cut=%d listed=%d"
      % (len(acked), errors, cut, len(listed)))
