//! Compatibility with real Nacos 2.x clients over gRPC: the Python
//! `nacos-sdk-python==3.2.0` (run as a script, installed by
//! `scripts/deps/clients.sh`; the test fails, never skips, when it is missing) and
//! the Rust `nacos-sdk` 0.8 crate (in-process), plus a mixed test where a 1.x client
//! (Python 1.0.0, HTTP) and a 2.x client (Rust, gRPC) see each other's instances.

use crate::common;

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::TestServer;
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, NamingServiceBuilder, ServiceInstance,
};
use nacos_sdk::api::props::ClientProps;
use registry_core::ServiceRef;
use tokio::io::{AsyncBufReadExt, BufReader};

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

fn python(venv: &str, what: &str) -> PathBuf {
    let path = compat_dir().join(venv).join("bin/python");
    assert!(
        path.exists(),
        "{what} not found at {}: run scripts/deps/clients.sh (the test command does)",
        path.display()
    );
    path
}

fn assert_passed(out: &Output, marker: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(marker),
        "client script failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

fn ports(server: &TestServer, grouped: &str) -> Vec<u16> {
    let mut p: Vec<u16> = server
        .app
        .store
        .snapshot(ServiceRef::new("public", grouped))
        .map(|s| s.instances().iter().map(|i| i.port).collect())
        .unwrap_or_default();
    p.sort_unstable();
    p
}

async fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nacos_sdk_3_2_0_over_grpc() {
    let python = python("venv-grpc", "Python nacos-sdk-python==3.2.0");
    let server = TestServer::spawn().await;
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script("python_grpc_client.py"))
        .arg(server.http_addr.to_string())
        .arg(server.grpc_addr.port().to_string())
        .arg("py-grpc")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("client script finished in time")
        .expect("client script started");
    assert_passed(&out, "PASS");
    // The writer closed with one instance left; the close removed it.
    assert!(ports(&server, "DEFAULT_GROUP@@py-grpc").is_empty());
    assert_eq!(server.app.grpc.hub.len(), 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nacos_sdk_3_2_0_with_auth_on() {
    const USER: &str = "alice";
    const PASSWORD: &str = "correct horse battery staple";
    let python = python("venv-grpc", "Python nacos-sdk-python==3.2.0");
    let dir = tempfile::tempdir().expect("tempdir");
    let users = dir.path().join("users");
    let hash =
        registry_server::auth::hash_password(PASSWORD, registry_server::auth::MIN_ITERATIONS)
            .expect("hash");
    std::fs::write(&users, format!("{USER}:{hash}\n")).expect("write users");
    let server = TestServer::with(registry_server::Config {
        auth_users: Some(users),
        ..registry_server::Config::for_test()
    })
    .await;
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script("python_grpc_auth.py"))
        .arg(server.http_addr.to_string())
        .arg(server.grpc_addr.port().to_string())
        .arg("py-grpc-auth")
        .args([USER, PASSWORD])
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("client script finished in time")
        .expect("client script started");
    assert_passed(&out, "PASS");
    // The refused register was counted and never applied; the accepted one was
    // removed when its client closed.
    assert!(server.app.grpc.metrics.refused.get() >= 1);
    assert!(ports(&server, "DEFAULT_GROUP@@py-grpc-auth").is_empty());
    server.stop().await;
}

/// Collects the instance lists a Rust client's subscription callback receives.
#[derive(Default)]
struct Seen(Mutex<Vec<Vec<u16>>>);

impl NamingEventListener for Seen {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let mut ports: Vec<u16> = event
            .instances
            .iter()
            .flatten()
            .map(|i| i.port as u16)
            .collect();
        ports.sort_unstable();
        self.0.lock().unwrap().push(ports);
    }
}

impl Seen {
    fn last_is(&self, ports: &[u16]) -> bool {
        self.0.lock().unwrap().last().is_some_and(|l| l == ports)
    }
}

async fn rust_client(server: &TestServer) -> NamingService {
    NamingServiceBuilder::new(
        ClientProps::new()
            .server_addr(server.http_addr.to_string())
            .remote_grpc_port(server.grpc_addr.port())
            .namespace("")
            .env_first(false)
            .naming_push_empty_protection(false)
            .app_name("registry-compat"),
    )
    .build()
    .await
    .expect("nacos-sdk client")
}

fn sdk_instance(port: i32) -> ServiceInstance {
    ServiceInstance {
        ip: "127.0.0.1".into(),
        port,
        ..ServiceInstance::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_nacos_sdk_0_8_over_grpc() {
    let server = TestServer::spawn().await;
    let writer = rust_client(&server).await;
    let watcher = rust_client(&server).await;
    let seen = Arc::new(Seen::default());
    watcher
        .subscribe("rs-grpc".into(), None, Vec::new(), seen.clone())
        .await
        .expect("subscribe");

    writer
        .register_instance("rs-grpc".into(), None, sdk_instance(8080))
        .await
        .expect("register");
    // The callback sees the change within 1 s of the write.
    eventually("callback sees [8080]", Duration::from_secs(1), || {
        seen.last_is(&[8080])
    })
    .await;
    let all = writer
        .get_all_instances("rs-grpc".into(), None, Vec::new(), false)
        .await
        .expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].port, 8080);
    let (names, count) = writer
        .get_service_list(1, 10, None)
        .await
        .expect("service list");
    assert!(
        count >= 1 && names.contains(&"rs-grpc".to_owned()),
        "{names:?}"
    );

    writer
        .batch_register_instance(
            "rs-grpc".into(),
            None,
            vec![sdk_instance(8080), sdk_instance(8081)],
        )
        .await
        .expect("batch register");
    eventually("callback sees [8080, 8081]", Duration::from_secs(1), || {
        seen.last_is(&[8080, 8081])
    })
    .await;
    writer
        .deregister_instance("rs-grpc".into(), None, sdk_instance(8081))
        .await
        .expect("deregister");
    eventually("callback sees [8080]", Duration::from_secs(1), || {
        seen.last_is(&[8080])
    })
    .await;
    assert_eq!(ports(&server, "DEFAULT_GROUP@@rs-grpc"), vec![8080]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1x_client_and_a_2x_client_see_each_other() {
    let python = python("venv", "Python nacos-sdk-python==1.0.0");
    let server = TestServer::spawn().await;
    let sdk = rust_client(&server).await;
    let seen = Arc::new(Seen::default());
    sdk.subscribe("mixed".into(), None, Vec::new(), seen.clone())
        .await
        .expect("subscribe");
    sdk.register_instance("mixed".into(), None, sdk_instance(7070))
        .await
        .expect("register over gRPC");

    // The 1.x client registers 9090 over HTTP and waits to see 7070 in its list.
    let mut child = tokio::process::Command::new(python)
        .arg(script("python_mixed_v1.py"))
        .arg(server.http_addr.to_string())
        .arg("mixed")
        .arg("7070")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("1.x client started");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("1.x client answered in time")
        .expect("read")
        .unwrap_or_default();
    assert!(first.starts_with("SEEN"), "1.x client: {first}");
    // The 2.x subscriber was pushed the 1.x registration.
    eventually(
        "2.x callback sees [7070, 9090]",
        Duration::from_secs(5),
        || seen.last_is(&[7070, 9090]),
    )
    .await;
    // The 1.x client deregisters when its stdin closes; the 2.x side is pushed that.
    drop(child.stdin.take());
    let done = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("1.x client finished in time")
        .expect("read")
        .unwrap_or_default();
    assert_eq!(done, "DONE");
    eventually("2.x callback sees [7070]", Duration::from_secs(5), || {
        seen.last_is(&[7070])
    })
    .await;
    let _ = child.wait().await;
    server.stop().await;
}
