//! Registry nodes as real processes, for the fault tests: a fault's command must
//! be able to `kill -9` or `SIGSTOP` its target, which an in-process registry
//! would take the test down with.
//!
//! The process is this test binary run again with only [`entry`]'s test selected
//! and the node's flags in [`NODE_ENV`]: the same registry code the tests link, with
//! no second binary to build first (a `registry` binary from another package has no
//! `CARGO_BIN_EXE_*` here and could be stale). Each node has a shell script
//! (`node.sh start|kill|restart`) that a fault's command runs as an operator's
//! script would: `restart` is `kill -9` and a start on the same ports, returning
//! once the node listens. A node exits by itself once the test process is gone, so
//! a failed test leaves none behind.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The node's registry flags, space-separated; unset in an ordinary test run.
pub const NODE_ENV: &str = "LOADGEN_TEST_NODE";
/// The pid of the test process the node outlives no longer than 200 ms.
const OWNER_ENV: &str = "LOADGEN_TEST_OWNER";
/// The libtest name of [`entry`]'s test.
const ENTRY: &str = "fault::registry_node";

/// The body of a node process: starts the embedded registry with the flags of
/// [`NODE_ENV`], prints the line the `registry` binary prints, and serves until the
/// owner exits. Returns at once when [`NODE_ENV`] is unset.
pub fn entry() {
    use clap::Parser as _;
    let Ok(flags) = std::env::var(NODE_ENV) else {
        return;
    };
    let args = std::iter::once("registry").chain(flags.split_whitespace());
    let config = registry_server::Config::parse_from(args);
    let node = registry_server::Embedded::start(config).expect("the node starts");
    println!(
        "registry listening on http://{} (udp {})",
        node.http_addr, node.udp_addr
    );
    let owner = std::env::var(OWNER_ENV).unwrap_or_default();
    while Path::new(&format!("/proc/{owner}")).exists() {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::process::exit(0);
}

/// Free loopback ports for `n` listeners, below the kernel's ephemeral range: a
/// node restarted on its old port must find it free, and a port from the ephemeral
/// range can meanwhile become the local end of any outgoing connection (the
/// clients reconnecting to it, among them). The pid spreads concurrent binaries.
pub fn free_ports(n: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (low, high) = if low >= 12_000 {
        (10_000, low)
    } else {
        (61_000, 65_000)
    };
    let span = high - low;
    let offset = std::process::id() * 7919 % span;
    let mut ports = Vec::with_capacity(n);
    for _ in 0..span {
        if ports.len() == n {
            break;
        }
        let port = (low + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    assert_eq!(ports.len(), n, "no {n} free ports in {low}..{high}");
    ports
}

/// One node: its addresses and its script.
pub struct Node {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    /// `node.sh`: `start`, `kill` (`-9`), `restart`, `stop`/`cont` (SIGSTOP/SIGCONT).
    pub script: PathBuf,
    dir: PathBuf,
}

impl Node {
    /// Starts a node in `dir` (its script, pid file and log go there) on fresh
    /// ports, in the cluster `members` when given (`ip:port,...`, this node among
    /// them at `http`), with `extra` registry flags.
    pub fn start(dir: &Path, http: u16, grpc: u16, members: Option<&str>, extra: &str) -> Node {
        std::fs::create_dir_all(dir).unwrap();
        let http = SocketAddr::from(([127, 0, 0, 1], http));
        let grpc = SocketAddr::from(([127, 0, 0, 1], grpc));
        let mut flags = format!(
            "--listen {http} --udp-listen 127.0.0.1:0 --grpc-listen {grpc} --workers 1 {extra}"
        );
        if let Some(m) = members {
            flags += &format!(" --members {m}");
        }
        let script = dir.join("node.sh");
        std::fs::write(&script, script_text(dir, &flags)).unwrap();
        let node = Node {
            http,
            grpc,
            script,
            dir: dir.to_path_buf(),
        };
        node.run("start");
        node
    }

    /// Runs the node's script with `action`; panics when it fails.
    pub fn run(&self, action: &str) {
        let out = Command::new("sh")
            .arg(&self.script)
            .arg(action)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "node.sh {action}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
    }

    /// Waits (bounded: 30 s) until the node answers its readiness with 200:
    /// a cluster member refuses 2.x clients ("Server is starting") until it
    /// has its peers' state, and "registry listening" comes before that.
    pub fn wait_ready(&self) {
        let started = std::time::Instant::now();
        loop {
            if readiness_status(self.http) == Some(200) {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "node {} not ready within 30 s\n{}",
                self.http,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The node's log (its stderr, over every start).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = Command::new("sh").arg(&self.script).arg("kill").status();
    }
}

/// `node.sh`: the operator's script for one node (see the module).
fn script_text(dir: &Path, flags: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    format!(
        r#"#!/bin/sh
# One registry node of a loadgen fault test: start | kill | restart | stop | cont.
dir='{dir}'
pid=$(cat "$dir/pid" 2>/dev/null || true)
case "$1" in
stop) exec kill -STOP "$pid" ;;
cont) exec kill -CONT "$pid" ;;
kill|restart)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    i=0
    while [ -n "$pid" ] && [ -e "/proc/$pid" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        i=$((i + 1)); [ $i -gt 100 ] && exit 1; sleep 0.05
    done
    rm -f "$dir/pid"
    [ "$1" = kill ] && exit 0 ;;
esac
: > "$dir/out"
{node_env}='{flags}' {owner_env}={owner} '{exe}' --exact {entry} --nocapture --test-threads=1 \
    > "$dir/out" 2>> "$dir/log" &
echo $! > "$dir/pid"
i=0
until grep -q 'registry listening' "$dir/out"; do
    i=$((i + 1)); [ $i -gt 300 ] && {{ echo "node did not start" >&2; exit 1; }}; sleep 0.1
done
"#,
        dir = dir.display(),
        node_env = NODE_ENV,
        owner_env = OWNER_ENV,
        owner = std::process::id(),
        exe = exe.display(),
        entry = ENTRY,
    )
}

/// The status of `GET /nacos/v1/console/health/readiness`, `None` without an
/// answer.
fn readiness_status(addr: SocketAddr) -> Option<u16> {
    use std::io::{Read as _, Write as _};
    let timeout = Duration::from_secs(2);
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let request = format!(
        "GET /nacos/v1/console/health/readiness HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.split(' ').nth(1)?.parse().ok()
}
