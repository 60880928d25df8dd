"""An operator's change through the 3.x maintainer SDK outlives the 2.x
client's re-registration and its redo on a new connection.

Usage: python_maintainer_layer.py HTTP_HOST:PORT GRPC_PORT

Nacos keeps the operator's change in a layer of its own
(naming/.../core/InstanceOperatorClientImpl.updateInstance and
patchInstance write NamingMetadataManager's InstanceMetadata) and lays it
over the client's instance on every read (core/v2/index/
ServiceStorage.parseInstance -> utils/InstanceUtil.updateInstanceMetadata):
weight and enabled replace the client's, metadata keys go over the client's.
Each step waits a bounded time for what it checks. Prints
"layer: all checks passed" at the end; any failure exits non-zero.
"""
import asyncio
import sys
import tempfile
import time

from maintainer.common.auth import RequestResource
from maintainer.nacos_maintainer_client import NacosMaintainerClient
from maintainer.transport.client_http_proxy import ClientHttpProxy, HttpRequest
from v2.nacos import (ClientConfigBuilder, GRPCConfig, NacosNamingService,
                      RegisterInstanceParam)

HTTP = sys.argv[1]
GRPC_PORT = int(sys.argv[2])
SERVICE = "layered"
IP, PORT = "127.0.0.1", 7100
WAIT_S = 10


def fail(what):
    print(f"FAILED: {what}", flush=True)
    sys.exit(1)


def config():
    http_port = int(HTTP.rsplit(":", 1)[1])
    c = (ClientConfigBuilder()
         .server_address(HTTP)
         .timeout_ms(5000)
         .log_level("WARNING")
         .cache_dir(tempfile.mkdtemp())
         .log_dir(tempfile.mkdtemp())
         .grpc_config(GRPCConfig(grpc_timeout=5000, port_offset=GRPC_PORT - http_port))
         .build())
    return c


class NamingMaintainer(NacosMaintainerClient):
    """A naming maintainer on the SDK's own client and transport."""

    def __init__(self, cfg):
        super().__init__(cfg, "naming")
        self.proxy = ClientHttpProxy(self.logger, cfg, self.http_agent)

    async def call(self, method, path, params):
        resource = RequestResource("naming", "", "", None)
        request = HttpRequest(path=path, method=method, request_resource=resource, params=params)
        result = await self.proxy.request(request)
        if result.get("code") != 0:
            fail(f"{method} {path}: {result}")
        return result["data"]

    async def instance(self):
        return await self.call("GET", "/nacos/v3/admin/ns/instance",
                               {"serviceName": SERVICE, "ip": IP, "port": PORT})


async def seen(m, what, expect):
    """Waits until the maintainer reads the instance as `expect` says."""
    deadline = time.monotonic() + WAIT_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = await m.instance()
            if expect(last):
                return last
        except SystemExit:
            pass
        await asyncio.sleep(0.05)
    fail(f"{what}: last read {last}")


async def register(client, metadata):
    ok = await client.register_instance(RegisterInstanceParam(
        service_name=SERVICE, ip=IP, port=PORT, weight=2.0, ephemeral=True, metadata=metadata))
    if not ok:
        fail("register answered false")


async def main():
    m = NamingMaintainer(config())
    first = await NacosNamingService.create_naming_service(config())
    await register(first, {"client": "a"})
    await seen(m, "the client's own registration",
               lambda i: i["weight"] == 2.0 and i["enabled"] and i["metadata"] == {"client": "a"})

    done = await m.call("PUT", "/nacos/v3/admin/ns/instance", {
        "serviceName": SERVICE, "ip": IP, "port": PORT, "weight": 3, "enabled": "false",
        "metadata": '{"owner":"ops"}',
    })
    if done != "ok":
        fail(f"update answered {done}")
    layered = {"client": "a", "owner": "ops"}
    await seen(m, "the operator's layer over the client's",
               lambda i: i["weight"] == 3.0 and not i["enabled"] and i["metadata"] == layered)

    # The client registers again, as a client does on a change of its own.
    await register(first, {"client": "a2"})
    await seen(m, "the layer after the client's re-register",
               lambda i: i["weight"] == 3.0 and not i["enabled"]
               and i["metadata"] == {"client": "a2", "owner": "ops"})

    # A new connection redoes the registration (the old one closed).
    await first.shutdown()
    second = await NacosNamingService.create_naming_service(config())
    await register(second, {"client": "b"})
    await seen(m, "the layer after a redo on a new connection",
               lambda i: i["weight"] == 3.0 and not i["enabled"]
               and i["metadata"] == {"client": "b", "owner": "ops"})

    # The operator takes it back online (partial update: only the layer moves).
    await m.call("PUT", "/nacos/v3/admin/ns/instance/partial", {
        "serviceName": SERVICE, "ip": IP, "port": PORT, "weight": 3, "enabled": "true",
    })
    await seen(m, "back online", lambda i: i["weight"] == 3.0 and i["enabled"])
    await second.shutdown()
    print("layer: all checks passed", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
