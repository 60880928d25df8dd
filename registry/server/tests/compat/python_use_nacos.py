"""use-nacos 0.1.6 (a v1 admin client) against the v1 API: namespaces
(`/nacos/v1/console/namespaces`), services, instances, an instance update,
a health update and a metadata batch.

Usage: python_use_nacos.py http://HOST:PORT
"""

import json
import sys

from use_nacos import NacosClient


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


def main(addr):
    c = NacosClient(server_addr=addr)
    spaces = c.namespace.list()
    check(spaces["code"] == 200, f"namespaces {spaces}")
    check([s["namespace"] for s in spaces["data"]] == ["public", "ops"], f"namespaces {spaces}")
    check(c.namespace.create("lab", "Lab", "for tests") is True, "create namespace")
    check(c.namespace.update("lab", "Lab 2", "renamed") is True, "update namespace")
    names = [s["namespaceShowName"] for s in c.namespace.list()["data"]]
    check(names == ["public", "Lab 2", "Ops"], f"names {names}")  # by id

    services = c.service.list(namespace_id="ops")
    check(services["count"] == 1 and services["doms"] == ["billing"], f"services {services}")
    hosts = c.instance.list("billing", namespace_id="ops")["hosts"]
    check(sorted(h["port"] for h in hosts) == [7001, 7002], f"hosts {hosts}")

    done = c.instance.update(
        "billing", "10.2.0.1", 7002, namespace_id="ops", weight=3.0,
        metadata=json.dumps({"owner": "use-nacos"}), ephemeral=True,
    )
    check(done == "ok", f"update answered {done}")
    one = c.instance.get("billing", "10.2.0.1", 7002, namespace_id="ops")
    check(one["weight"] == 3.0 and one["metadata"] == {"owner": "use-nacos"}, f"instance {one}")

    check(c.instance.update_health("billing", "10.2.0.1", 7002, False, namespace_id="ops") == "ok", "health")
    batch = c.instance.batch_update_metadata("billing", "ops", {"tier": "gold"})
    check(len(batch["updated"]) == 2, f"batch {batch}")
    hosts = c.instance.list("billing", namespace_id="ops")["hosts"]
    check(all(h["metadata"].get("tier") == "gold" for h in hosts), f"hosts {hosts}")

    check(c.namespace.delete("lab") is True, "delete namespace")
    # Nacos 3 deletes a namespace that holds services (core/service/
    # NamespaceOperationService.java removeNamespace): the record goes, the
    # services stay reachable by the id.
    check(c.namespace.delete("ops") is True, "a namespace holding services is deleted")
    # The console's list still shows `ops` as a namespace holding services
    # without a record: named by its id, no longer "Ops".
    rows = [(s["namespace"], s["namespaceShowName"]) for s in c.namespace.list()["data"]]
    check(rows == [("public", "public"), ("ops", "ops")], f"namespaces after the delete {rows}")
    hosts = c.instance.list("billing", namespace_id="ops")["hosts"]
    check(len(hosts) == 2, f"its services stay: {hosts}")
    print("use-nacos: all checks passed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
