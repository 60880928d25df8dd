"""Drives the registry's web console in headless Chromium through WebDriver.

Run by registry/server/tests/console.rs against a registry it started
in-process on a free port:

    console_test.py open BASE_URL ARTIFACTS_DIR
    console_test.py auth BASE_URL ARTIFACTS_DIR USER PASSWORD
    console_test.py cluster BASE_URL ARTIFACTS_DIR

`open` seeds the registry through the public Nacos API (real HTTP), then
uses the console as an operator would: search, open a service, disable an
instance, set a weight, deregister, edit the service, take an IP offline
everywhere, look at hostile metadata, the namespaces and the live view. After
each action it checks the effect through the public API, not the page.
`auth` checks the login, `cluster` the members page of a clustered
server. Screenshots of each page go to ARTIFACTS_DIR; on a
failure also the page, its HTML and the browser log. Prints
"console test MODE: all checks passed" on success.

Selenium is pointed at Debian's /usr/bin/chromedriver and /usr/bin/chromium
(scripts/deps/chromium.sh), so Selenium Manager never downloads anything.
"""

import json
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

WAIT_S = 15
HOSTILE_SCRIPT = "<script>window.__pwned=1</script>"
HOSTILE_IMG = '<img src=x onerror="window.__pwned=2">'
FILLERS = 30


class Api:
    """The public Nacos API over real HTTP."""

    def __init__(self, base):
        self.base = base

    def call(self, method, path, params, expect=200):
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                status, body = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, body = e.code, e.read().decode()
        if status != expect:
            raise AssertionError(f"{method} {path} {params}: {status} {body}")
        return body

    def json(self, path, params):
        return json.loads(self.call("GET", path, params))

    def register(self, service, ip, port, group="DEFAULT_GROUP", metadata=None):
        meta = {
            # The test may run longer than the 15 s beat timeout: keep
            # these instances healthy without beating.
            "preserved.heart.beat.timeout": "600000",
            "preserved.ip.delete.timeout": "600000",
        }
        meta.update(metadata or {})
        self.call("POST", "/nacos/v1/ns/instance", {
            "serviceName": service, "groupName": group, "ip": ip, "port": port,
            "metadata": json.dumps(meta),
        })

    def members(self):
        """The cluster's members, or None where the server does not answer
        the members endpoint (a single node without clustering)."""
        try:
            with urllib.request.urlopen(f"{self.base}/nacos/v1/core/cluster/nodes", timeout=10) as r:
                body = json.loads(r.read().decode())
        except urllib.error.HTTPError:
            return None
        return body["data"] if isinstance(body, dict) else body

    def hosts(self, service, group="DEFAULT_GROUP", healthy_only=False):
        r = self.json("/nacos/v1/ns/instance/list", {
            "serviceName": service, "groupName": group, "healthyOnly": str(healthy_only).lower(),
        })
        return {(h["ip"], h["port"]) for h in r["hosts"]}


class Console:
    """The browser, with waits bounded by WAIT_S and artifacts on failure."""

    def __init__(self, base, artifacts):
        self.base = base
        self.artifacts = artifacts
        opts = Options()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
            opts.add_argument(arg)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=opts)
        self.driver.set_page_load_timeout(WAIT_S)

    def until(self, what, condition):
        def check(_):
            try:
                return condition()
            except Exception:  # the element may be replaced while we read it
                return False
        return WebDriverWait(self.driver, WAIT_S, poll_frequency=0.05).until(check, message=what)

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def open(self, hash_path, view):
        self.driver.get(f"{self.base}/nacos/{hash_path}")
        self.until(f"view {view} ready", lambda: self.find("#view").get_attribute("data-ready") == view)

    def go(self, hash_path, view):
        """Navigates inside the loaded page (a hash change)."""
        self.driver.execute_script("document.getElementById('view').dataset.ready = '';"
                                   "location.hash = arguments[0];", hash_path)
        self.until(f"view {view} ready", lambda: self.find("#view").get_attribute("data-ready") == view)

    def notice(self, contains):
        return self.until(f"notice containing {contains!r}",
                          lambda: contains in self.find("#notice").text and self.find("#notice").text)

    def shot(self, name):
        self.driver.save_screenshot(os.path.join(self.artifacts, f"{name}.png"))

    def keep_failure(self, step):
        try:
            self.shot(f"failure-{step}")
            with open(os.path.join(self.artifacts, f"failure-{step}.html"), "w") as f:
                f.write(self.driver.page_source)
            with open(os.path.join(self.artifacts, f"failure-{step}.log"), "w") as f:
                for entry in self.driver.get_log("browser"):
                    f.write(json.dumps(entry) + "\n")
        except Exception as e:  # keep the original failure visible
            print(f"could not keep failure artifacts: {e}", file=sys.stderr)

    def severe_log(self):
        """Browser errors, except the cluster endpoint's 404 on a single node
        and the refused delete of a namespace holding a service (the
        namespace step provokes it on purpose)."""
        expected = ("/nacos/v1/core/cluster/nodes",
                    "/nacos/v3/admin/core/namespace?namespaceId=ci-space - Failed to load resource: "
                    "the server responded with a status of 400")
        return [e for e in self.driver.get_log("browser")
                if e["level"] == "SEVERE" and not any(x in e["message"] for x in expected)]


def row(console, css):
    rows = console.find_all(css)
    return rows[0] if len(rows) == 1 else None


def seed(api):
    api.register("orders", "10.0.0.1", 8080, metadata={"version": "1.4.2"})
    api.register("orders", "10.0.0.2", 8080)
    api.register("orders", "10.0.0.3", 8080)
    api.register("payments", "10.0.0.1", 9090, group="BILLING")
    api.register("payments", "10.0.0.4", 9090, group="BILLING")
    api.register("hostile", "10.0.0.9", 80, metadata={
        "note": HOSTILE_SCRIPT, "img": HOSTILE_IMG, HOSTILE_IMG: "key too"})
    api.call("PUT", "/nacos/v1/ns/service", {
        "serviceName": "hostile", "protectThreshold": "0",
        "metadata": json.dumps({"owner": HOSTILE_SCRIPT})})
    for i in range(FILLERS):
        api.register(f"filler-{i:02}", f"10.1.0.{i}", 7000)
    # One push subscriber of `orders`: a real UDP socket polling with udpPort.
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    subscribe(api, udp)
    return udp


def subscribe(api, udp):
    """Polls as a subscriber would; each poll renews the subscription's lease."""
    api.call("GET", "/nacos/v1/ns/instance/list", {"serviceName": "orders", "udpPort": udp.getsockname()[1]})


def check_open(console, api):
    udp = seed(api)
    services = 3 + FILLERS
    steps = []

    def step(name):
        steps.append(name)
        print(f"step: {name}", flush=True)

    try:
        step("services-page")
        console.open("", "services")
        console.until("10 service rows", lambda: len(console.find_all(".service-row")) == 10)
        pages = -(-services // 10)
        assert f"Page 1 of {pages} · {services} services" in console.find("#page-info").text, \
            console.find("#page-info").text
        members = api.members()
        assert console.find("#nav-cluster").is_displayed() == (members is not None), \
            f"cluster page offered: {console.find('#nav-cluster').is_displayed()}, members: {members}"
        console.shot("services")

        step("search")
        subscribe(api, udp)  # a fresh lease for the counts below, however slow the start was
        box = console.find("#search-name")
        box.clear()
        box.send_keys("ORD")
        console.find("#search-submit").click()
        console.until("one match", lambda: [r.get_attribute("data-service")
                                            for r in console.find_all(".service-row")] == ["orders"])
        r = console.find(".service-row")
        counts = (r.find_element(By.CSS_SELECTOR, ".ip-count").text,
                  r.find_element(By.CSS_SELECTOR, ".healthy-count").text,
                  r.find_element(By.CSS_SELECTOR, ".subscriber-count").text)
        assert counts == ("3", "3", "1"), counts

        step("open-service")
        r.find_element(By.CSS_SELECTOR, "a").click()
        console.until("service view", lambda: console.find("#view").get_attribute("data-ready") == "service"
                      and len(console.find_all(".instance-row")) == 3)
        assert len(console.find_all(".subscriber-row")) == 1
        for junk in ("null", "undefined", "NaN", "[object"):
            assert junk not in console.find("#view").text, f"{junk!r} on the service page"
        assert "1.4.2" in row(console, '.instance-row[data-addr="10.0.0.1:8080"]').text
        console.shot("service")

        step("disable")
        row(console, '.instance-row[data-addr="10.0.0.2:8080"]').find_element(By.CSS_SELECTOR, ".act-disable").click()
        console.until("10.0.0.2 disabled", lambda: row(
            console, '.instance-row[data-addr="10.0.0.2:8080"]').find_element(By.CSS_SELECTOR, ".enabled").text
            == "disabled")
        healthy = api.hosts("orders", healthy_only=True)
        assert ("10.0.0.2", 8080) not in healthy and {("10.0.0.1", 8080), ("10.0.0.3", 8080)} <= healthy, healthy

        step("weight")
        w = row(console, '.instance-row[data-addr="10.0.0.1:8080"]').find_element(By.CSS_SELECTOR, "input.weight")
        w.clear()
        w.send_keys("5")
        row(console, '.instance-row[data-addr="10.0.0.1:8080"]').find_element(By.CSS_SELECTOR, ".act-weight").click()
        console.notice("weight set to 5")
        detail = api.json("/nacos/v1/ns/instance", {"serviceName": "orders", "ip": "10.0.0.1", "port": 8080})
        assert detail["weight"] == 5.0, detail

        step("edits-outlive-re-register")
        # The console writes the operator's layer (Nacos 3's
        # InstanceOperatorClientImpl.patchInstance): the clients registering
        # again, as they do, keep neither the old weight nor the old enabled.
        api.register("orders", "10.0.0.1", 8080, metadata={"version": "1.4.2"})
        api.register("orders", "10.0.0.2", 8080)
        detail = api.json("/nacos/v1/ns/instance", {"serviceName": "orders", "ip": "10.0.0.1", "port": 8080})
        assert detail["weight"] == 5.0, detail
        healthy = api.hosts("orders", healthy_only=True)
        assert ("10.0.0.2", 8080) not in healthy, healthy

        step("deregister")
        button = row(console, '.instance-row[data-addr="10.0.0.3:8080"]').find_element(
            By.CSS_SELECTOR, ".act-deregister")
        button.click()
        console.until("armed", lambda: button.get_attribute("data-armed") == "yes")
        button.click()
        console.until("row gone", lambda: len(console.find_all(".instance-row")) == 2
                      and not console.find_all('.instance-row[data-addr="10.0.0.3:8080"]'))
        assert ("10.0.0.3", 8080) not in api.hosts("orders")

        step("edit-service")
        t = console.find("#protect-threshold")
        t.clear()
        t.send_keys("0.25")
        m = console.find("#service-metadata")
        m.clear()
        m.send_keys('{"owner": "team-a"}')
        console.find("#service-save").click()
        console.notice("saved")
        svc = api.json("/nacos/v1/ns/service", {"serviceName": "orders"})
        assert svc["protectThreshold"] == 0.25 and svc["metadata"] == {"owner": "team-a"}, svc

        step("hostile-metadata")
        console.go("#/service?serviceName=hostile", "service")
        console.until("hostile row", lambda: len(console.find_all(".instance-row")) == 1)
        text = console.find(".metadata-cell").text
        assert HOSTILE_SCRIPT in text and HOSTILE_IMG in text, text
        assert HOSTILE_SCRIPT in console.find("#view").text  # the service metadata too
        assert console.find_all("#view img, #view script") == [], "hostile markup became elements"
        assert console.driver.execute_script("return window.__pwned") is None, "hostile script ran"
        console.shot("hostile")

        step("ip-offline")
        console.go("#/services", "services")
        console.find("details.card summary").click()
        console.find("#offline-ip").send_keys("10.0.0.1")
        console.find("#offline-disable").click()
        console.notice("disabled 2 instances of 10.0.0.1 in 2 services")
        assert ("10.0.0.1", 8080) not in api.hosts("orders")
        assert api.hosts("payments", group="BILLING") == {("10.0.0.4", 9090)}

        step("namespaces")
        console.go("#/namespaces", "namespaces")
        public = row(console, 'tr[data-namespace="public"]')
        assert public is not None and public.text.endswith(str(services)), public and public.text
        console.shot("namespaces")

        step("namespace-create-delete")
        console.find("#ns-id").send_keys("ci-space")
        console.find("#ns-name").send_keys("CI space")
        console.find("#ns-create").click()
        console.notice("Namespace CI space created")
        ids = [n["namespace"] for n in api.json("/nacos/v3/admin/core/namespace/list", {})["data"]]
        assert "ci-space" in ids, ids
        # A namespace holding a service is not deleted (the server runs with
        # --namespace-delete-protection here); the reason is shown.
        api.call("POST", "/nacos/v1/ns/instance", {
            "namespaceId": "ci-space", "serviceName": "held", "ip": "10.0.0.9", "port": 1,
            "metadata": json.dumps({"preserved.heart.beat.timeout": "600000",
                                    "preserved.ip.delete.timeout": "600000"}),
        })
        # The same hash again would not re-render: go away and back.
        console.go("#/services", "services")
        console.go("#/namespaces", "namespaces")
        delete = 'tr[data-namespace="ci-space"] .ns-delete'
        console.find(delete).click()
        console.find(delete).click()
        console.notice("still holds 1 service")
        ids = [n["namespace"] for n in api.json("/nacos/v3/admin/core/namespace/list", {})["data"]]
        assert "ci-space" in ids, ids
        api.call("DELETE", "/nacos/v1/ns/instance", {
            "namespaceId": "ci-space", "serviceName": "held", "ip": "10.0.0.9", "port": 1,
        })
        try:
            api.call("DELETE", "/nacos/v1/ns/service", {"namespaceId": "ci-space", "serviceName": "held"})
        except AssertionError as e:  # already gone with its last instance
            assert "not found" in str(e), e
        console.go("#/services", "services")
        console.go("#/namespaces", "namespaces")
        console.find(delete).click()
        console.find(delete).click()
        console.notice("Namespace ci-space deleted")
        ids = [n["namespace"] for n in api.json("/nacos/v3/admin/core/namespace/list", {})["data"]]
        assert "ci-space" not in ids, ids
        assert not console.find_all('tr[data-namespace="public"] .ns-delete')

        if members is not None:
            step("cluster")
            console.go("#/cluster", "cluster")
            addresses = [r.get_attribute("data-address") for r in console.find_all(".member-row")]
            assert addresses == [m["address"] for m in members], (addresses, members)
            console.shot("cluster")

        step("live")
        console.go("#/live", "live")
        console.until("two metric readings", lambda: console.find("#live-body").get_attribute("data-samples"))
        routes = {r.get_attribute("data-route") for r in console.find_all(".op-row")}
        assert {"instance_register", "instance_list"} <= routes, routes
        assert "MiB" in console.find("#live-rss").text, console.find("#live-rss").text
        for junk in ("null", "undefined", "NaN", "[object"):
            assert junk not in console.find("#view").text, f"{junk!r} on the live page"
        console.shot("live")

        step("browser-log")
        severe = console.severe_log()
        assert not severe, severe
    except Exception:
        console.keep_failure(steps[-1] if steps else "start")
        raise
    finally:
        udp.close()


def check_auth(console, api, user, password):
    try:
        print("step: login", flush=True)
        api.call("GET", "/nacos/v1/ns/catalog/services", {}, expect=403)
        console.driver.get(f"{console.base}/nacos/")
        console.until("login form", lambda: console.find("#login-user").is_displayed())
        console.shot("login")
        console.find("#login-user").send_keys(user)
        console.find("#login-password").send_keys("wrong password")
        console.find("#login-submit").click()
        console.notice("Login failed")
        console.find("#login-password").clear()
        console.find("#login-password").send_keys(password)
        console.find("#login-submit").click()
        console.until("services after login",
                      lambda: console.find("#view").get_attribute("data-ready") == "services")
        assert console.find("#logout").is_displayed()
        assert "auth on" in console.find("#server-info").text
    except Exception:
        console.keep_failure("login")
        raise


def check_cluster(console, api):
    try:
        print("step: cluster", flush=True)
        members = api.members()
        assert members and len(members) == 2, members
        console.driver.get(f"{console.base}/nacos/")
        console.until("cluster page offered", lambda: console.find("#nav-cluster").is_displayed())
        assert "cluster" in console.find("#server-info").text, console.find("#server-info").text
        console.find("#nav-cluster").click()
        console.until("two members", lambda: len(console.find_all(".member-row")) == 2)
        addresses = [r.get_attribute("data-address") for r in console.find_all(".member-row")]
        assert addresses == [m["address"] for m in members], (addresses, members)
        console.shot("cluster")
        # The membership controls reach the server: this cluster runs
        # without a Raft group, so the server's refusal shows as it said it.
        assert len(console.find_all(".member-remove")) == 2
        console.find("#member-address").send_keys("127.0.0.1:1")
        console.find("#member-add button").click()
        console.notice("needs the Raft group")
    except Exception:
        console.keep_failure("cluster")
        raise


def main():
    mode, base, artifacts = sys.argv[1:4]
    os.makedirs(artifacts, exist_ok=True)
    api = Api(base)
    console = Console(base, artifacts)
    try:
        if mode == "open":
            check_open(console, api)
        elif mode == "cluster":
            check_cluster(console, api)
        elif mode == "auth":
            check_auth(console, api, sys.argv[4], sys.argv[5])
        else:
            raise SystemExit(f"unknown mode {mode}")
    finally:
        console.driver.quit()
    print(f"console test {mode}: all checks passed", flush=True)


if __name__ == "__main__":
    main()
