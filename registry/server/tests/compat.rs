//! Compatibility: the real Nacos client libraries, driven against our
//! server over real sockets. `scripts/deps/clients.sh` installs them into
//! `target/compat`; these tests fail (never skip) when they are missing.

use crate::common;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use common::TestServer;
use registry_server::Config;

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

/// Fails with one line naming the install script unless `path` exists and
/// `probe` (a command proving the client loads) succeeds.
fn require(path: PathBuf, what: &str, probe: &[&str]) -> PathBuf {
    let works = path.exists()
        && probe.split_first().is_none_or(|(cmd, args)| {
            std::process::Command::new(cmd)
                .args(args)
                .env("NODE_PATH", compat_dir().join("node/node_modules"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
    assert!(
        works,
        "{what} is not installed at {}: run scripts/deps/clients.sh (scripts/test.sh does)",
        path.display()
    );
    path
}

async fn run(mut cmd: tokio::process::Command, limit: Duration) -> Output {
    cmd.kill_on_drop(true);
    tokio::time::timeout(limit, cmd.output())
        .await
        .expect("client script finished in time")
        .expect("client script started")
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

fn node(script_name: &str) -> tokio::process::Command {
    let modules = require(
        compat_dir().join("node/node_modules/nacos"),
        "Node nacos@2.6.3",
        &["node", "-e", "require('nacos')"],
    );
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script(script_name))
        .env("NODE_PATH", modules.parent().expect("node_modules"));
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_nacos_sdk_1_0_0() {
    let venv_python = compat_dir().join("venv/bin/python");
    let probe = venv_python.to_string_lossy().into_owned();
    let python = require(
        venv_python,
        "Python nacos-sdk-python==1.0.0",
        &[&probe, "-c", "import nacos"],
    );
    let server = TestServer::with(Config {
        beat_timeout_ms: 1_500,
        delete_timeout_ms: 3_000,
        sweep_interval_ms: 100,
        ..Config::for_test()
    })
    .await;
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(script("python_client.py"))
        .arg(server.http_addr.to_string())
        .arg("1500")
        .arg("3000");
    let out = run(cmd, Duration::from_secs(60)).await;
    assert_passed(&out, "python client: all checks passed");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_nacos_2_6_3() {
    // An interval other than Nacos's default 5000 proves the client read
    // it from our beat response rather than falling back.
    let server = TestServer::with(Config {
        beat_interval_ms: 4_000,
        ..Config::for_test()
    })
    .await;
    let mut cmd = node("node_client.js");
    cmd.arg(server.http_addr.to_string()).arg("4000");
    let out = run(cmd, Duration::from_secs(60)).await;
    assert_passed(&out, "node client: all checks passed");
    // Every deregistration arrived, including the last ones the client cannot observe.
    assert_eq!(server.app.store.stats().instances, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_subscription_receives_pushes_and_acks_them() {
    let server = TestServer::spawn().await;
    let mut cmd = node("node_subscribe.js");
    cmd.arg(server.http_addr.to_string());
    let out = run(cmd, Duration::from_secs(60)).await;
    assert_passed(&out, "node subscribe: all checks passed");
    let push = &server.app.metrics.push;
    // Three changes after the subscription, each pushed and acked.
    assert!(
        push.acked.get() >= 3,
        "acked {} pushes, sent {}",
        push.acked.get(),
        push.sent.get()
    );
    assert_eq!(push.failed.get(), 0);
    server.stop().await;
}
