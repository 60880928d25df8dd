//! The MySQL health checker through the real binary against a real MariaDB
//! server (Debian's `mariadb-server`, installed by
//! `scripts/deps/mariadb.sh`) that the test starts on loopback with its own
//! data directory. Expectations from Nacos's
//! `naming/.../healthcheck/v2/processor/MysqlHealthCheckProcessor.java`:
//! a login with the cluster checker's user and password, its `cmd` run, a
//! server whose `read_only` is `ON` unhealthy when `cmd` is the read-only
//! query, and an error the server answers with (a refused login: a JDBC
//! `SQLException`) failing the instance at once (`checkFailNow`), not after
//! the threshold. The checker JSON is `api/.../healthcheck/impl/Mysql.java`.

use crate::binary;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use binary::Registry;
use mysql_async::prelude::Queryable;
use registry_proto::http1::Method;

/// A MariaDB server on 127.0.0.1, stopped (and its data removed with the
/// caller's directory) on drop.
struct MariaDb {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A MariaDB program by name: on `PATH`, else Debian's `/usr/sbin`.
fn program(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| {
        panic!("{name} not found: run scripts/deps/mariadb.sh (installs Debian's mariadb-server)")
    })
}

/// The users the test logs in as: `checker` may do nothing but log in
/// and read variables; `admin` turns the server read-only and back.
const INIT_SQL: &str = "\
CREATE USER 'checker'@'127.0.0.1' IDENTIFIED BY 'secret';
CREATE USER 'admin'@'127.0.0.1' IDENTIFIED BY 'admin-secret';
GRANT ALL PRIVILEGES ON *.* TO 'admin'@'127.0.0.1';
";

impl MariaDb {
    /// Initialises a data directory under `dir` and starts the server on a
    /// port outside the ephemeral range (MariaDB cannot bind port 0 and
    /// report it), trying another if that one is taken.
    async fn start(dir: &Path) -> MariaDb {
        let data = dir.join("data");
        let install = Command::new(program("mariadb-install-db"))
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg("--auth-root-authentication-method=normal")
            .arg(format!("--datadir={}", data.display()))
            .output()
            .expect("run mariadb-install-db");
        assert!(
            install.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&install.stderr)
        );
        let init = dir.join("init.sql");
        std::fs::write(&init, INIT_SQL).expect("write init.sql");
        let seed = std::process::id() as u16;
        for attempt in 0..10u16 {
            let port = 20_000 + (seed.wrapping_mul(31).wrapping_add(attempt * 997)) % 10_000;
            let log = dir.join(format!("mariadb-{port}.log"));
            let child = Command::new(program("mariadbd"))
                .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1"])
                .args([
                    "--skip-name-resolve",
                    "--skip-log-bin",
                    "--innodb-buffer-pool-size=16M",
                ])
                .arg(format!("--port={port}"))
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--socket={}", dir.join("mariadb.sock").display()))
                .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
                .arg(format!("--init-file={}", init.display()))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).expect("create log"))
                .spawn()
                .expect("start mariadbd");
            let mut db = MariaDb { child, port, log };
            if db.ready().await {
                return db;
            }
        }
        panic!("mariadbd did not start on any of 10 ports");
    }

    /// Waits for "ready for connections"; false if the server exited (its
    /// port was taken), panics on a server that neither starts nor exits.
    async fn ready(&mut self) -> bool {
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            if text.contains("ready for connections") {
                return true;
            }
            if self.child.try_wait().expect("poll mariadbd").is_some() {
                assert!(
                    text.contains("Bind on TCP/IP port") || text.contains("Address already in use"),
                    "mariadbd failed to start:\n{text}"
                );
                return false;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "mariadbd not ready after 60 s:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sets `read_only` through the admin account.
    async fn set_read_only(&self, on: bool) {
        let url = format!("mysql://admin:admin-secret@127.0.0.1:{}/", self.port);
        let opts = mysql_async::Opts::from_url(&url).expect("url");
        let opts = mysql_async::OptsBuilder::from_opts(opts).prefer_socket(false);
        let mut conn = mysql_async::Conn::new(opts).await.expect("admin login");
        let value = if on { "ON" } else { "OFF" };
        conn.query_drop(format!("SET GLOBAL read_only = {value}"))
            .await
            .expect("set read_only");
        conn.disconnect().await.expect("disconnect");
    }
}

/// The health of each cluster's one instance of `service`.
async fn health(reg: &Registry, service: &str) -> Vec<(String, bool)> {
    let mut out: Vec<(String, bool)> = reg
        .hosts(service)
        .await
        .iter()
        .map(|h| {
            let cluster = h["clusterName"].as_str().expect("cluster").to_owned();
            (cluster, h["healthy"].as_bool().expect("healthy"))
        })
        .collect();
    out.sort();
    out
}

async fn eventually(reg: &Registry, want: &[(&str, bool)], what: &str) {
    let want: Vec<(String, bool)> = want.iter().map(|(c, h)| (c.to_string(), *h)).collect();
    let started = Instant::now();
    loop {
        let got = health(reg, "hc-mysql").await;
        if got == want {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: want {want:?}, got {got:?}\n{}",
            reg.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The registry's count of failed probes so far.
async fn failed_probes(reg: &Registry) -> u64 {
    reg.metric("registry_health_checks_total{result=\"down\"}")
        .await as u64
}

/// `PUT /v3/admin/ns/cluster` giving `cluster` a MYSQL checker.
async fn set_checker(reg: &Registry, cluster: &str, pwd: &str, cmd: &str) {
    let checker = serde_json::json!({"type": "MYSQL", "user": "checker", "pwd": pwd, "cmd": cmd});
    let target = format!(
        "/nacos/v3/admin/ns/cluster?serviceName=hc-mysql&clusterName={cluster}&checkPort=80\
         &useInstancePort4Check=true&healthChecker={}",
        urlencoding(&checker.to_string())
    );
    let (status, body) = reg.call(Method::Put, &target).await;
    assert_eq!(status, 200, "{body}");
}

/// Percent-encodes everything but unreserved characters.
fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Each cluster's health while the server is up and writable: only the
/// wrong password fails.
const PRIMARY_UP: &[(&str, bool)] = &[
    ("denied", false),
    ("plain", true),
    ("primary", true),
    ("steady", true),
];

/// Nacos's checker against a real server: a right login passes, a refused
/// login fails at once, `read_only` ON fails the read-only query but not
/// another statement, and a stopped server fails every cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_instances_are_checked_by_logging_in_to_mysql() {
    const THRESHOLD: u64 = 10;
    let dir = tempfile::tempdir().expect("tempdir");
    let db = MariaDb::start(dir.path()).await;
    let threshold = THRESHOLD.to_string();
    let args = [
        "--health-check-interval-ms",
        "100",
        "--health-check-timeout-ms",
        "2000",
        "--health-check-threshold",
        &threshold,
    ];
    let reg = Registry::start(&args, &dir.path().join("registry.log")).await;
    // Each cluster's instance is the MariaDB server's address; the cluster
    // decides how it is checked (until its checker is set, the default TCP
    // check passes on the open port).
    for cluster in ["denied", "plain", "primary", "steady"] {
        let (status, body) = reg
            .call(
                Method::Post,
                &format!(
                    "/nacos/v1/ns/instance?serviceName=hc-mysql&ip=127.0.0.1&port={}\
                     &clusterName={cluster}&ephemeral=false",
                    db.port
                ),
            )
            .await;
        assert_eq!((status, body.as_str()), (200, "ok"));
    }
    let read_only_sql = "show global variables where variable_name='read_only'";
    set_checker(&reg, "primary", "secret", read_only_sql).await;
    set_checker(&reg, "plain", "secret", "select 1").await;
    set_checker(&reg, "denied", "not-the-password", read_only_sql).await;
    // One instance never checked, so the list never reaches the protect
    // threshold (0: with every instance unhealthy, a 1.x list shows all).
    let target = "/nacos/v3/admin/ns/cluster?serviceName=hc-mysql&clusterName=steady&checkPort=80\
                  &useInstancePort4Check=true&healthChecker=%7B%22type%22%3A%22NONE%22%7D";
    let (status, body) = reg.call(Method::Put, target).await;
    assert_eq!(status, 200, "{body}");

    // A refused login is the server's own error: it fails at once, with
    // fewer failed probes than the threshold would need.
    eventually(&reg, PRIMARY_UP, "a refused login flips its instance").await;
    let failed = failed_probes(&reg).await;
    assert!(
        failed < THRESHOLD,
        "flipped after {failed} failed probes: counted toward the threshold, not at once"
    );

    // The service detail shows each cluster's checker as Nacos's Jackson
    // writes a `Mysql` (ClusterInfo.healthChecker).
    let (status, body) = reg
        .call(
            Method::Get,
            "/nacos/v3/admin/ns/service?serviceName=hc-mysql",
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(
        v["data"]["clusterMap"]["plain"]["healthChecker"],
        serde_json::json!({"type": "MYSQL", "user": "checker", "pwd": "secret", "cmd": "select 1"})
    );

    // A read-only server is a replica: unhealthy by the read-only query,
    // still healthy by a statement that merely runs.
    db.set_read_only(true).await;
    eventually(
        &reg,
        &[
            ("denied", false),
            ("plain", true),
            ("primary", false),
            ("steady", true),
        ],
        "read_only ON fails the read-only query only",
    )
    .await;
    db.set_read_only(false).await;
    eventually(&reg, PRIMARY_UP, "read_only OFF passes again").await;

    // The server stops: every login fails.
    drop(db);
    eventually(
        &reg,
        &[
            ("denied", false),
            ("plain", false),
            ("primary", false),
            ("steady", true),
        ],
        "a stopped server fails every cluster",
    )
    .await;
}
