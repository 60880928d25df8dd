//! `registry users add|remove` through the real binary: the password from
//! standard input, the file replaced with mode 0600, and a server started
//! on the file letting the user in with that password and no other.

use crate::binary;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Output, Stdio};

use binary::Registry;
use registry_proto::http1::Method;

/// Runs `registry users ARGS` with `stdin` as its standard input.
fn users(args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_registry"))
        .arg("users")
        .args(args)
        .env_remove("REGISTRY_AUTH_USERS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start registry users");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write the password");
    child.wait_with_output().expect("registry users ran")
}

fn text(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn login(reg: &Registry, user: &str, password: &str) -> u16 {
    reg.call(
        Method::Post,
        &format!("/nacos/v1/auth/login?username={user}&password={password}"),
    )
    .await
    .0
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_added_from_stdin_can_log_in_and_removed_ones_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("users");
    let file_arg = file.to_str().unwrap();
    let iterations = ["--iterations", "10000"];

    let out = users(
        &[&["add", "alice", "--file", file_arg], &iterations[..]].concat(),
        "s3cret\n",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("added user alice"),
        "{}",
        text(&out)
    );
    assert_eq!(mode(&file), 0o600);
    let out = users(
        &[&["add", "bob", "--file", file_arg], &iterations[..]].concat(),
        "hunter2\n",
    );
    assert!(out.status.success(), "{}", text(&out));
    // Bad input: one clear line, exit 1, the file left as it was.
    let before = std::fs::read_to_string(&file).unwrap();
    let out = users(&["add", "no way", "--file", file_arg], "x\n");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("user names are"),
        "{}",
        text(&out)
    );
    let out = users(&["add", "carol", "--file", file_arg], "\n");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("password is empty"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    let reg = Registry::start(&["--auth-users", file_arg], &dir.path().join("run1.log")).await;
    assert_eq!(login(&reg, "alice", "s3cret").await, 200);
    assert_eq!(login(&reg, "bob", "hunter2").await, 200);
    assert_eq!(login(&reg, "alice", "hunter2").await, 403);
    reg.terminate().await;

    let out = users(&["remove", "bob", "--file", file_arg], "");
    assert!(out.status.success(), "{}", text(&out));
    let out = users(&["remove", "bob", "--file", file_arg], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no user bob"),
        "{}",
        text(&out)
    );
    assert_eq!(mode(&file), 0o600);

    let reg = Registry::start(&["--auth-users", file_arg], &dir.path().join("run2.log")).await;
    assert_eq!(login(&reg, "alice", "s3cret").await, 200);
    assert_eq!(login(&reg, "bob", "hunter2").await, 403);
    reg.terminate().await;
}
