//! Compatibility of the admin tools: the 3.x maintainer SDK
//! (`nacos-maintainer-sdk-python`) over the v3 admin API and a v1 admin
//! client (`use-nacos`) over v1, driven against our server over real
//! sockets. `scripts/deps/clients.sh` installs both into `target/compat`;
//! these tests fail (never skip) when they are missing.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::TestServer;
use registry_proto::http1::Method;

fn compat_dir() -> PathBuf {
    std::env::var_os("NACOS_COMPAT_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/compat"),
        PathBuf::from,
    )
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/compat")
        .join(name)
}

/// The venv's Python, failing with one line naming the install script
/// unless `module` imports in it.
fn python(venv: &str, module: &str, what: &str) -> PathBuf {
    let python = compat_dir().join(venv).join("bin/python");
    let works = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    assert!(
        works,
        "{what} is not installed at {}: run scripts/deps/clients.sh (scripts/test.sh does)",
        python.display()
    );
    python
}

async fn run_script(python: PathBuf, name: &str, args: &[String], marker: &str) {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script(name)).args(args).kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("client script finished in time")
        .expect("client script started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(marker),
        "client script failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// The `billing` service of namespace `ops`, registered through two other
/// doors (v1 and v2), for the tools to find.
async fn seed(s: &TestServer, create_namespace: bool) {
    if create_namespace {
        let r = s
            .call(
                Method::Post,
                "/nacos/v1/console/namespaces?customNamespaceId=ops&namespaceName=Ops",
            )
            .await;
        assert_eq!(r.body, "true");
    }
    let r = s
        .call(
            Method::Post,
            "/nacos/v1/ns/instance?serviceName=billing&ip=10.2.0.1&port=7001&namespaceId=ops",
        )
        .await;
    assert_eq!(r.body, "ok");
    let r = s
        .call(
            Method::Post,
            "/nacos/v2/ns/instance?serviceName=billing&ip=10.2.0.1&port=7002&namespaceId=ops",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_maintainer_sdk_python_0_5_3() {
    let python = python(
        "venv-maintainer",
        "maintainer.transport.client_http_proxy",
        "nacos-maintainer-sdk-python==0.5.3",
    );
    let s = TestServer::spawn().await;
    seed(&s, false).await;
    run_script(
        python,
        "python_maintainer.py",
        &[s.http_addr.to_string()],
        "maintainer sdk: all checks passed",
    )
    .await;
    // The update went through the write path: the store holds it.
    let r = s
        .call(
            Method::Get,
            "/nacos/v1/ns/instance?serviceName=billing&ip=10.2.0.1&port=7001&namespaceId=ops",
        )
        .await;
    assert_eq!(r.json()["weight"], 7.0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_nacos_0_1_6() {
    let python = python("venv-admin", "use_nacos", "use-nacos==0.1.6");
    let s = TestServer::spawn().await;
    seed(&s, true).await;
    run_script(
        python,
        "python_use_nacos.py",
        &[format!("http://{}", s.http_addr)],
        "use-nacos: all checks passed",
    )
    .await;
    // Both deleted, `ops` with its services still in it (Nacos 3's
    // NamespaceOperationService.removeNamespace).
    assert!(!s.app.namespaces.table().exists("ops"));
    assert!(!s.app.namespaces.table().exists("lab"));
    assert!(s.app.store.stats().instances >= 2, "the services stay");
    s.stop().await;
}

/// Issue 32's round trip: the maintainer SDK takes a 2.x client's instance
/// offline and reweights it; the client's re-register and a redo on a new
/// connection keep the operator's layer; a 1.x client registering the same
/// address keeps it too (`InstanceOperatorClientImpl.updateInstance`,
/// `ServiceStorage.parseInstance`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_change_outlives_the_clients_re_registration() {
    let python = python(
        "venv-maintainer",
        "maintainer.transport.client_http_proxy",
        "nacos-maintainer-sdk-python==0.5.3",
    );
    let s = TestServer::spawn().await;
    run_script(
        python,
        "python_maintainer_layer.py",
        &[s.http_addr.to_string(), s.grpc_addr.port().to_string()],
        "layer: all checks passed",
    )
    .await;
    // A 1.x client registers the address; the operator disables it; the
    // client registers again, as its beat's 20404 makes it do.
    let register = "/nacos/v1/ns/instance?serviceName=layered&ip=127.0.0.1&port=7100&weight=1";
    assert_eq!(s.call(Method::Post, register).await.body, "ok");
    let r = s
        .call(
            Method::Put,
            "/nacos/v3/admin/ns/instance/partial?serviceName=layered&ip=127.0.0.1&port=7100&weight=4&enabled=false",
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(s.call(Method::Post, register).await.body, "ok");
    let r = s
        .call(
            Method::Get,
            "/nacos/v3/admin/ns/instance?serviceName=layered&ip=127.0.0.1&port=7100",
        )
        .await;
    let one = &r.json()["data"];
    assert_eq!(
        (one["weight"].as_f64(), one["enabled"].as_bool()),
        (Some(4.0), Some(false)),
        "{one}"
    );
    s.stop().await;
}
