//! The users' CI recipe, `scripts/ci-compare.sh`, and its registry's port
//! (issue 36 item 2): a port that is taken ends the run with exit 2 and the
//! "set PORT=..." hint above the bind's own error, and a registry on port 0
//! is found at the address it printed, which answers. The script is run
//! for real with this build's `registry`; `loadgen` and `report` are small
//! shell stand-ins that record what the script gave them (their own
//! behaviour is tested in their crates), so each test takes about a second.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("ci-recipe-{}", std::process::id()))
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Writes an executable shell script.
fn script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::write(path, text).expect("write stand-in");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A `BASE_BIN`/`HEAD_BIN` directory: the real `registry`, and stand-ins for
/// `loadgen` (records `--target`, the status line a GET there got and the
/// registry's pid, and leaves a report file) and `report` (exits 0).
fn binaries(dir: &Path, record: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_registry"), bin.join("registry"))
        .expect("link registry");
    let loadgen = format!(
        r#"#!/usr/bin/env bash
set -eu
target="" out=""
while [ $# -gt 0 ]; do
    case "$1" in --target) target=$2; shift ;; --out) out=$2; shift ;; esac
    shift
done
hostport=${{target#http://}}
exec 3<>"/dev/tcp/${{hostport%:*}}/${{hostport##*:}}"
printf 'GET /nacos/v1/console/health/readiness HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
read -r -t 10 status <&3 || status="no answer in 10 s"
printf '%s %s\n' "$target" "${{status%$'\r'}}" >>'{record}'
mkdir -p "$out" && echo '{{}}' >"$out/run.json"
"#,
        record = record.display()
    );
    script(&bin.join("loadgen"), &loadgen);
    script(&bin.join("report"), "#!/bin/sh\necho '| no regression |'\n");
    bin
}

/// Runs `scripts/ci-compare.sh HEAD HEAD` with both sides' binaries in `bin`
/// (ended after 60 s: a script that waits forever fails instead of hanging).
fn ci_compare(bin: &Path, out: &Path, port: u16) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new("timeout")
        .args(["60", "bash"])
        .arg(root.join("scripts/ci-compare.sh"))
        .args(["HEAD", "HEAD"])
        .env("BASE_BIN", bin)
        .env("HEAD_BIN", bin)
        .env("OUT", out)
        .env("PORT", port.to_string())
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("REGISTRY_LOG", "info")
        .output()
        .expect("run scripts/ci-compare.sh")
}

#[test]
fn a_taken_port_exits_2_with_the_set_port_hint() {
    let dir = scratch("taken");
    let record = dir.join("loadgen-calls");
    let bin = binaries(&dir, &record);
    // Held for the whole run: the registry's bind must meet it.
    let holder = TcpListener::bind("127.0.0.1:0").expect("bind a port to hold");
    let port = holder.local_addr().unwrap().port();
    let run = ci_compare(&bin, &dir.join("out"), port);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "if its port {port} or gRPC's is taken, set PORT=..."
        )),
        "the hint names the port: {stderr}"
    );
    // The registry's own reason follows the hint.
    assert!(
        stderr.to_lowercase().contains("address already in use")
            || stderr.to_lowercase().contains("addrinuse"),
        "the bind error is shown: {stderr}"
    );
    assert!(
        !record.exists(),
        "loadgen must not run against a taken port"
    );
    drop(holder);
}

#[test]
fn a_registry_on_port_0_is_found_where_it_printed_and_answers() {
    let dir = scratch("port0");
    let record = dir.join("loadgen-calls");
    let bin = binaries(&dir, &record);
    let run = ci_compare(&bin, &dir.join("out"), 0);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "stderr:\n{stderr}");
    let calls = std::fs::read_to_string(&record).expect("loadgen ran");
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 2, "one run a side: {calls:?}");
    for call in calls {
        let (target, status) = call.split_once(' ').expect("target and status");
        let port: u16 = target
            .strip_prefix("http://127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("a loopback target with a port: {call}"));
        assert_ne!(port, 0, "the port it got, not the one asked for: {call}");
        assert_eq!(status, "HTTP/1.1 200 OK", "that port answers: {call}");
    }
    let compare = std::fs::read_to_string(dir.join("out/compare.md")).expect("compare.md");
    assert!(compare.contains("no regression"), "{compare}");
}
