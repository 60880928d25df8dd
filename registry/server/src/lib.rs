//! The registry server: the Nacos 1.x naming HTTP API and UDP push, and the
//! Nacos 2.x gRPC protocol, around the pure [`registry_core::Store`].
//!
//! # Layout
//! - [`config`]: the flags (clap, each also an environment variable and a
//!   key of the `--config` file).
//! - [`admin`]: the operator's client of a running registry
//!   (`registry members add|remove`).
//! - [`http`]: connections, framing, routing, the handlers and the one place
//!   errors become Nacos statuses and texts.
//! - [`write`]: the one write path: every door's and task's writes are
//!   typed commands applied there (store, publish, durability).
//! - [`convert`]: mapping between wire types (`registry-proto`) and the core.
//! - [`list_cache`]: encoded instance lists, once per revision and view.
//! - [`events`]: the change feed from every writer to the notifier.
//! - [`notifier`]: the single task that owns push state: coalescing, fan-out,
//!   batched UDP sends, acks and the one resend.
//! - [`pusher`]: batched UDP I/O (`sendmmsg`, `recvmmsg`).
//! - [`door`]: the door seam: what a door is to the server (bind, start with
//!   the views it may use, drain in its shutdown phase, metrics); [`DOORS`]
//!   registers them: HTTP, [`udp`] (the push socket the notifier serves),
//!   gRPC and [`dns`].
//! - [`dns`]: the DNS door (`--dns-listen`): A, AAAA, SRV and TXT answers
//!   from the store's snapshots, over UDP and TCP.
//! - [`grpc`]: the Nacos 2.x gRPC server: requests, streams, admission;
//!   [`hub`]: its connections and ack queue, as every part shares them.
//! - [`sweeper`]: the lease sweeper task.
//! - [`disk`]: the free-space check that refuses persistent writes on a
//!   full data directory before anything is applied.
//! - [`subscriber_list`]: a service's push subscribers, the cluster's included.
//! - [`service_info`]: the 2.x `ServiceInfo` queries answer and pushes carry.
//! - [`persist`]: persistent instances and services in an embedded
//!   database, one group-commit writer, the restore on start.
//! - [`health`]: the server's TCP/HTTP health checks of persistent instances.
//! - [`auth`]: optional Nacos-compatible login and access tokens;
//!   [`users`]: `registry users add|remove`, editing its users file.
//! - [`cluster`]: membership, relaying and Distro replication with
//!   `--members`; absent otherwise.
//! - [`namespaces`]: the namespace table with its store checks, quotas and file.
//! - [`console`]: the web console at `/nacos/` and its read-only endpoints.
//! - [`metrics`]: the counters and histograms (`Relaxed` atomics);
//!   their text on `/metrics` is written by `registry_proto::prometheus`;
//!   [`footprint`]: the resident set broken into parts.
//! - [`reply`]: what handling a request comes to (reply, deferred answer,
//!   failure), below the HTTP door and the cluster alike.
//! - [`buffers`]: the one budget of connection read buffers.
//! - [`clock`], [`shutdown`]: time and the ordered, bounded shutdown.
//! - [`embed`]: running a registry inside another program (loadgen, tests);
//!   [`bench`]: the doors' real handlers on request values, without sockets
//!   or a disk (the instruction-count gates); [`gate_test`]: the slowdown
//!   the gates' self-test switches on.
//! - [`state`]: what the doors share ([`App`]); [`startup`]: making it from
//!   the configuration, cluster included.
//!
//! [`run`] takes bound sockets and a shutdown future, so tests start the
//! real server in-process on port 0 and stop it with a oneshot.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod admin;
pub mod auth;
pub mod bench;
pub mod buffers;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod console;
pub mod disk;
pub mod dns;
pub mod door;
pub mod embed;
pub mod events;
pub mod footprint;
pub mod gate_test;
pub mod grpc;
pub mod health;
pub mod http;
pub mod hub;
pub mod ip_port_clients;
pub mod list_cache;
pub mod log_levels;
pub mod metrics;
pub mod namespaces;
pub mod notifier;
pub mod persist;
pub mod pusher;
pub mod reply;
pub mod service_info;
pub mod shutdown;
pub mod startup;
pub mod state;
pub mod subscriber_list;
pub mod sweeper;
pub mod udp;
pub mod users;
pub mod write;

pub use registry_convert as convert;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use door::Door as _;

pub use config::Config;
pub use embed::Embedded;
pub use state::App;

/// The server's doors, in the order they are bound, started and rendered on
/// `/metrics`: registering a door is one line here (see [`door`]).
pub const DOORS: &[&dyn door::Door] = &[
    &http::HttpDoor,
    &udp::UdpDoor,
    &grpc::GrpcDoor,
    &dns::DnsDoor,
];

/// The sockets a server serves on, bound before it runs: every door of
/// [`DOORS`] the configuration turns on.
pub struct Listeners {
    bound: Vec<(&'static dyn door::Door, door::Bound)>,
}

impl Listeners {
    /// Binds the configured addresses (port 0 picks free ports).
    ///
    /// # Errors
    /// When an address cannot be bound.
    pub fn bind(config: &Config) -> anyhow::Result<Listeners> {
        let mut bound = Vec::with_capacity(DOORS.len());
        for &d in DOORS {
            if let Some(b) = d.bind(config)? {
                bound.push((d, b));
            }
        }
        Ok(Listeners { bound })
    }

    /// The bound address of the door named `name` ([`door::Door::name`]),
    /// when it is on.
    pub fn addr(&self, name: &str) -> Option<SocketAddr> {
        self.bound
            .iter()
            .find(|(d, _)| d.name() == name)
            .map(|(_, b)| b.addr())
    }

    /// Every bound door's name and address, in [`DOORS`]' order.
    pub fn addrs(&self) -> impl Iterator<Item = (&'static str, SocketAddr)> + '_ {
        self.bound.iter().map(|(d, b)| (d.name(), b.addr()))
    }

    /// The bound DNS address (UDP and TCP), when the door is on.
    pub fn dns_addr(&self) -> Option<SocketAddr> {
        self.addr(dns::DnsDoor.name())
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.addr(grpc::GrpcDoor.name())
            .expect("the gRPC door is always on")
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.addr(http::HttpDoor.name())
            .expect("the HTTP door is always on")
    }

    /// The bound UDP address.
    pub fn udp_addr(&self) -> SocketAddr {
        self.addr(udp::UdpDoor.name())
            .expect("the UDP door is always on")
    }

    /// Starts every bound door, each watching the token of its phase, and
    /// puts its metrics on `/metrics`.
    fn start(
        self,
        app: &Arc<App>,
        stages: &shutdown::Stages,
    ) -> anyhow::Result<Vec<(door::Phase, door::Running)>> {
        let mut running = Vec::with_capacity(self.bound.len());
        for (d, b) in self.bound {
            let stop = match d.phase() {
                door::Phase::Accept => &stages.http,
                door::Phase::Push => &stages.notifier,
            };
            let r = b
                .start(&door::Views::new(app, stop))
                .with_context(|| format!("starting the {} door", d.name()))?;
            if let Some(m) = r.metrics() {
                app.door_metrics.add(m);
            }
            running.push((d.phase(), r));
        }
        Ok(running)
    }
}

/// Waits until every door of `phase` has drained (they drain at once: each
/// [`door::Running`] is its own task, watching the phase's token).
async fn drain(doors: &mut Vec<(door::Phase, door::Running)>, phase: door::Phase) {
    let (now, later): (Vec<_>, Vec<_>) = std::mem::take(doors)
        .into_iter()
        .partition(|(p, _)| *p == phase);
    *doors = later;
    for (_, r) in now {
        r.drained().await;
    }
}

/// Serves until `shutdown` resolves, then shuts down in order within the
/// grace period (see [`shutdown`]). Must run inside a tokio runtime.
///
/// # Errors
/// When the sockets cannot be registered with the runtime.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let app = Arc::new(App::new(config)?);
    run_app(app, listeners, shutdown).await
}

/// [`run`] with a prepared [`App`], so the caller can keep a handle on its
/// store and metrics.
///
/// Shutdown order, each step bounded by the one grace period:
/// 1. stop accepting: every door of [`door::Phase::Accept`] (HTTP, gRPC,
///    DNS); open HTTP connections finish their batch, including persistent
///    writes waiting for their commit (the writer still runs); gRPC refuses
///    new requests and ends its streams;
/// 2. stop the health checker;
/// 3. stop the sweeper;
/// 4. the doors of [`door::Phase::Push`]: the notifier (the UDP door)
///    flushes what is due and closes the UDP socket;
/// 5. the persistence writer commits what is queued, then closes the database.
///
/// # Errors
/// When the sockets cannot be registered with the runtime.
pub async fn run_app(
    app: Arc<App>,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let stages = shutdown::Stages::default();
    let grace = app.config.grace();

    let writer = match &app.persist {
        Some(p) => {
            p.disk.set_min_free(app.config.data_min_free_bytes);
            p.start(app.store.clone())?
        }
        None => None,
    };
    let sweeper = tokio::spawn(sweeper::run(app.sweeps(), stages.sweeper.clone()));
    // Nothing without --members; stopped with the sweeper.
    let cluster_tasks = match &app.cluster {
        Some(c) => c.start(&app, &stages.sweeper),
        None => Vec::new(),
    };
    let health_stop = tokio_util::sync::CancellationToken::new();
    let health = tokio::spawn(health::run(app.health_checks(), health_stop.clone()));
    let mut doors = listeners.start(&app, &stages)?;

    shutdown.await;
    tracing::info!("shutting down");
    let ordered = async {
        // 1. Stop accepting (HTTP, gRPC, DNS); open connections finish their
        //    current batch; gRPC streams end (see each door's drain).
        stages.http.cancel();
        drain(&mut doors, door::Phase::Accept).await;
        // 2. Stop the health checker.
        health_stop.cancel();
        let _ = health.await;
        // 3. Stop the sweeper.
        stages.sweeper.cancel();
        let _ = sweeper.await;
        for task in cluster_tasks {
            let _ = task.await;
        }
        // 4. The notifier (the UDP door) flushes what is due and closes the
        //    UDP socket.
        stages.notifier.cancel();
        drain(&mut doors, door::Phase::Push).await;
        // 5. The writer commits what is queued and closes the database.
        if let (Some(p), Some(w)) = (&app.persist, writer) {
            p.stop().await;
            w.join().await;
        }
    };
    if tokio::time::timeout(grace, ordered).await.is_err() {
        tracing::warn!(
            grace_ms = grace.as_millis() as u64,
            "shutdown grace period ended; abandoning the rest"
        );
    }
    tracing::info!("stopped");
    Ok(())
}
