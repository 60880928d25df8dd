"""nacos-maintainer-sdk-python 0.5.3 against the v3 admin API.

The SDK's published version has AI (MCP/A2A) services only, no naming
service class; what it does ship is the maintainer transport every 3.x
maintainer service is built on (`ClientHttpProxy`: server rotation, retries,
the access-token login, the JSON envelope). This drives that transport, as
a maintainer naming service would, against the v3 admin naming and
namespace endpoints: list namespaces, create one, list services and
instances, update an instance, and read the change back.

Usage: python_maintainer.py HOST:PORT
"""

import asyncio
import sys
import tempfile

from v2.nacos import ClientConfigBuilder

from maintainer.common.auth import RequestResource
from maintainer.nacos_maintainer_client import NacosMaintainerClient
from maintainer.transport.client_http_proxy import ClientHttpProxy, HttpRequest


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", flush=True)
        sys.exit(1)


class NamingMaintainer(NacosMaintainerClient):
    """A naming maintainer on the SDK's own client and transport."""

    def __init__(self, config):
        super().__init__(config, "naming")
        self.proxy = ClientHttpProxy(self.logger, config, self.http_agent)

    async def call(self, method, path, params):
        resource = RequestResource("naming", params.get("namespaceId", ""), "", None)
        request = HttpRequest(path=path, method=method, request_resource=resource, params=params)
        result = await self.proxy.request(request)
        check(result.get("code") == 0, f"{method} {path}: {result}")
        return result["data"]


async def main(addr):
    config = (
        ClientConfigBuilder()
        .server_address(addr)
        .timeout_ms(5000)
        .log_level("WARNING")
        .build()
    )
    config.log_dir = tempfile.mkdtemp()
    m = NamingMaintainer(config)

    spaces = await m.call("GET", "/nacos/v3/admin/core/namespace/list", {})
    check([s["namespace"] for s in spaces] == ["public"], f"namespaces {spaces}")
    created = await m.call(
        "POST", "/nacos/v3/admin/core/namespace", {"namespaceId": "ops", "namespaceName": "Ops"}
    )
    check(created is True, f"create namespace answered {created}")
    spaces = await m.call("GET", "/nacos/v3/admin/core/namespace/list", {})
    check([s["namespace"] for s in spaces] == ["public", "ops"], f"namespaces {spaces}")

    # The instances the Rust test registered through the v1 and v2 doors.
    page = await m.call(
        "GET", "/nacos/v3/admin/ns/service/list", {"namespaceId": "ops", "pageNo": 1, "pageSize": 10}
    )
    check(page["totalCount"] == 1, f"service page {page}")
    check(page["pageItems"][0]["name"] == "billing", f"service page {page}")
    check(page["pageItems"][0]["ipCount"] == 2, f"service page {page}")
    hosts = await m.call(
        "GET", "/nacos/v3/admin/ns/instance/list", {"namespaceId": "ops", "serviceName": "billing"}
    )
    check(sorted(h["port"] for h in hosts) == [7001, 7002], f"instances {hosts}")

    done = await m.call(
        "PUT",
        "/nacos/v3/admin/ns/instance",
        {
            "namespaceId": "ops",
            "serviceName": "billing",
            "ip": "10.2.0.1",
            "port": 7001,
            "weight": 7,
            "metadata": '{"owner":"maintainer"}',
        },
    )
    check(done == "ok", f"update answered {done}")
    one = await m.call(
        "GET",
        "/nacos/v3/admin/ns/instance",
        {"namespaceId": "ops", "serviceName": "billing", "ip": "10.2.0.1", "port": 7001},
    )
    check(one["weight"] == 7.0 and one["metadata"] == {"owner": "maintainer"}, f"instance {one}")
    print("maintainer sdk: all checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
