//! A full data directory is an error, not a loss: each node's `--data-dir`
//! on a small tmpfs this test mounts, filled to the last byte by another
//! writer. Persistent writes are then refused with a clear error (HTTP 507
//! alone, the leader's refusal in a Raft cluster) and nothing of them is
//! applied; every write acknowledged before is kept (across a restart too);
//! writes are accepted again once the space is freed, and a follower whose
//! disk was full catches up.
//!
//! Mounting needs root (CAP_SYS_ADMIN), as CI has: without it the tests
//! fail saying why, unless `REGISTRY_TESTS_UNPRIVILEGED=1` asks them to
//! skip (printed) on a machine without root.

use crate::binary;
use crate::cluster_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use binary::Registry;
use cluster_support::{free_addrs, until, Node};
use registry_proto::http1::Method;

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts `size_mib` MiB at `path`; `Err` with the reason when the
    /// process may not mount.
    fn mount(path: &Path, size_mib: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(path).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(path)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
        }
        Ok(Tmpfs {
            path: path.to_path_buf(),
        })
    }

    /// Fills the file system to the last byte with a file of its own.
    fn fill(&self) {
        use std::io::Write as _;
        let mut f = std::fs::File::create(self.path.join("filler")).expect("create filler");
        let chunk = vec![0u8; 64 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // The last partial chunk: byte by byte up to the end.
        while f.write_all(&[0]).is_ok() {}
        let free = registry_server::disk::Disk::new(&self.path, 0).free_bytes();
        assert!(
            free.is_some_and(|f| f < 64 * 1024),
            "filled: {free:?} bytes free"
        );
    }

    fn free(&self) {
        std::fs::remove_file(self.path.join("filler")).expect("remove filler");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a process of a failed test may still hold files there.
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}

/// Mounts or explains why the test cannot run here.
fn tmpfs_or_skip(path: &Path, size_mib: u64) -> Option<Tmpfs> {
    match Tmpfs::mount(path, size_mib) {
        Ok(t) => Some(t),
        Err(why) if std::env::var_os("REGISTRY_TESTS_UNPRIVILEGED").is_some() => {
            eprintln!("SKIPPED (REGISTRY_TESTS_UNPRIVILEGED): this test mounts a tmpfs and cannot here ({why})");
            None
        }
        Err(why) => panic!(
            "this test mounts a tmpfs and cannot here ({why}): run it as root, or set \
             REGISTRY_TESTS_UNPRIVILEGED=1 to skip it"
        ),
    }
}

fn persistent(service: &str, port: u16) -> String {
    format!("/nacos/v1/ns/instance?serviceName={service}&ip=127.0.0.1&port={port}&ephemeral=false")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_keeps_acknowledged_ones_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = tmpfs_or_skip(&dir.path().join("mnt"), 24) else {
        return;
    };
    let data = fs.path.join("data");
    let args = [
        "--data-dir",
        data.to_str().unwrap(),
        "--data-min-free-bytes",
        "1048576",
    ];
    let log = dir.path().join("node.log");
    let mut reg = Registry::start(&args, &log).await;
    for port in 1..=20 {
        assert_eq!(
            reg.call(Method::Post, &persistent("disk", port)).await,
            (200, "ok".into())
        );
    }

    fs.fill();
    let (status, body) = reg.call(Method::Post, &persistent("disk", 100)).await;
    assert_eq!(status, 507, "{body}");
    assert!(
        body.contains("insufficient storage") && body.contains("not applied"),
        "{body}"
    );
    let (status, body) = reg.call(Method::Delete, &persistent("disk", 1)).await;
    assert_eq!(status, 507, "a deregister is refused too: {body}");
    let (_, list) = reg
        .call(Method::Get, "/nacos/v1/ns/instance/list?serviceName=disk")
        .await;
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    let ports: Vec<u64> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["port"].as_u64().unwrap())
        .collect();
    assert_eq!(ports.len(), 20, "nothing refused was applied: {ports:?}");
    assert!(!ports.contains(&100));
    // Ephemeral data needs no disk and is still served.
    let eph = "/nacos/v1/ns/instance?serviceName=eph&ip=127.0.0.1&port=1";
    assert_eq!(reg.call(Method::Post, eph).await.0, 200);

    fs.free();
    assert_eq!(
        reg.call(Method::Post, &persistent("disk", 100)).await,
        (200, "ok".into())
    );
    reg.kill9().await;
    let reg = Registry::start(&args, &log).await;
    let (_, list) = reg
        .call(Method::Get, "/nacos/v1/ns/instance/list?serviceName=disk")
        .await;
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(
        v["hosts"].as_array().unwrap().len(),
        21,
        "every acknowledged write kept: {list}"
    );
}

/// Beyond [`cluster_support::RAFT_FAST`]: writes refused while less than
/// 1 MiB is free on the data dir's file system.
const MIN_FREE: &[&str] = &["--data-min-free-bytes", "1048576"];

async fn ports(node: &Node, service: &str) -> Vec<u16> {
    node.ports(service).await.unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_raft_cluster_full_disks_refuse_and_a_full_follower_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut mounts = Vec::new();
    for i in 0..3 {
        let Some(fs) = tmpfs_or_skip(&dir.path().join(format!("mnt{i}")), 24) else {
            return;
        };
        mounts.push(fs);
    }
    let addrs = free_addrs(3);
    let members: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    let mut nodes = Vec::new();
    for (i, a) in addrs.iter().enumerate() {
        let data = mounts[i].path.join("data");
        let mut args = vec!["--data-dir", data.to_str().unwrap()];
        args.extend_from_slice(cluster_support::RAFT_FAST);
        args.extend_from_slice(MIN_FREE);
        let log = dir.path().join(format!("node{i}.log"));
        nodes.push(Node::start(*a, &members.join(","), &args, &log).await);
    }
    let started = std::time::Instant::now();
    let leader = loop {
        let mut l = None;
        let mut ready = true;
        for (i, n) in nodes.iter().enumerate() {
            ready &= n.ready().await;
            if n.raft_role().await.as_deref() == Some("LEADER") {
                l = Some(i);
            }
        }
        match l {
            Some(l) if ready => break l,
            _ => assert!(
                started.elapsed() < Duration::from_secs(45),
                "no leader with every node ready"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let follower = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let mut acked = Vec::new();
    let write = |i: usize, port: u16| {
        let node = &nodes[i];
        async move {
            node.try_call(Method::Post, &persistent("raft-disk", port))
                .await
        }
    };
    // Retried while a new leader settles (a client moves on after a 503).
    for port in 1..=10 {
        until(Duration::from_secs(10), "a write acknowledged", || async {
            matches!(write(follower, port).await, Some((200, b)) if b == "ok")
        })
        .await;
        acked.push(port);
    }

    // The leader's disk is full: writes through a follower are refused
    // with the leader's reason, and applied nowhere.
    // Every disk fills (so whichever node leads, its disk is full).
    for m in &mounts {
        m.fill();
    }
    until(Duration::from_secs(10), "the leader's refusal", || async {
        let (status, body) = write(follower, 100).await.unwrap_or_default();
        assert_ne!(status, 200, "acknowledged on a full leader: {body}");
        body.contains("insufficient storage")
    })
    .await;
    for m in &mounts {
        m.free();
    }
    until(Duration::from_secs(10), "writes accepted again", || async {
        matches!(write(follower, 101).await, Some((200, b)) if b == "ok")
    })
    .await;
    acked.push(101);
    for n in &nodes {
        assert!(
            !ports(n, "raft-disk").await.contains(&100),
            "the refused write was applied"
        );
    }

    // A follower's disk fills: the majority goes on without it, and it
    // catches up once space is back.
    mounts[other].fill();
    for port in 200..210 {
        until(
            Duration::from_secs(10),
            "a write acknowledged by the majority",
            || async { matches!(write(leader, port).await, Some((200, b)) if b == "ok") },
        )
        .await;
        acked.push(port);
    }
    mounts[other].free();
    acked.sort_unstable();
    until(
        Duration::from_secs(20),
        "every acknowledged write on every node",
        || async {
            for n in &nodes {
                let have = ports(n, "raft-disk").await;
                if acked.iter().any(|p| !have.contains(p)) {
                    return false;
                }
            }
            true
        },
    )
    .await;
}
