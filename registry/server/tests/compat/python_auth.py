"""Drives the real nacos-sdk-python 1.0.0 client against a registry with
access control on (`--auth-users`).

Usage: python_auth.py HOST:PORT MODE [USERNAME PASSWORD]

MODE:
  ok     the right credentials: the client logs in (POST /nacos/v1/auth/login),
         then register, list, get and deregister work with its accessToken.
  wrong  a wrong password: the login is refused and the client raises.
  none   no credentials: every naming call is refused (403) and the client
         raises "Insufficient privilege".

Exits non-zero with a message on the first failed check; prints
"python auth <MODE>: all checks passed" at the end.
"""
import sys

import nacos
from nacos.exception import NacosException

addr, mode = sys.argv[1], sys.argv[2]
username = sys.argv[3] if len(sys.argv) > 3 else None
password = sys.argv[4] if len(sys.argv) > 4 else None


def check(cond, what):
    if not cond:
        print("FAILED: " + what, file=sys.stderr)
        sys.exit(1)


if mode == "ok":
    client = nacos.NacosClient(addr, namespace="public", username=username, password=password)
    check(client.token is not None and len(client.token) > 64, "login returned a token: %r" % client.token)
    check(client.token_ttl and client.token_ttl > 0, "login returned a TTL: %r" % client.token_ttl)
    check(client.add_naming_instance("auth-demo", "127.0.0.1", 8080, metadata={"k": "v"}) is True, "register returns ok")
    check(
        client.add_naming_instance("auth-demo", "127.0.0.1", 8081, ephemeral=False) is True,
        "register a persistent instance",
    )
    ports = sorted(h["port"] for h in client.list_naming_instance("auth-demo")["hosts"])
    check(ports == [8080, 8081], "list shows both: %r" % ports)
    got = client.get_naming_instance("auth-demo", "127.0.0.1", 8080)
    check(got["metadata"] == {"k": "v"}, "get works: %r" % got)
    beat = client.send_heartbeat("auth-demo", "127.0.0.1", 8080)
    check(beat["code"] == 10200, "beat works: %r" % beat)
    check(client.remove_naming_instance("auth-demo", "127.0.0.1", 8080) is True, "deregister returns ok")
    check(
        client.remove_naming_instance("auth-demo", "127.0.0.1", 8081, ephemeral=False) is True,
        "deregister the persistent instance",
    )
    check(client.list_naming_instance("auth-demo")["hosts"] == [], "list is empty after deregister")
elif mode == "wrong":
    try:
        nacos.NacosClient(addr, namespace="public", username=username, password=password)
        check(False, "a client with a wrong password must not log in")
    except Exception as e:  # urllib's HTTPError 403 from the login
        check("403" in str(e) or "Forbidden" in str(e), "login refused with 403: %r" % e)
elif mode == "none":
    client = nacos.NacosClient(addr, namespace="public")
    for what, call in [
        ("register", lambda: client.add_naming_instance("auth-demo", "127.0.0.1", 9090)),
        ("list", lambda: client.list_naming_instance("auth-demo")),
        ("deregister", lambda: client.remove_naming_instance("auth-demo", "127.0.0.1", 9090)),
    ]:
        try:
            call()
            check(False, "%s without a token must be refused" % what)
        except NacosException as e:
            check("Insufficient privilege" in str(e), "%s refused with 403: %r" % (what, e))
else:
    check(False, "unknown mode " + mode)

print("python auth %s: all checks passed" % mode)
