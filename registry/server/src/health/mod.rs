//! Server-side health checks of persistent instances, as Nacos runs them:
//! persistent instances send no beats, so the server probes them itself.
//!
//! One task wakes every `--health-check-interval-ms`, collects the
//! persistent instances of the services in [`Targets`], and probes them with
//! at most `--health-check-concurrency` checks in flight, each bounded by
//! `--health-check-timeout-ms`. An instance flips (through
//! the write path's [`Command::Health`], published to the notifier like any change) after
//! `--health-check-threshold` consecutive results that disagree with its
//! current health, as Nacos's `checkTimes` does.
//!
//! # Checkers
//! Chosen per cluster from the service's metadata, else `--health-checker`:
//! - `preserved.health.checker.<cluster>`: for that cluster;
//! - `preserved.health.checker`: for every cluster of the service.
//!
//! Values: `TCP` (a connect to the instance's ip:port; Nacos's default),
//! `HTTP` or `HTTP:/path` (a GET of the path, default `/`, expecting a 2xx
//! status line), `MYSQL:{"user":..,"pwd":..,"cmd":..}` (a login and the
//! statement, see [`mysql`]) and `NONE` (never checked). Set them with the service API,
//! e.g. `PUT /nacos/v1/ns/service?serviceName=s&protectThreshold=0&metadata=preserved.health.checker.c1=HTTP:/health`.
//! A value that does not parse falls back to `--health-checker`.
//!
//! # What it needs
//! [`HealthChecks`] holds exactly what the checker touches: the store, the
//! change feed, the clock, the [`Targets`], its counters and its
//! [`HealthSettings`]. It does not see the server state
//! ([`crate::state::App`]), so it runs and is tested on its own.
//!
//! [`Store::set_health`]: registry_core::Store::set_health

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use registry_core::{InstanceAddr, ServiceKey, SharedStr, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

mod mysql;

use crate::clock::Clock;
use crate::metrics::Counter;
pub use crate::write::Targets;
use crate::write::{Command, Outcome, Writer};
use registry_proto::prometheus::{Exposition, Kind};

/// Metadata key naming the checker of all of a service's clusters; append
/// `.<cluster>` for one cluster.
pub const CHECKER_KEY: &str = "preserved.health.checker";

/// Metadata key (append `.<cluster>`) of the port a cluster's checks probe
/// instead of each instance's own: what `PUT /v3/admin/ns/cluster` with
/// `useInstancePort4Check=false` and `checkPort` keeps, as Nacos's
/// processors probe `cluster.getDefCkport()` then
/// (`healthcheck/v2/processor/TcpHealthCheckProcessor`).
pub const CHECK_PORT_KEY: &str = "preserved.health.check.port";

/// How an instance is probed: the checker the v3 cluster update writes
/// (`TCP`, `HTTP[:/path]`, `MYSQL:{json}`, `NONE`), read back from the
/// service metadata with [`Checker::from_metadata_value`].
pub use registry_proto::openapi::admin::HealthChecker as Checker;

/// What one probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The instance passed.
    Up,
    /// It failed; counts toward the threshold (Nacos's `checkFail`).
    Down,
    /// It failed in a way that flips it at once: the MySQL server itself
    /// refused the login or the statement (Nacos's `checkFailNow`).
    DownNow,
}

impl Probe {
    /// Whether the instance passed.
    pub fn is_up(self) -> bool {
        self == Probe::Up
    }
}

/// Counters for `/metrics`.
#[derive(Default)]
pub struct HealthStats {
    /// Probes that found the instance up.
    pub up: Counter,
    /// Probes that failed or timed out.
    pub down: Counter,
    /// Instances turned healthy.
    pub revived: Counter,
    /// Instances turned unhealthy.
    pub failed: Counter,
}

impl HealthStats {
    /// Appends the health checker's families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        const CHECKS: &str = "registry_health_checks_total";
        e.family(
            CHECKS,
            Kind::Counter,
            "Health probes of persistent instances, by result.",
        );
        e.sample(CHECKS, &[("result", "up")], self.up.get());
        e.sample(CHECKS, &[("result", "down")], self.down.get());
        const FLIPS: &str = "registry_health_transitions_total";
        e.family(
            FLIPS,
            Kind::Counter,
            "Persistent instances whose health flipped.",
        );
        e.sample(FLIPS, &[("to", "healthy")], self.revived.get());
        e.sample(FLIPS, &[("to", "unhealthy")], self.failed.get());
    }
}

/// One instance to probe; [`round`] keeps a streak per target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Target {
    service: ServiceKey,
    cluster: SharedStr,
    ip: IpAddr,
    port: u16,
    /// The port probed: the instance's, or its cluster's check port.
    probe_port: u16,
}

/// The checker's settings (from `--health-check-*` and `--health-checker`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthSettings {
    /// Time between rounds; zero turns the checker off.
    pub interval: Duration,
    /// Time one probe may take.
    pub timeout: Duration,
    /// Most probes in flight.
    pub concurrency: usize,
    /// Consecutive disagreeing results before an instance flips.
    pub threshold: u32,
    /// The checker of clusters whose service names none.
    pub default_checker: Checker,
}

/// Everything the health checker reads and writes.
#[derive(Clone)]
pub struct HealthChecks {
    /// The registry whose persistent instances are probed.
    pub store: Arc<Store>,
    /// Where health flips are written: the one write path (in a Raft
    /// cluster it proposes them; every node applies them once committed).
    pub writer: Writer,
    /// The core's time for the writes.
    pub clock: Clock,
    /// Services holding persistent instances.
    pub targets: Arc<Targets>,
    /// Counters.
    pub stats: Arc<HealthStats>,
    /// Settings.
    pub settings: HealthSettings,
    /// In a Raft cluster: whether this node checks at all (only the
    /// leader does).
    pub verdicts: Option<Arc<dyn Verdicts>>,
}

/// Who runs the checks in a replicated registry.
pub trait Verdicts: Send + Sync {
    /// Whether this node runs the checks now (it is the Raft leader): one
    /// prober per cluster, and a new leader starts its streaks from zero,
    /// so a failover flips nothing by itself.
    fn checks_here(&self) -> bool;
}

/// Runs until `cancel` fires. Does nothing with an interval of 0.
pub async fn run(checks: HealthChecks, cancel: CancellationToken) {
    let every = checks.settings.interval;
    if every.is_zero() {
        return;
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    // Consecutive disagreeing results per instance; holds only instances
    // seen in the last round.
    let mut streaks: HashMap<Target, u32> = HashMap::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = round(&checks, &mut streaks) => {}
        }
    }
}

/// One pass over every persistent instance.
async fn round(checks: &HealthChecks, streaks: &mut HashMap<Target, u32>) {
    if checks.verdicts.as_ref().is_some_and(|v| !v.checks_here()) {
        streaks.clear();
        return;
    }
    let default = &checks.settings.default_checker;
    let mut due: Vec<(Target, Checker, bool)> = Vec::new();
    for service in checks.targets.list() {
        let before = due.len();
        checks.store.read(service.as_ref(), |s| {
            for i in s.instances().iter().filter(|i| !i.ephemeral) {
                let checker = checker_for(s.metadata(), &i.cluster, default);
                if checker == Checker::None {
                    continue;
                }
                let target = Target {
                    service: service.clone(),
                    cluster: i.cluster.clone(),
                    ip: i.ip,
                    port: i.port,
                    probe_port: check_port_for(s.metadata(), &i.cluster).unwrap_or(i.port),
                };
                due.push((target, checker, i.healthy));
            }
        });
        if due.len() == before {
            checks.targets.prune(&checks.store, &service);
        }
    }
    let timeout = checks.settings.timeout;
    let limit = checks.settings.concurrency;
    let mut seen: HashMap<Target, u32> = HashMap::with_capacity(due.len());
    let mut running: JoinSet<(Target, bool, Probe)> = JoinSet::new();
    let mut pending = due.into_iter();
    loop {
        while running.len() < limit {
            let Some((target, checker, healthy)) = pending.next() else {
                break;
            };
            running.spawn(async move {
                let found = probe(
                    &checker,
                    SocketAddr::new(target.ip, target.probe_port),
                    timeout,
                )
                .await;
                (target, healthy, found)
            });
        }
        let Some(done) = running.join_next().await else {
            break;
        };
        let Ok((target, healthy, found)) = done else {
            continue;
        };
        let up = found.is_up();
        let stats = &checks.stats;
        if up {
            stats.up.inc()
        } else {
            stats.down.inc()
        }
        if up == healthy {
            continue;
        }
        let streak = streaks.get(&target).copied().unwrap_or(0) + 1;
        if streak < checks.settings.threshold && found != Probe::DownNow {
            seen.insert(target, streak);
            continue;
        }
        flip(checks, &target, up);
    }
    *streaks = seen;
}

fn flip(checks: &HealthChecks, target: &Target, up: bool) {
    let command = Command::Health {
        service: target.service.as_ref(),
        addr: InstanceAddr {
            cluster: &target.cluster,
            ip: target.ip,
            port: target.port,
        },
        ephemeral: false,
        healthy: up,
    };
    let changed = match checks.writer.apply(command, checks.clock.now()) {
        Ok(Outcome::Done(applied)) => applied.changed,
        // Proposed to the Raft log: nobody waits, the next round sees the
        // committed verdict.
        Ok(Outcome::Later(_)) => true,
        // Deregistered while being probed: nothing to mark.
        Err(_) => false,
    };
    if !changed {
        return;
    }
    if up {
        checks.stats.revived.inc();
    } else {
        checks.stats.failed.inc();
    }
    tracing::info!(
        service = target.service.grouped_name(),
        namespace = target.service.namespace(),
        cluster = &*target.cluster,
        instance = %SocketAddr::new(target.ip, target.port),
        healthy = up,
        "health check changed a persistent instance"
    );
}

/// The checker of `cluster` from the service's metadata, else `default`
/// (`--health-checker`).
pub fn checker_for(
    metadata: &registry_core::Metadata,
    cluster: &str,
    default: &Checker,
) -> Checker {
    let mut key = String::with_capacity(CHECKER_KEY.len() + 1 + cluster.len());
    key.push_str(CHECKER_KEY);
    key.push('.');
    key.push_str(cluster);
    metadata
        .get(&key)
        .or_else(|| metadata.get(CHECKER_KEY))
        .and_then(|v| Checker::from_metadata_value(v).ok())
        .unwrap_or_else(|| default.clone())
}

/// The port `cluster`'s checks probe instead of the instance's, if the
/// service's metadata names one ([`CHECK_PORT_KEY`]).
pub fn check_port_for(metadata: &registry_core::Metadata, cluster: &str) -> Option<u16> {
    let key = format!("{CHECK_PORT_KEY}.{cluster}");
    metadata.get(&key).and_then(|v| v.trim().parse().ok())
}

/// What `checker` finds at `addr` within `timeout` (a timeout is
/// [`Probe::Down`]).
pub async fn probe(checker: &Checker, addr: SocketAddr, timeout: Duration) -> Probe {
    let passed = |ok: bool| if ok { Probe::Up } else { Probe::Down };
    let check = async {
        match checker {
            Checker::None => Probe::Up,
            Checker::Tcp => passed(TcpStream::connect(addr).await.is_ok()),
            Checker::Http { path } => passed(http_ok(addr, path).await),
            Checker::Mysql(check) => mysql::probe(check, addr).await,
        }
    };
    tokio::time::timeout(timeout, check)
        .await
        .unwrap_or(Probe::Down)
}

/// `GET path` and a 2xx status line. Reads at most the first 1 KiB.
async fn http_ok(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return false;
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: registry-health-check\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 1024];
    let mut len = 0;
    while len < head.len() {
        match stream.read(&mut head[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
        if head[..len].contains(&b'\n') {
            break;
        }
    }
    status_is_success(&head[..len])
}

/// `HTTP/1.x 2xx ...` at the start of `head`.
fn status_is_success(head: &[u8]) -> bool {
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().unwrap_or_default();
    version.starts_with(b"HTTP/1.")
        && status.len() == 3
        && status[0] == b'2'
        && status.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ChangeFeed;
    use registry_core::{InstanceSpec, Millis, ServiceRef, StoreConfig};

    /// The checker alone: a store, a feed and a real socket that stops
    /// listening. Three failed rounds flip the instance, one flip is
    /// published; a listening port brings it back.
    #[tokio::test]
    async fn rounds_flip_a_persistent_instance_after_the_threshold() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let store = Arc::new(Store::new(StoreConfig {
            shards: 1,
            ..StoreConfig::default()
        }));
        let service = ServiceRef::new("public", "DEFAULT_GROUP@@db");
        let spec = InstanceSpec {
            ephemeral: false,
            ..InstanceSpec::new("DEFAULT", addr.ip(), addr.port())
        };
        store.register(service, &spec, Millis(0)).unwrap();
        let (checks, mut events) = checks_of(&store, service);
        let healthy = || store.read(service, |s| s.instances()[0].healthy).unwrap();
        let mut streaks = HashMap::new();
        round(&checks, &mut streaks).await;
        assert_eq!(checks.stats.up.get(), 1);
        drop(listener);
        for _ in 0..2 {
            round(&checks, &mut streaks).await;
            assert!(healthy(), "not before the threshold");
        }
        round(&checks, &mut streaks).await;
        assert!(!healthy(), "flipped on the third failure");
        assert_eq!(checks.stats.failed.get(), 1);
        assert_eq!(
            events.try_recv().unwrap().service.grouped_name(),
            "DEFAULT_GROUP@@db"
        );
        // Back up: the port listens again (the kernel may hand it elsewhere;
        // then there is nothing to revive and the test says so).
        let Ok(_again) = std::net::TcpListener::bind(addr) else {
            return;
        };
        for _ in 0..3 {
            round(&checks, &mut streaks).await;
        }
        assert!(healthy());
        assert_eq!(checks.stats.revived.get(), 1);
    }

    /// A checker over `store` visiting `service` (TCP by default, flipping
    /// on the third disagreeing result), and its change feed.
    fn checks_of(
        store: &Arc<Store>,
        service: ServiceRef<'_>,
    ) -> (
        HealthChecks,
        tokio::sync::mpsc::Receiver<registry_core::ChangeEvent>,
    ) {
        let targets = Arc::new(Targets::default());
        targets.insert(service);
        let feed = Arc::new(ChangeFeed::default());
        let events = feed.take_receiver().unwrap();
        let checks = HealthChecks {
            store: store.clone(),
            writer: Writer::new(store.clone(), feed, targets.clone(), None, false),
            clock: Clock::start(),
            targets,
            stats: Arc::default(),
            settings: HealthSettings {
                interval: Duration::from_secs(5),
                timeout: Duration::from_secs(5),
                concurrency: 4,
                threshold: 3,
                default_checker: Checker::Tcp,
            },
            verdicts: None,
        };
        (checks, events)
    }

    #[tokio::test]
    async fn a_clusters_check_port_is_probed_instead_of_the_instances() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let store = Arc::new(Store::new(StoreConfig {
            shards: 1,
            ..StoreConfig::default()
        }));
        let service = ServiceRef::new("public", "DEFAULT_GROUP@@ck");
        let key = format!("{CHECK_PORT_KEY}.DEFAULT");
        let metadata =
            registry_core::Metadata::from_pairs([(key, open.port().to_string())]).unwrap();
        let spec = registry_core::ServiceSpec {
            metadata,
            ..registry_core::ServiceSpec::default()
        };
        store.create_service(service, &spec, Millis(0)).unwrap();
        let inst = InstanceSpec {
            ephemeral: false,
            ..InstanceSpec::new("DEFAULT", closed.ip(), closed.port())
        };
        store.register(service, &inst, Millis(0)).unwrap();
        let (checks, _events) = checks_of(&store, service);
        round(&checks, &mut HashMap::new()).await;
        assert_eq!((checks.stats.up.get(), checks.stats.down.get()), (1, 0));
        drop(listener);
    }

    #[test]
    fn parses_checkers() {
        assert_eq!(Checker::from_metadata_value("tcp"), Ok(Checker::Tcp));
        assert_eq!(Checker::from_metadata_value(" NONE "), Ok(Checker::None));
        assert_eq!(
            Checker::from_metadata_value("HTTP"),
            Ok(Checker::Http { path: "/".into() })
        );
        assert_eq!(
            Checker::from_metadata_value("http:/health?x=1"),
            Ok(Checker::Http {
                path: "/health?x=1".into()
            })
        );
        assert!(Checker::from_metadata_value("HTTP:health").is_err());
        assert!(Checker::from_metadata_value("HTTP:/a b").is_err());
        assert!(Checker::from_metadata_value("MYSQL").is_err());
        assert!(Checker::from_metadata_value("TCP:/x").is_err());
    }

    #[test]
    fn per_cluster_checker_wins() {
        let m = registry_core::Metadata::from_pairs([
            ("preserved.health.checker", "NONE"),
            ("preserved.health.checker.c1", "HTTP:/up"),
            ("preserved.health.checker.c2", "bogus"),
        ])
        .unwrap();
        assert_eq!(
            checker_for(&m, "c1", &Checker::Tcp),
            Checker::Http { path: "/up".into() }
        );
        assert_eq!(checker_for(&m, "DEFAULT", &Checker::Tcp), Checker::None);
        assert_eq!(checker_for(&m, "c2", &Checker::Tcp), Checker::Tcp);
        let empty = registry_core::Metadata::empty();
        assert_eq!(checker_for(&empty, "c1", &Checker::Tcp), Checker::Tcp);
    }

    #[test]
    fn status_lines() {
        assert!(status_is_success(b"HTTP/1.1 200 OK\r\n"));
        assert!(status_is_success(b"HTTP/1.0 204 No Content\r\n"));
        assert!(!status_is_success(b"HTTP/1.1 500 Oops\r\n"));
        assert!(!status_is_success(b"HTTP/1.1 2000 x\r\n"));
        assert!(!status_is_success(b"SSH-2.0-OpenSSH\r\n"));
        assert!(!status_is_success(b""));
    }
}
