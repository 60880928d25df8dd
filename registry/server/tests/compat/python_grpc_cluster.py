"""Drives the real nacos-sdk-python 3.2.0 (gRPC) as one client of a cluster.

Usage: python_grpc_cluster.py HTTP_HOST:PORT GRPC_PORT SERVICE PORT

Two clients on the one node it is given: a watcher subscribed to SERVICE and
a writer that registers 127.0.0.1:PORT. Talks line by line on stdout/stdin:
prints "REGISTERED" once the writer registered, "PUSH p1,p2,..." for every
list the watcher is pushed, then follows commands from stdin:
"deregister" deregisters (prints "DEREGISTERED"), "close" shuts the writer
down, which closes its connection (prints "CLOSED"); end of input shuts the
watcher down and exits. Any failure raises (non-zero exit).
"""
import asyncio
import sys
import tempfile

from v2.nacos import (ClientConfigBuilder, DeregisterInstanceParam, GRPCConfig,
                      NacosNamingService, RegisterInstanceParam, SubscribeServiceParam)

HTTP = sys.argv[1]
GRPC_PORT = int(sys.argv[2])
SERVICE = sys.argv[3]
PORT = int(sys.argv[4])


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


def say(line):
    print(line, flush=True)


async def main():
    watcher = await NacosNamingService.create_naming_service(config(update_when_empty=True))

    async def on_change(instances):
        say("PUSH " + ",".join(str(p) for p in sorted(i.port for i in instances)))

    await watcher.subscribe(SubscribeServiceParam(service_name=SERVICE, subscribe_callback=on_change))
    writer = await NacosNamingService.create_naming_service(config())
    ok = await writer.register_instance(RegisterInstanceParam(
        service_name=SERVICE, ip="127.0.0.1", port=PORT, metadata={"client": "python"}))
    assert ok, "register returned False"
    say("REGISTERED")
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        command = line.strip()
        if command == "deregister":
            ok = await writer.deregister_instance(DeregisterInstanceParam(
                service_name=SERVICE, ip="127.0.0.1", port=PORT))
            assert ok, "deregister returned False"
            say("DEREGISTERED")
        elif command == "register":
            ok = await writer.register_instance(RegisterInstanceParam(
                service_name=SERVICE, ip="127.0.0.1", port=PORT, metadata={"client": "python"}))
            assert ok, "register returned False"
            say("REGISTERED")
        elif command == "close":
            await writer.shutdown()
            say("CLOSED")
    await watcher.shutdown()


asyncio.run(main())
