//! The web console at `/nacos/`: its endpoints over real HTTP, and the
//! pages driven in a real headless Chromium through WebDriver.
//!
//! The browser part runs `tests/console/console_test.py` with Selenium
//! (`scripts/deps/selenium.sh`) against Debian's Chromium and chromedriver
//! (`scripts/deps/chromium.sh`). It fails, never skips, when they are
//! missing, naming the script that installs them. Screenshots of each page
//! are kept under `target/tmp/console/`; after a failure also the failing
//! page, its HTML and the browser log.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::TestServer;
use registry_core::ServiceRef;
use registry_proto::http1::Method;
use registry_server::auth::{hash_password, MIN_ITERATIONS};
use registry_server::{run_app, App, Config, Listeners};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

fn selenium_python() -> PathBuf {
    for (tool, script) in [
        (CHROMIUM, "scripts/deps/chromium.sh"),
        (CHROMEDRIVER, "scripts/deps/chromium.sh"),
    ] {
        assert!(
            Path::new(tool).exists(),
            "{tool} not found: run {script} (the console test needs a real browser)"
        );
    }
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/compat/selenium-venv/bin/python");
    assert!(
        python.exists(),
        "Selenium not found at {}: run scripts/deps/selenium.sh",
        python.display()
    );
    python
}

fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console")
}

/// Runs the browser script in `mode`; panics with its output unless it
/// reports success.
async fn browser(mode: &str, base: &str, extra: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/console/console_test.py");
    let mut cmd = tokio::process::Command::new(selenium_python());
    cmd.arg(script)
        .arg(mode)
        .arg(base)
        .arg(artifacts())
        .args(extra)
        // Never let Selenium Manager look for (or download) a driver.
        .env("SE_OFFLINE", "true")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("browser test finished within 180 s")
        .expect("browser test started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("console test {mode}: all checks passed")),
        "browser test {mode} failed ({}); artifacts in {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status,
        artifacts().display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_a_real_browser() {
    selenium_python();
    // With the delete protection on, so that the namespace page's refusal
    // (and the reason it shows) is seen; Nacos itself deletes such a
    // namespace, as the server does by default.
    let server = TestServer::with(Config {
        namespace_delete_protection: true,
        ..Config::for_test()
    })
    .await;
    browser("open", &server.base(), &[]).await;

    // What the browser did, read back from the store itself: 10.0.0.2 was
    // disabled on the service page, 10.0.0.1 by "IP offline everywhere",
    // 10.0.0.3 deregistered; the service settings were saved.
    let store = &server.app.store;
    let orders = store
        .snapshot(ServiceRef::new("public", "DEFAULT_GROUP@@orders"))
        .expect("orders");
    let states: Vec<(String, bool, f64)> = orders
        .instances()
        .iter()
        .map(|i| (i.ip.to_string(), i.enabled, i.weight))
        .collect();
    assert_eq!(
        states,
        vec![
            ("10.0.0.1".to_string(), false, 5.0),
            ("10.0.0.2".to_string(), false, 1.0),
        ]
    );
    assert_eq!(orders.protect_threshold(), 0.25);
    assert_eq!(orders.metadata().get("owner"), Some("team-a"));
    let payments = store
        .snapshot(ServiceRef::new("public", "BILLING@@payments"))
        .expect("payments");
    let enabled: Vec<(String, bool)> = payments
        .instances()
        .iter()
        .map(|i| (i.ip.to_string(), i.enabled))
        .collect();
    assert_eq!(
        enabled,
        vec![
            ("10.0.0.1".to_string(), false),
            ("10.0.0.4".to_string(), true)
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_login_in_a_real_browser() {
    selenium_python();
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    let password = "console test password";
    std::fs::write(
        &users,
        format!(
            "operator:{}\n",
            hash_password(password, MIN_ITERATIONS).expect("hash")
        ),
    )
    .expect("users file");
    let server = TestServer::with(Config {
        auth_users: Some(users),
        ..Config::for_test()
    })
    .await;
    browser("auth", &server.base(), &["operator", password]).await;
    server.stop().await;
}

/// Two registries clustered in this process: the console offers the
/// Cluster page, listing both members as the members endpoint does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_page_in_a_real_browser() {
    selenium_python();
    let bound: Vec<Listeners> = (0..2)
        .map(|_| Listeners::bind(&Config::for_test()).expect("bind"))
        .collect();
    let members: Vec<String> = bound.iter().map(|l| l.http_addr().to_string()).collect();
    let mut stops = Vec::new();
    let mut tasks = Vec::new();
    for (listeners, me) in bound.into_iter().zip(&members) {
        let config = Config {
            members: members.clone(),
            advertise: Some(me.clone()),
            ..Config::for_test()
        };
        let app = Arc::new(App::new(config).expect("clustered config"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tasks.push(tokio::spawn(run_app(app, listeners, async {
            let _ = stopped.await;
        })));
        stops.push(stop);
    }
    browser("cluster", &format!("http://{}", members[0]), &[]).await;
    for stop in stops {
        let _ = stop.send(());
    }
    for t in tasks {
        t.await.expect("server task").expect("server result");
    }
}

/// Registers `ip:port` in `service` through the Nacos API.
async fn register(server: &TestServer, service: &str, ip: &str, metadata: &str) {
    let r = server
        .call(
            Method::Post,
            &format!(
                "/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port=80&metadata={metadata}"
            ),
        )
        .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
}

#[tokio::test]
async fn pages_and_assets_are_served_with_their_headers() {
    let server = TestServer::spawn().await;
    for path in ["/nacos", "/nacos/", "/nacos/index.html"] {
        let r = server.call(Method::Get, path).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(r.body.contains("/nacos/console/app.js"), "{path}");
    }
    let r = server.call(Method::Get, "/nacos/console/app.js").await;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("import"));
    let r = server.call(Method::Get, "/nacos/console/missing.js").await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (404, "Not Found: /nacos/console/missing.js")
    );
    let r = server
        .call(Method::Post, "/nacos/v1/ns/catalog/services")
        .await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (405, "no such api:POST:/nacos/v1/ns/catalog/services")
    );
    // The naming API is untouched by the console's routes.
    let r = server.call(Method::Get, "/nacos/v1/ns/catalog").await;
    assert_eq!(r.status, 501);
    server.stop().await;
}

#[tokio::test]
async fn catalog_pages_search_sort_and_count() {
    let server = TestServer::spawn().await;
    for (service, ip) in [
        ("beta", "10.0.0.1"),
        ("alpha", "10.0.0.1"),
        ("alpha", "10.0.0.2"),
        ("gamma", "10.0.0.3"),
        ("ALPHABET", "10.0.0.1"),
    ] {
        register(&server, service, ip, "%7B%7D").await;
    }
    let page = |q: &str| {
        let target = format!("/nacos/v1/ns/catalog/services?{q}");
        let server = &server;
        async move { server.call(Method::Get, &target).await.json() }
    };
    let all = page("pageSize=2").await;
    assert_eq!(all["count"], 4);
    let names: Vec<&str> = all["serviceList"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ALPHABET", "alpha"]);
    let second = page("pageSize=2&pageNo=2").await;
    assert_eq!(second["serviceList"][0]["name"], "beta");
    let found = page("serviceNameParam=alp").await;
    assert_eq!(found["count"], 2);
    assert_eq!(found["serviceList"][1]["name"], "alpha");
    assert_eq!(found["serviceList"][1]["ipCount"], 2);
    assert_eq!(found["serviceList"][1]["healthyInstanceCount"], 2);
    assert_eq!(found["serviceList"][1]["subscriberCount"], 0);
    assert_eq!(page("groupNameParam=nope").await["count"], 0);

    let ip = server
        .call(Method::Get, "/nacos/v1/console/instances?ip=10.0.0.1")
        .await
        .json();
    assert_eq!(ip["count"], 3);
    let ns = server
        .call(Method::Get, "/nacos/v1/console/namespaces")
        .await
        .json();
    assert_eq!(ns["data"][0]["namespace"], "public");
    assert_eq!(ns["data"][0]["serviceCount"], 4);
    let inst = server
        .call(
            Method::Get,
            "/nacos/v1/ns/catalog/instances?serviceName=alpha&pageSize=1&pageNo=2",
        )
        .await
        .json();
    assert_eq!(inst["count"], 2);
    assert_eq!(inst["list"][0]["ip"], "10.0.0.2");
    assert!(inst["list"][0]["lastBeat"].as_u64().unwrap() > 0);

    // A search reads the store's own index: a service created just now is
    // found by the very next search, and the namespace count follows.
    register(&server, "delta", "10.0.0.4", "%7B%7D").await;
    let found = page("serviceNameParam=delta").await;
    assert_eq!(found["count"], 1, "{found}");
    assert_eq!(found["serviceList"][0]["ipCount"], 1);
    let ns = server
        .call(Method::Get, "/nacos/v1/console/namespaces")
        .await
        .json();
    assert_eq!(ns["data"][0]["serviceCount"], 5);
    server.stop().await;
}

#[tokio::test]
async fn bad_console_input_gets_a_clear_error_and_changes_nothing() {
    let server = TestServer::spawn().await;
    register(&server, "alpha", "10.0.0.1", "%7B%7D").await;
    let before = server.app.store.stats();
    for (target, status, text) in [
        (
            "/nacos/v1/ns/catalog/services?pageNo=0",
            400,
            "pageNo must be an integer within [1, 100000], got: 0",
        ),
        (
            "/nacos/v1/ns/catalog/services?pageSize=99999",
            400,
            "pageSize must be an integer within [1, 500], got: 99999",
        ),
        (
            "/nacos/v1/ns/catalog/instances?serviceName=alpha&pageSize=x",
            400,
            "pageSize must be an integer within [1, 1000], got: x",
        ),
        (
            "/nacos/v1/ns/catalog/service?serviceName=missing",
            404,
            "no service DEFAULT_GROUP@@missing found!",
        ),
        (
            "/nacos/v1/ns/catalog/service",
            400,
            "Param 'serviceName' is required.",
        ),
        (
            "/nacos/v1/console/instances",
            400,
            "Param 'ip' is required.",
        ),
        (
            "/nacos/v1/console/instances?ip=999.1.1.1",
            400,
            "ip is not an IP address: 999.1.1.1",
        ),
        (
            "/nacos/v1/ns/catalog/services?serviceNameParam=%ZZ",
            400,
            "",
        ),
    ] {
        let r = server.call(Method::Get, target).await;
        assert_eq!(r.status, status, "{target}: {}", r.body);
        if !text.is_empty() {
            assert_eq!(r.body, text, "{target}");
        }
    }
    assert_eq!(server.app.store.stats(), before);
    server.stop().await;
}

#[tokio::test]
async fn with_auth_the_data_needs_a_token_and_the_pages_do_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    std::fs::write(
        &users,
        format!(
            "op:{}\n",
            hash_password("pw", MIN_ITERATIONS).expect("hash")
        ),
    )
    .expect("users");
    let server = TestServer::with(Config {
        auth_users: Some(users),
        ..Config::for_test()
    })
    .await;
    assert_eq!(server.call(Method::Get, "/nacos/").await.status, 200);
    let state = server
        .call(Method::Get, "/nacos/v1/console/server/state")
        .await
        .json();
    assert_eq!(state["auth_enabled"], true);
    for target in [
        "/nacos/v1/ns/catalog/services",
        "/nacos/v1/console/namespaces",
        "/nacos/v1/ns/service/subscribers?serviceName=a",
        "/nacos/v1/ns/catalog/services?accessToken=forged",
    ] {
        assert_eq!(
            server.call(Method::Get, target).await.status,
            403,
            "{target}"
        );
    }
    let login = server
        .call_form(
            Method::Post,
            "/nacos/v1/auth/login",
            "username=op&password=pw",
        )
        .await
        .json();
    let token = login["accessToken"].as_str().expect("token");
    let r = server
        .call(
            Method::Get,
            &format!("/nacos/v1/ns/catalog/services?accessToken={token}"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    server.stop().await;
}
