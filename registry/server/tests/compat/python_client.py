"""Drives the real nacos-sdk-python 1.0.0 client against a registry.

Usage: python_client.py HOST:PORT BEAT_TIMEOUT_MS DELETE_TIMEOUT_MS

The registry under test must run with the given (short) beat and delete
timeouts, so the expiry part finishes quickly. Exits non-zero with a message
on the first failed check; prints "python client: all checks passed" at the end.
"""
import sys
import time

import nacos
from nacos.exception import NacosException

addr, beat_timeout_ms, delete_timeout_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = nacos.NacosClient(addr, namespace="public")


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


def hosts(service, **kw):
    return client.list_naming_instance(service, **kw)["hosts"]


# Register: ephemeral with JSON metadata (sent with spaces), clusterName=None.
check(client.add_naming_instance("py-demo", "127.0.0.1", 8080, metadata={"k": "v"}) is True, "register returns ok")
# A persistent instance in another group and cluster.
check(
    client.add_naming_instance("py-demo", "127.0.0.1", 8081, cluster_name="c1", ephemeral=False, group_name="G1") is True,
    "register persistent in G1/c1",
)

listed = hosts("py-demo")
check([(h["ip"], h["port"]) for h in listed] == [("127.0.0.1", 8080)], "list shows the instance: %r" % listed)
check(listed[0]["metadata"] == {"k": "v"}, "metadata round-trips: %r" % listed[0]["metadata"])
check(listed[0]["clusterName"] == "DEFAULT", "clusterName=None means DEFAULT")
check(listed[0]["healthy"] is True and listed[0]["enabled"] is True, "healthy and enabled")
check(listed[0]["instanceId"] == "127.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@py-demo", "instance id: %r" % listed[0]["instanceId"])

g1 = hosts("py-demo", group_name="G1", clusters="c1")
check([(h["port"], h["ephemeral"]) for h in g1] == [(8081, False)], "group G1 lists the persistent instance: %r" % g1)
check(hosts("py-demo", group_name="G1", clusters="other") == [], "cluster filter excludes")

# Modify the weight (PUT; a non-Java client's update is an upsert, as in Nacos).
check(client.modify_naming_instance("py-demo", "127.0.0.1", 8080, weight=2.0, metadata={"k": "v2"}) is True, "modify returns ok")
got = client.get_naming_instance("py-demo", "127.0.0.1", 8080)
check(got["weight"] == 2.0, "modified weight visible: %r" % got)
check(got["metadata"] == {"k": "v2"}, "modified metadata visible: %r" % got)
check(got["ip"] == "127.0.0.1" and got["port"] == 8080, "get names the instance")
check(got["service"].endswith("py-demo"), "get names the service: %r" % got["service"])

# Beat: the full beat body, grouped serviceName.
beat = client.send_heartbeat("py-demo", "127.0.0.1", 8080, metadata={"k": "v2"})
check(beat["code"] == 10200, "beat answers 10200: %r" % beat)
check(beat["clientBeatInterval"] > 0, "beat answers an interval: %r" % beat)

# Deregister, then the list is empty.
check(client.remove_naming_instance("py-demo", "127.0.0.1", 8080) is True, "deregister returns ok")
check(hosts("py-demo") == [], "list is empty after deregister")
# Deregistering again is still ok (Nacos answers ok).
check(client.remove_naming_instance("py-demo", "127.0.0.1", 8080) is True, "second deregister is ok")

# Getting a missing instance is an error the client raises.
try:
    client.get_naming_instance("py-demo", "127.0.0.1", 8080)
    check(False, "get of a removed instance must fail")
except NacosException:
    pass

# A beat for an instance the server does not know re-registers it from the beat body.
beat = client.send_heartbeat("py-revive", "127.0.0.1", 9000)
check(beat["code"] == 10200, "beat with a body re-registers: %r" % beat)
check([h["port"] for h in hosts("py-revive")] == [9000], "re-registered from the beat body")
client.remove_naming_instance("py-revive", "127.0.0.1", 9000)

# Expiry: an ephemeral instance that stops beating turns unhealthy, then is removed.
check(client.add_naming_instance("py-expire", "127.0.0.1", 7000) is True, "register for expiry")
check(client.add_naming_instance("py-expire", "127.0.0.1", 7001) is True, "register a beating peer")
deadline = time.time() + (beat_timeout_ms + 5000) / 1000.0
seen_unhealthy = False
while time.time() < deadline:
    client.send_heartbeat("py-expire", "127.0.0.1", 7001)
    if client.get_naming_instance("py-expire", "127.0.0.1", 7000)["healthy"] is False:
        seen_unhealthy = True
        break
    time.sleep(0.1)
check(seen_unhealthy, "silent instance marked unhealthy")
healthy_only = client.list_naming_instance("py-expire", healthy_only=True)["hosts"]
check([h["port"] for h in healthy_only] == [7001], "healthyOnly hides it: %r" % healthy_only)
deadline = time.time() + (delete_timeout_ms + 5000) / 1000.0
removed = False
while time.time() < deadline:
    client.send_heartbeat("py-expire", "127.0.0.1", 7001)
    if [h["port"] for h in hosts("py-expire")] == [7001]:
        removed = True
        break
    time.sleep(0.1)
check(removed, "silent instance removed after the delete timeout")

print("python client: all checks passed")
