"""Drives the real nacos-sdk-python 3.2.0 (gRPC only) against our server.

Usage: python_grpc_client.py HTTP_HOST:PORT GRPC_PORT SERVICE

Two clients: a writer and a subscriber. Checks, each with a bounded wait:
register -> subscriber's callback sees it within 1 s; list/get/service list see
it; a second instance and its deregistration are pushed within 1 s each;
closing the writer removes its remaining instance (pushed within 1 s).
Prints PASS at the end; any failure raises (non-zero exit).
"""
import asyncio
import sys
import tempfile
import time

from v2.nacos import (ClientConfigBuilder, DeregisterInstanceParam, GRPCConfig,
                      ListInstanceParam, ListServiceParam, NacosNamingService,
                      RegisterInstanceParam, SubscribeServiceParam)

HTTP = sys.argv[1]
GRPC_PORT = int(sys.argv[2])
SERVICE = sys.argv[3]
PUSH_LIMIT_S = 1.0


def config(update_when_empty=False):
    http_port = int(HTTP.rsplit(":", 1)[1])
    c = (ClientConfigBuilder()
         .server_address(HTTP)
         .log_level("WARNING")
         .cache_dir(tempfile.mkdtemp())
         .log_dir(tempfile.mkdtemp())
         .grpc_config(GRPCConfig(grpc_timeout=5000, port_offset=GRPC_PORT - http_port))
         .build())
    c.update_cache_when_empty = update_when_empty
    return c


async def wait_for(what, check, limit):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out after {limit}s waiting for {what}")


async def main():
    writer = await NacosNamingService.create_naming_service(config())
    watcher = await NacosNamingService.create_naming_service(config(update_when_empty=True))

    seen = []

    async def on_change(instances):
        seen.append(sorted(i.port for i in instances))

    await watcher.subscribe(SubscribeServiceParam(service_name=SERVICE, subscribe_callback=on_change))

    def seen_ports(ports):
        return lambda: bool(seen) and seen[-1] == ports

    t0 = time.monotonic()
    ok = await writer.register_instance(RegisterInstanceParam(
        service_name=SERVICE, ip="127.0.0.1", port=8080, metadata={"k": "v"}))
    assert ok, "register returned False"
    t = await wait_for("push of [8080]", seen_ports([8080]), 5.0)
    print(f"push after register: {(t - t0) * 1000:.0f} ms")
    assert t - t0 <= PUSH_LIMIT_S, f"push took {t - t0:.3f}s"

    hosts = await writer.list_instances(ListInstanceParam(service_name=SERVICE, subscribe=False, healthy_only=None))
    assert [(h.ip, h.port, h.metadata.get("k")) for h in hosts] == [("127.0.0.1", 8080, "v")], hosts

    services = await writer.list_services(ListServiceParam())
    assert SERVICE in services.services, services

    t0 = time.monotonic()
    await writer.register_instance(RegisterInstanceParam(service_name=SERVICE, ip="127.0.0.1", port=8081))
    t = await wait_for("push of [8080, 8081]", seen_ports([8080, 8081]), 5.0)
    assert t - t0 <= PUSH_LIMIT_S, f"push took {t - t0:.3f}s"

    t0 = time.monotonic()
    await writer.deregister_instance(DeregisterInstanceParam(service_name=SERVICE, ip="127.0.0.1", port=8081))
    t = await wait_for("push of [8080]", seen_ports([8080]), 5.0)
    assert t - t0 <= PUSH_LIMIT_S, f"push took {t - t0:.3f}s"

    t0 = time.monotonic()
    await writer.shutdown()
    t = await wait_for("push of [] after the writer closed", seen_ports([]), 5.0)
    assert t - t0 <= PUSH_LIMIT_S, f"push took {t - t0:.3f}s"

    await watcher.shutdown()
    print("PASS")


asyncio.run(main())
