//! Access control through the real binary: the real Python client's
//! username/password path accepted and refused, raw requests without or
//! with bad tokens refused with Nacos's texts, the `User-Agent: Nacos-Server`
//! bypass absent, tokens expiring, and tokens outliving a `kill -9` restart
//! on the same data directory.
//!
//! `scripts/deps/clients.sh` installs the Python client into
//! `target/compat`; the test fails (never skips) when it is missing.

use crate::binary;

use std::path::{Path, PathBuf};
use std::time::Duration;

use binary::{Conn, Registry};
use registry_proto::http1::Method;
use registry_server::auth::{hash_password, MIN_ITERATIONS};

const USER: &str = "alice";
const PASSWORD: &str = "correct horse battery staple";

fn python() -> PathBuf {
    let dir = std::env::var_os("NACOS_COMPAT_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/compat"),
        PathBuf::from,
    );
    let python = dir.join("venv/bin/python");
    assert!(
        python.exists(),
        "Python nacos-sdk-python==1.0.0 not found at {}: run scripts/deps/clients.sh",
        python.display()
    );
    python
}

fn users_file(dir: &Path) -> PathBuf {
    let path = dir.join("users");
    let line = format!(
        "# test users\n{USER}:{}\n",
        hash_password(PASSWORD, MIN_ITERATIONS).expect("hash")
    );
    std::fs::write(&path, line).expect("write users");
    path
}

async fn python_client(reg: &Registry, mode: &str, credentials: &[&str]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/compat/python_auth.py");
    let mut cmd = tokio::process::Command::new(python());
    cmd.arg(script)
        .arg(reg.addr.to_string())
        .arg(mode)
        .args(credentials)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("client finished in time")
        .expect("client started");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("python auth {mode}: all checks passed")),
        "python auth {mode} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn login(reg: &Registry, password: &str) -> (u16, String) {
    reg.call(
        Method::Post,
        &format!(
            "/nacos/v1/auth/login?username={USER}&password={}",
            password.replace(' ', "+")
        ),
    )
    .await
}

async fn token(reg: &Registry) -> String {
    let (status, body) = login(reg, PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    v["accessToken"].as_str().expect("accessToken").to_owned()
}

const LIST: &str = "/nacos/v1/ns/instance/list?serviceName=auth-raw";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_with_and_without_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let users = users_file(dir.path());
    let users = users.to_str().expect("utf-8 path");
    let reg = Registry::start(&["--auth-users", users], &dir.path().join("registry.log")).await;
    python_client(&reg, "ok", &[USER, PASSWORD]).await;
    python_client(&reg, "wrong", &[USER, "not the password"]).await;
    python_client(&reg, "none", &[]).await;
    reg.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_need_a_valid_token_and_nothing_else_opens_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let users = users_file(dir.path());
    let data = dir.path().join("data");
    let args = [
        "--auth-users",
        users.to_str().expect("utf-8 path"),
        "--auth-token-ttl-secs",
        "2",
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        "--health-check-interval-ms",
        "0",
    ];
    let mut reg = Registry::start(&args, &dir.path().join("run1.log")).await;

    // No token, on reads, writes and the operator API.
    for (method, target) in [
        (Method::Get, LIST),
        (
            Method::Post,
            "/nacos/v1/ns/instance?serviceName=auth-raw&ip=127.0.0.1&port=1",
        ),
        (
            Method::Put,
            "/nacos/v1/ns/instance/beat?serviceName=auth-raw&ip=127.0.0.1&port=1",
        ),
        (Method::Get, "/nacos/v1/ns/operator/metrics"),
    ] {
        assert_eq!(
            reg.call(method, target).await,
            (403, "user not found!".to_owned()),
            "{target}"
        );
    }
    // Nacos's old bypasses: a server User-Agent and identity header open nothing.
    let mut conn = Conn::open(reg.addr).await.expect("connect");
    let forged = format!(
        "GET {LIST} HTTP/1.1\r\nHost: {}\r\nUser-Agent: Nacos-Server:v1.4.8\r\n\
         serverIdentity: security\r\n\r\n",
        reg.addr
    );
    assert_eq!(
        conn.send(forged.as_bytes()).await.expect("response"),
        (403, "user not found!".to_owned())
    );

    // A wrong password or an unknown user: the same refusal.
    assert_eq!(
        login(&reg, "guess").await,
        (403, "unknown user!".to_owned())
    );
    let (status, body) = reg
        .call(
            Method::Post,
            "/nacos/v1/auth/login?username=bob&password=guess",
        )
        .await;
    assert_eq!((status, body.as_str()), (403, "unknown user!"));

    // The right one: Nacos's reply, and the token opens the API.
    let (status, body) = login(&reg, PASSWORD).await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["tokenTtl"], 2, "{v}");
    assert_eq!(v["globalAdmin"], false, "{v}");
    let token = v["accessToken"].as_str().expect("accessToken").to_owned();
    let (status, _) = reg
        .call(Method::Get, &format!("{LIST}&accessToken={token}"))
        .await;
    assert_eq!(status, 200);
    // Also as a form parameter.
    let mut conn = Conn::open(reg.addr).await.expect("connect");
    let form = format!("accessToken={token}");
    let post = format!(
        "POST /nacos/v1/ns/instance?serviceName=auth-raw&ip=127.0.0.1&port=2&ephemeral=false HTTP/1.1\r\n\
         Host: {}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        reg.addr,
        form.len()
    );
    assert_eq!(
        conn.send(post.as_bytes()).await.expect("response"),
        (200, "ok".to_owned())
    );

    // Altered tokens are refused.
    let mut altered = token.clone().into_bytes();
    let last = altered.len() - 1;
    altered[last] = if altered[last] == b'0' { b'1' } else { b'0' };
    let altered = String::from_utf8(altered).expect("hex");
    assert_eq!(
        reg.call(Method::Get, &format!("{LIST}&accessToken={altered}"))
            .await,
        (403, "token invalid!".to_owned())
    );
    assert_eq!(
        reg.call(Method::Get, &format!("{LIST}&accessToken=x"))
            .await,
        (403, "token invalid!".to_owned())
    );
    // Prometheus scrapes without a token.
    let (status, metrics) = reg.call(Method::Get, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("registry_auth_refused_total"), "{metrics}");

    // The token survives a kill -9 restart on the same data directory...
    reg.kill9().await;
    let reg = Registry::start(&args, &dir.path().join("run2.log")).await;
    let (status, body) = reg
        .call(Method::Get, &format!("{LIST}&accessToken={token}"))
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"port\":2"),
        "the persistent instance is back: {body}"
    );
    // ... and expires after its TTL: the real binary's wall clock, so the
    // test polls for it (bounded) rather than sleeping a guessed time.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = reg
            .call(Method::Get, &format!("{LIST}&accessToken={token}"))
            .await;
        if answer.0 == 403 {
            assert_eq!(answer, (403, "token expired!".to_owned()));
            break;
        }
        assert_eq!(answer.0, 200, "{}", answer.1);
        assert!(
            std::time::Instant::now() < deadline,
            "the token never expired"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let fresh = token_for_check(&reg).await;
    assert_ne!(fresh, token);
    reg.terminate().await;
}

async fn token_for_check(reg: &Registry) -> String {
    let t = token(reg).await;
    let (status, _) = reg
        .call(Method::Get, &format!("{LIST}&accessToken={t}"))
        .await;
    assert_eq!(status, 200);
    t
}
