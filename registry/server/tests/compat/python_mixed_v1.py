"""The 1.x side of the mixed-protocol test: nacos-sdk-python 1.0.0 (HTTP).

Usage: python_mixed_v1.py HTTP_HOST:PORT SERVICE PORT_REGISTERED_OVER_GRPC

Registers 127.0.0.1:9090 (beating every second), waits until the instance a
2.x client registered over gRPC shows in its list, prints SEEN, then keeps
beating until stdin closes, deregisters, and prints DONE.
"""
import sys
import time

import nacos

addr, service, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = nacos.NacosClient(addr, namespace="public")
if client.add_naming_instance(service, "127.0.0.1", 9090, heartbeat_interval=1) is not True:
    sys.exit("1.x register failed")
deadline = time.time() + 20
while time.time() < deadline:
    ports = sorted(h["port"] for h in client.list_naming_instance(service)["hosts"])
    if want in ports:
        print("SEEN", ports, flush=True)
        break
    time.sleep(0.05)
else:
    sys.exit(f"the 2.x instance {want} never showed in the 1.x list")
sys.stdin.read()
client.remove_naming_instance(service, "127.0.0.1", 9090)
print("DONE", flush=True)
