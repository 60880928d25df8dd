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
pub mod embed;
pub mod events;
pub mod footprint;
pub mod gate_test;
pub mod grpc;
pub mod health;
pub mod http;
pub mod hub;
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
pub mod users;
pub mod write;

pub use registry_convert as convert;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;

pub use config::Config;
pub use embed::Embedded;
pub use state::App;

/// The sockets a server serves on, bound before it runs.
pub struct Listeners {
    /// The HTTP listener.
    pub http: std::net::TcpListener,
    /// The UDP socket pushes leave from and acks arrive on.
    pub udp: std::net::UdpSocket,
    /// The gRPC (Nacos 2.x) listener.
    pub grpc: std::net::TcpListener,
    /// The DNS door's socket and listener (one port); `None` without
    /// `--dns-listen`.
    pub dns: Option<(std::net::UdpSocket, std::net::TcpListener)>,
}

impl Listeners {
    /// Binds the configured addresses (port 0 picks free ports).
    ///
    /// # Errors
    /// When an address cannot be bound.
    pub fn bind(config: &Config) -> anyhow::Result<Listeners> {
        let http = std::net::TcpListener::bind(config.listen)
            .with_context(|| format!("binding HTTP {}", config.listen))?;
        http.set_nonblocking(true)?;
        let udp = std::net::UdpSocket::bind(config.udp_listen)
            .with_context(|| format!("binding UDP {}", config.udp_listen))?;
        udp.set_nonblocking(true)?;
        let grpc_addr = config
            .grpc_addr()
            .context("the HTTP port + 1000 is past 65535: set --grpc-listen")?;
        let grpc = std::net::TcpListener::bind(grpc_addr)
            .with_context(|| format!("binding gRPC {grpc_addr} (set --grpc-listen to move it)"))?;
        grpc.set_nonblocking(true)?;
        let dns = config.dns_listen.map(dns::bind).transpose()?;
        Ok(Listeners {
            http,
            udp,
            grpc,
            dns,
        })
    }

    /// The bound DNS address (UDP and TCP), when the door is on.
    pub fn dns_addr(&self) -> Option<SocketAddr> {
        self.dns.as_ref().and_then(|(u, _)| u.local_addr().ok())
    }

    /// The bound gRPC address.
    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> SocketAddr {
        self.http
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The bound UDP address.
    pub fn udp_addr(&self) -> SocketAddr {
        self.udp.local_addr().expect("bound socket has an address")
    }
}

/// Starts the DNS door's UDP and TCP tasks on `sockets`, tracked with the
/// HTTP connections and stopped with them; nothing without `--dns-listen`.
fn start_dns(
    app: &App,
    sockets: Option<(std::net::UdpSocket, std::net::TcpListener)>,
    tracker: &tokio_util::task::TaskTracker,
    stop: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<()> {
    let Some((udp, tcp)) = sockets else {
        return Ok(());
    };
    let door = Arc::new(dns::Dns::new(
        &app.config.dns_domain,
        app.config.dns_ttl,
        app.store.clone(),
        app.dns.clone(),
    )?);
    let udp = tokio::net::UdpSocket::from_std(udp)?;
    let tcp = tokio::net::TcpListener::from_std(tcp)?;
    tracker.spawn(dns::serve_udp(door.clone(), udp, stop.clone()));
    tracker.spawn(dns::serve_tcp(door, tcp, stop.clone()));
    Ok(())
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
/// 1. stop accepting HTTP, gRPC and DNS; open HTTP connections finish their
///    batch, including persistent writes waiting for their commit (the
///    writer still runs); gRPC refuses new requests and ends its streams;
/// 2. stop the health checker;
/// 3. stop the sweeper;
/// 4. the notifier flushes what is due and closes the UDP socket;
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
    let http = tokio::net::TcpListener::from_std(listeners.http)?;
    let udp = tokio::net::UdpSocket::from_std(listeners.udp)?;
    let grpc_listener = tokio::net::TcpListener::from_std(listeners.grpc)?;
    let grace = app.config.grace();

    let writer = match &app.persist {
        Some(p) => {
            p.disk.set_min_free(app.config.data_min_free_bytes);
            p.start(app.store.clone())?
        }
        None => None,
    };
    let notifier = tokio::spawn(notifier::run(app.pushes(), udp, stages.notifier.clone()));
    let sweeper = tokio::spawn(sweeper::run(app.sweeps(), stages.sweeper.clone()));
    // Nothing without --members; stopped with the sweeper.
    let cluster_tasks = match &app.cluster {
        Some(c) => c.start(&app, &stages.sweeper),
        None => Vec::new(),
    };
    let health_stop = tokio_util::sync::CancellationToken::new();
    let health = tokio::spawn(health::run(app.health_checks(), health_stop.clone()));
    let connections = tokio_util::task::TaskTracker::new();
    let acceptor = tokio::spawn(http::serve(
        app.clone(),
        http,
        connections.clone(),
        stages.http.clone(),
    ));
    let mut grpc = tokio::spawn(grpc::serve(app.clone(), grpc_listener, stages.http.clone()));
    start_dns(&app, listeners.dns, &connections, &stages.http)?;

    shutdown.await;
    tracing::info!("shutting down");
    let ordered = async {
        // 1. Stop accepting; open connections finish their current batch;
        //    gRPC streams end.
        stages.http.cancel();
        let _ = acceptor.await;
        // tonic's graceful stop waits until every client closes its half of its
        // stream, which a connected 2.x client need not do: bounded, so that
        // one idle client cannot spend the whole grace period and cost the
        // notifier's last pushes and the writer's last commit.
        if tokio::time::timeout(grpc::DRAIN, &mut grpc).await.is_err() {
            grpc.abort();
        }
        connections.close();
        connections.wait().await;
        // 2. Stop the health checker.
        health_stop.cancel();
        let _ = health.await;
        // 3. Stop the sweeper.
        stages.sweeper.cancel();
        let _ = sweeper.await;
        for task in cluster_tasks {
            let _ = task.await;
        }
        // 4. The notifier flushes what is due and closes the UDP socket.
        stages.notifier.cancel();
        let _ = notifier.await;
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
