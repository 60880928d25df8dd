"""Drives the real nacos-sdk-python 3.2.0 (gRPC) against our server with auth on.

Usage: python_grpc_auth.py HTTP_HOST:PORT GRPC_PORT SERVICE USER PASSWORD

1. Without credentials: register is refused with Nacos's NO_RIGHT (403) and the
   auth plugin's text; the client raises NacosException.
2. With the user's credentials (the client logs in over HTTP and sends the token in
   each request's headers): register, list and service list work.
Prints PASS at the end; any failure raises (non-zero exit).
"""
import asyncio
import sys
import tempfile

from v2.nacos import (ClientConfigBuilder, GRPCConfig, ListInstanceParam,
                      ListServiceParam, NacosNamingService, RegisterInstanceParam)
from v2.nacos.common.nacos_exception import NacosException

HTTP = sys.argv[1]
GRPC_PORT = int(sys.argv[2])
SERVICE = sys.argv[3]
USER = sys.argv[4]
PASSWORD = sys.argv[5]


def config(user=None, password=None):
    http_port = int(HTTP.rsplit(":", 1)[1])
    b = (ClientConfigBuilder()
         .server_address(HTTP)
         .log_level("WARNING")
         .cache_dir(tempfile.mkdtemp())
         .log_dir(tempfile.mkdtemp())
         .grpc_config(GRPCConfig(grpc_timeout=5000, port_offset=GRPC_PORT - http_port)))
    if user is not None:
        b = b.username(user).password(password)
    return b.build()


async def main():
    anonymous = await NacosNamingService.create_naming_service(config())
    try:
        await anonymous.register_instance(RegisterInstanceParam(
            service_name=SERVICE, ip="127.0.0.1", port=9000))
        raise AssertionError("register without a token was accepted")
    except NacosException as e:
        assert e.error_code == 403, e
        assert "user not found!" in str(e), e
        print(f"refused without a token: {e}")
    await anonymous.shutdown()

    client = await NacosNamingService.create_naming_service(config(USER, PASSWORD))
    ok = await client.register_instance(RegisterInstanceParam(
        service_name=SERVICE, ip="127.0.0.1", port=9001))
    assert ok, "register with a token returned False"
    hosts = await client.list_instances(ListInstanceParam(service_name=SERVICE, subscribe=False, healthy_only=None))
    assert [(h.ip, h.port) for h in hosts] == [("127.0.0.1", 9001)], hosts
    services = await client.list_services(ListServiceParam())
    assert SERVICE in services.services, services
    await client.shutdown()
    print("PASS")


asyncio.run(main())
