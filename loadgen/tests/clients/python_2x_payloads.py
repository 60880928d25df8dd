"""Makes the real nacos-sdk-python 3.2.0 send every request loadgen's 2.x fleet sends.

Usage: python_2x_payloads.py HTTP_HOST:PORT GRPC_PORT SERVICE

The test points GRPC_PORT at a recording proxy in front of a registry: what this
client sends there is the golden payload loadgen's requests are compared with.
Register, batch register, subscribe (the server's push is acked on the stream),
query, deregister; then waits for the stream's acks to be sent and shuts down.
Prints PASS at the end; any failure raises (non-zero exit).
"""
import asyncio
import sys
import tempfile

from v2.nacos import (BatchRegisterInstanceParam, ClientConfigBuilder,
                      DeregisterInstanceParam, GRPCConfig, NacosNamingService,
                      RegisterInstanceParam, SubscribeServiceParam)

HTTP = sys.argv[1]
GRPC_PORT = int(sys.argv[2])
SERVICE = sys.argv[3]


async def main():
    http_port = int(HTTP.rsplit(":", 1)[1])
    config = (ClientConfigBuilder()
              .server_address(HTTP)
              .log_level("WARNING")
              .cache_dir(tempfile.mkdtemp())
              .log_dir(tempfile.mkdtemp())
              .grpc_config(GRPCConfig(grpc_timeout=5000, port_offset=GRPC_PORT - http_port))
              .build())
    client = await NacosNamingService.create_naming_service(config)
    pushed = asyncio.Event()

    async def on_change(_instances):
        pushed.set()

    await client.subscribe(SubscribeServiceParam(service_name=SERVICE, subscribe_callback=on_change))
    assert await client.register_instance(RegisterInstanceParam(
        service_name=SERVICE, ip="10.0.0.1", port=8080)), "register"
    await asyncio.wait_for(pushed.wait(), 5.0)
    assert await client.batch_register_instances(BatchRegisterInstanceParam(
        service_name=SERVICE + "-batch",
        instances=[RegisterInstanceParam(service_name=SERVICE + "-batch", ip="10.0.0.2", port=8080),
                   RegisterInstanceParam(service_name=SERVICE + "-batch", ip="10.0.0.3", port=8080)])), "batch"
    # The public API queries through a subscription; the proxy's query is the
    # ServiceQueryRequest the client sends when it must not subscribe.
    info = await client.grpc_client_proxy.query_instance_of_service(SERVICE, "DEFAULT_GROUP", "", False)
    assert [h.ip for h in info.hosts] == ["10.0.0.1"], info
    assert await client.deregister_instance(DeregisterInstanceParam(
        service_name=SERVICE, ip="10.0.0.1", port=8080)), "deregister"
    await asyncio.sleep(0.5)  # the deregistration's push is acked on the stream
    await client.shutdown()
    print("PASS")


asyncio.run(main())
