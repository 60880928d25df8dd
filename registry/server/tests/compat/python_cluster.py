"""Drives the real nacos-sdk-python 1.0.0 client against a cluster.

Usage: python_cluster.py ADDR,ADDR,ADDR SECONDS

Registers one instance with all member addresses configured, then beats and
lists it every 300 ms for SECONDS while the test kills and restarts a node.
The client picks a server and moves to the next on a connection error or a
5xx, as it does against Nacos. Every list must show the instance (it keeps
beating, so a takeover must not lose it). A request the kill cuts off
(accepted, then reset: the SDK retries only refused connections, timeouts
and 5xx) fails in the client as it would against Nacos; being
single-threaded, the client has one request in flight, so at most one is
cut. Prints
"python cluster: all checks passed" and its counts at the end.
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


check(client.add_naming_instance("py-cluster", "127.0.0.1", 9090) is True, "register returns ok")
# Replication is asynchronous (as in Nacos): the node this client lists from
# may learn of the registration a window after the node that owns it.
visible_by = time.time() + 3
while not any(h["port"] == 9090 for h in client.list_naming_instance("py-cluster")["hosts"]):
    check(time.time() < visible_by, "the registration became visible within 3 s")
    time.sleep(0.05)

beats = lists = missing = errors = cut = 0
deadline = time.time() + seconds
while time.time() < deadline:
    try:
        beat = client.send_heartbeat("py-cluster", "127.0.0.1", 9090)
        check(beat["code"] in (10200, 20404), "beat answers a beat code: %r" % beat)
        beats += 1
        hosts = client.list_naming_instance("py-cluster")["hosts"]
        lists += 1
        if not any(h["port"] == 9090 for h in hosts):
            missing += 1
            print("missing from a list: %r" % hosts, file=sys.stderr)
    except (NacosException, NacosRequestException) as e:
        errors += 1
        print("request failed: %r" % e, file=sys.stderr)
    except (ConnectionError, http.client.HTTPException) as e:
        cut += 1
        print("request cut off: %r" % e, file=sys.stderr)
    time.sleep(0.3)

hosts = client.list_naming_instance("py-cluster")["hosts"]
check([(h["ip"], h["port"]) for h in hosts] == [("127.0.0.1", 9090)], "final list: %r" % hosts)
check(missing == 0, "the beating instance was missing from %d lists" % missing)
check(beats >= seconds, "beats kept going: %d" % beats)
check(cut <= 1, "one kill cut off %d requests" % cut)
check(client.remove_naming_instance("py-cluster", "127.0.0.1", 9090) is True, "deregister returns ok")
print("python cluster: all checks passed beats=%d lists=%d errors=%d cut=%d" % (beats, lists, errors, cut))
