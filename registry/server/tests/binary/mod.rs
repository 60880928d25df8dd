//! Test support for behaviour only a real process shows (`kill -9`,
//! restarts, RSS): the `registry` binary started on port 0, and a small
//! keep-alive HTTP client that reports errors instead of panicking, so a
//! client can outlive the server it talks to.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use registry_proto::http1::{parse_response, write_request, Method};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// A running `registry` process.
pub struct Registry {
    child: Child,
    /// Its HTTP address.
    pub addr: SocketAddr,
    /// Its DNS door's address (UDP and TCP), with `--dns-listen`.
    pub dns_addr: Option<SocketAddr>,
    /// Its process id.
    pub pid: u32,
    log: PathBuf,
}

impl Registry {
    /// Starts the binary with `--listen 127.0.0.1:0` and `args`, logging to
    /// `log`, and waits for its "listening" line (printed once any data
    /// directory is loaded). `REGISTRY_BIN` names another build to run
    /// (scripts point it at the release binary).
    pub async fn start(args: &[&str], log: &Path) -> Registry {
        let mut all = vec!["--listen", "127.0.0.1:0", "--udp-listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        Registry::start_bare(&all, &[], log).await
    }

    /// Starts the binary with exactly `args` and the extra variables `env`
    /// (no listen flags of its own: a `--config` file may give them).
    pub async fn start_bare(args: &[&str], env: &[(&str, &str)], log: &Path) -> Registry {
        let log_file = std::fs::File::create(log).expect("create log file");
        let bin = std::env::var_os("REGISTRY_BIN").map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_registry")),
            PathBuf::from,
        );
        let mut child = Command::new(bin)
            .args(args)
            .envs(env.iter().copied())
            .env("REGISTRY_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .kill_on_drop(true)
            .spawn()
            .expect("start the registry binary");
        let pid = child.id().expect("pid");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("registry started within 30 s")
            .expect("read stdout")
            .unwrap_or_else(|| {
                panic!(
                    "registry exited before listening:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            });
        let addr = line
            .strip_prefix("registry listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line}"));
        let dns_addr = line
            .split_once(", dns ")
            .and_then(|(_, rest)| rest.trim_end_matches(')').parse().ok());
        // Keep draining stdout so the process never blocks on it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Registry {
            child,
            addr,
            dns_addr,
            pid,
            log: log.to_path_buf(),
        }
    }

    /// `kill -9`: no shutdown, no final commit, nothing flushed.
    pub async fn kill9(&mut self) {
        self.child.start_kill().expect("SIGKILL");
        let status = self.child.wait().await.expect("wait");
        assert!(!status.success(), "killed, not exited: {status}");
    }

    /// SIGTERM and wait for the ordered shutdown.
    pub async fn terminate(mut self) {
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success());
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("stopped within 10 s")
            .expect("wait");
        assert!(
            status.success(),
            "clean exit: {status}\n{}",
            self.log_text()
        );
    }

    /// Resident set size in KiB, from `/proc/PID/status`.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .expect("read /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("VmRSS")
    }

    /// What it logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request on a fresh connection; panics on I/O errors.
    pub async fn call(&self, method: Method, target: &str) -> (u16, String) {
        Conn::open(self.addr)
            .await
            .expect("connect")
            .call(method, target)
            .await
            .expect("response")
    }

    /// The hosts of `service`'s 1.x instance list (`GET /nacos/v1/ns/instance/list`).
    pub async fn hosts(&self, service: &str) -> Vec<serde_json::Value> {
        let target = format!("/nacos/v1/ns/instance/list?serviceName={service}");
        let (status, body) = self.call(Method::Get, &target).await;
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        v["hosts"].as_array().expect("hosts").clone()
    }

    /// A `/metrics` value (first sample of `name`), 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let (_, text) = self.call(Method::Get, "/metrics").await;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }
}

/// Polls `target` until it answers 200, returning how long that took.
pub async fn until_ok(addr: SocketAddr, target: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        if let Ok(mut c) = Conn::open(addr).await {
            if let Ok((200, _)) = c.call(Method::Get, target).await {
                return started.elapsed();
            }
        }
        assert!(
            started.elapsed() < limit,
            "no 200 from {target} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    addr: SocketAddr,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects.
    pub async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            addr,
            buf: Vec::with_capacity(4096),
        })
    }

    /// A connection already made (from a chosen source address).
    pub fn from_stream(stream: TcpStream, addr: SocketAddr) -> Conn {
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            addr,
            buf: Vec::with_capacity(4096),
        }
    }

    /// One request and its response: (status, body).
    pub async fn call(&mut self, method: Method, target: &str) -> std::io::Result<(u16, String)> {
        let mut out = Vec::with_capacity(256);
        write_request(&mut out, method, target, &self.addr.to_string(), None);
        self.send(&out).await
    }

    /// Sends raw request bytes (one request) and reads its response.
    pub async fn send(&mut self, request: &[u8]) -> std::io::Result<(u16, String)> {
        self.stream.write_all(request).await?;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match parse_response(&self.buf) {
                Ok(Some((r, used))) => {
                    let reply = (r.status, String::from_utf8_lossy(&r.body).into_owned());
                    self.buf.drain(..used);
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
            let n = tokio::time::timeout(Duration::from_secs(10), self.stream.read(&mut chunk))
                .await
                .map_err(|_| std::io::Error::other("no response within 10 s"))??;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}
