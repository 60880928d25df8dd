//! The server's configuration: one plain struct from clap, every flag also
//! read from a `REGISTRY_*` environment variable and a key of the
//! `--config` file ([`file`]).

pub mod file;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use registry_core::{LeaseTimeouts, StoreConfig};

/// A Nacos-compatible naming server: the 1.x HTTP API under `/nacos/v1/ns/`
/// with UDP push and acks, and the 2.x gRPC protocol.
#[derive(Clone, Debug, Parser)]
#[command(name = "registry", version, about, long_about = None)]
pub struct Config {
    /// TOML file of settings, one group table per area (`[listen]`,
    /// `[limits]`, `[cluster]`, `[raft]`, `[auth]`, ...); flags and
    /// `REGISTRY_*` variables override it. `registry config print` shows
    /// the effective settings and where each came from.
    #[arg(long = "config", env = "REGISTRY_CONFIG", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// HTTP listen address. Port 0 picks a free port; the bound address is
    /// printed on start.
    #[arg(long, env = "REGISTRY_LISTEN", default_value = "127.0.0.1:8848")]
    pub listen: SocketAddr,

    /// UDP address pushes are sent from and acks received on. Port 0 picks
    /// a free port.
    #[arg(long, env = "REGISTRY_UDP_LISTEN", default_value = "127.0.0.1:0")]
    pub udp_listen: SocketAddr,

    /// gRPC (Nacos 2.x) listen address. Default: the HTTP address with the
    /// port + 1000, which every Nacos 2.x client assumes (port 0 when the
    /// HTTP port is 0).
    #[arg(long, env = "REGISTRY_GRPC_LISTEN")]
    pub grpc_listen: Option<SocketAddr>,

    /// DNS listen address (UDP and TCP on the same port; port 0 picks a
    /// free one). Off by default. DNS reads skip auth: keep it private.
    #[arg(long, env = "REGISTRY_DNS_LISTEN")]
    pub dns_listen: Option<SocketAddr>,

    /// The zone the DNS door answers for; other names are refused.
    #[arg(long, env = "REGISTRY_DNS_DOMAIN", default_value = "nacos.")]
    pub dns_domain: String,

    /// TTL of the DNS door's records, in seconds (also the negative
    /// caching time its SOA gives).
    #[arg(long, env = "REGISTRY_DNS_TTL", default_value_t = 5)]
    pub dns_ttl: u32,

    /// Number of store shards (a power of two).
    #[arg(long, env = "REGISTRY_SHARDS", default_value_t = 64)]
    pub shards: usize,

    /// Worker threads of the async runtime (0 = one per core).
    #[arg(long, env = "REGISTRY_WORKERS", default_value_t = 0)]
    pub workers: usize,

    /// Beat interval told to clients, in ms (`clientBeatInterval`).
    #[arg(long, env = "REGISTRY_BEAT_INTERVAL_MS", default_value_t = 5_000)]
    pub beat_interval_ms: u32,

    /// Silence after which an ephemeral instance turns unhealthy, in ms.
    #[arg(long, env = "REGISTRY_BEAT_TIMEOUT_MS", default_value_t = 15_000)]
    pub beat_timeout_ms: u32,

    /// Silence after which an ephemeral instance is deleted, in ms.
    #[arg(long, env = "REGISTRY_DELETE_TIMEOUT_MS", default_value_t = 30_000)]
    pub delete_timeout_ms: u32,

    /// How often the sweeper looks for expired leases, in ms.
    #[arg(long, env = "REGISTRY_SWEEP_INTERVAL_MS", default_value_t = 500)]
    pub sweep_interval_ms: u64,

    /// How long an auto-created service may stay empty before removal, in ms.
    #[arg(long, env = "REGISTRY_EMPTY_SERVICE_TTL_MS", default_value_t = 60_000)]
    pub empty_service_ttl_ms: u64,

    /// Most instances one service may hold.
    #[arg(
        long,
        env = "REGISTRY_MAX_INSTANCES_PER_SERVICE",
        default_value_t = 200_000
    )]
    pub max_instances_per_service: usize,

    /// Most services the registry may hold.
    #[arg(long, env = "REGISTRY_MAX_SERVICES", default_value_t = 4_000_000)]
    pub max_services: usize,

    /// Refuse to delete a namespace that still holds services. Off by
    /// default: Nacos 3 deletes the namespace record and leaves its
    /// services in place, reachable by the id.
    #[arg(long, env = "REGISTRY_NAMESPACE_DELETE_PROTECTION", num_args = 0..=1,
          default_missing_value = "true", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub namespace_delete_protection: bool,

    /// Most open HTTP connections; past it new ones get a 503 and are closed.
    #[arg(long, env = "REGISTRY_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    /// Most requests being processed at once across all connections; past
    /// it requests are answered 503 at once.
    #[arg(long, env = "REGISTRY_MAX_INFLIGHT", default_value_t = 4_096)]
    pub max_inflight: usize,

    /// Longest request line (URL) accepted, in bytes.
    #[arg(long, env = "REGISTRY_MAX_URL_BYTES", default_value_t = 8_192)]
    pub max_url_bytes: usize,

    /// Largest request head (request line and headers), in bytes.
    #[arg(long, env = "REGISTRY_MAX_HEADER_BYTES", default_value_t = 16_384)]
    pub max_header_bytes: usize,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "REGISTRY_MAX_BODY_BYTES", default_value_t = 1_048_576)]
    pub max_body_bytes: usize,

    /// Largest instance or service metadata accepted, in bytes.
    #[arg(long, env = "REGISTRY_MAX_METADATA_BYTES", default_value_t = 16_384)]
    pub max_metadata_bytes: usize,

    /// Close connections idle for this long, in ms.
    #[arg(long, env = "REGISTRY_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,

    /// Time a whole request head may take to arrive, from its first byte,
    /// in ms; past it the request is answered 408 and the connection closed.
    /// Bytes trickling in do not extend it.
    #[arg(long, env = "REGISTRY_HEAD_TIMEOUT_MS", default_value_t = 10_000)]
    pub head_timeout_ms: u64,

    /// Time a whole request body may take to arrive, from the end of its
    /// head, in ms; past it the request is answered 408 and the connection
    /// closed.
    #[arg(long, env = "REGISTRY_BODY_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,

    /// Time one write of responses may take, in ms: a client that stops
    /// reading is disconnected after it.
    #[arg(long, env = "REGISTRY_WRITE_TIMEOUT_MS", default_value_t = 30_000)]
    pub write_timeout_ms: u64,

    /// Bytes of connection read buffers held at once, across connections.
    /// A request that would need more is answered 503 and its connection
    /// closed, so `--max-connections` × `--max-body-bytes` is never reached.
    #[arg(long, env = "REGISTRY_MAX_BUFFERED_BYTES", default_value_t = 512 * 1024 * 1024)]
    pub max_buffered_bytes: usize,

    /// Bytes of encoded instance lists kept cached at most.
    #[arg(long, env = "REGISTRY_LIST_CACHE_BYTES", default_value_t = 128 * 1024 * 1024)]
    pub list_cache_bytes: usize,

    /// A cached list not read for this long is dropped even under the
    /// budget, in ms (0: only the budget evicts). Longer than clients'
    /// poll intervals (3 s plain, 10 s push subscribers).
    #[arg(long, env = "REGISTRY_LIST_CACHE_IDLE_MS", default_value_t = crate::list_cache::DEFAULT_IDLE_MS)]
    pub list_cache_idle_ms: u64,

    /// Window in which changes to one service are merged into one push, in ms.
    #[arg(long, env = "REGISTRY_PUSH_WINDOW_MS", default_value_t = 50)]
    pub push_window_ms: u64,

    /// Time to wait for a push ack before the one resend, and after it
    /// before counting a failure, in ms.
    #[arg(long, env = "REGISTRY_PUSH_ACK_TIMEOUT_MS", default_value_t = 10_000)]
    pub push_ack_timeout_ms: u64,

    /// A subscriber that does not poll for this long stops receiving pushes, in ms.
    #[arg(long, env = "REGISTRY_SUBSCRIBER_LEASE_MS", default_value_t = 10_000)]
    pub subscriber_lease_ms: u64,

    /// Most subscriptions from one source IP address.
    #[arg(
        long,
        env = "REGISTRY_MAX_SUBSCRIBERS_PER_IP",
        default_value_t = 100_000
    )]
    pub max_subscribers_per_ip: usize,

    /// Most subscriptions in total.
    #[arg(long, env = "REGISTRY_MAX_SUBSCRIBERS", default_value_t = 1_000_000)]
    pub max_subscribers: usize,

    /// Largest gRPC request body answered normally, in bytes; a larger one
    /// gets a 503 error payload.
    #[arg(long, env = "REGISTRY_GRPC_MAX_BODY_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub grpc_max_body_bytes: usize,

    /// Most gRPC connections set up at once; past it the server check is
    /// answered with a 503 error payload.
    #[arg(long, env = "REGISTRY_GRPC_MAX_CONNECTIONS", default_value_t = 20_000)]
    pub grpc_max_connections: usize,

    /// Most TCP sockets open on the gRPC port at once, set up or not; one over
    /// it is closed at accept. Leaves room above `--grpc-max-connections` for
    /// clients between connect and setup.
    #[arg(long, env = "REGISTRY_GRPC_MAX_SOCKETS", default_value_t = 22_000)]
    pub grpc_max_sockets: usize,

    /// Most subscriptions one gRPC connection may hold.
    #[arg(
        long,
        env = "REGISTRY_GRPC_MAX_SUBSCRIPTIONS_PER_CONNECTION",
        default_value_t = 10_000
    )]
    pub grpc_max_subscriptions_per_connection: usize,

    /// A gRPC connection quiet this long is sent a `ClientDetectionRequest`, in ms.
    #[arg(long, env = "REGISTRY_GRPC_IDLE_MS", default_value_t = 20_000)]
    pub grpc_idle_ms: u64,

    /// A connection that leaves a detection unanswered this long is dropped,
    /// and its instances removed, in ms.
    #[arg(long, env = "REGISTRY_GRPC_DETECT_TIMEOUT_MS", default_value_t = 3_000)]
    pub grpc_detect_timeout_ms: u64,

    /// Most pushes awaiting an ack; past it pushes are skipped and counted.
    #[arg(long, env = "REGISTRY_MAX_PENDING_ACKS", default_value_t = 1_000_000)]
    pub max_pending_acks: usize,

    /// Time allowed for a graceful shutdown, in ms.
    #[arg(long, env = "REGISTRY_SHUTDOWN_GRACE_MS", default_value_t = 5_000)]
    pub shutdown_grace_ms: u64,

    /// Directory of the embedded database holding persistent instances
    /// (`ephemeral=false`) and explicitly created services. Without it they
    /// live in memory only and are lost on restart (logged at start).
    #[arg(long, env = "REGISTRY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,

    /// Most persistent writes waiting for their commit; past it they are
    /// answered 503 before anything is applied.
    #[arg(long, env = "REGISTRY_MAX_PENDING_WRITES", default_value_t = 16_384)]
    pub max_pending_writes: usize,

    /// Most persistent writes committed in one transaction (one fsync).
    #[arg(long, env = "REGISTRY_MAX_COMMIT_BATCH", default_value_t = 4_096)]
    pub max_commit_batch: usize,

    /// Free space kept in reserve under `--data-dir`, in bytes: below it,
    /// persistent writes are refused (HTTP 507) before anything is applied,
    /// and accepted again once space is freed.
    #[arg(long, env = "REGISTRY_DATA_MIN_FREE_BYTES", default_value_t = crate::disk::DEFAULT_MIN_FREE)]
    pub data_min_free_bytes: u64,

    /// Memory the embedded database may use for its page cache, in bytes.
    #[arg(long, env = "REGISTRY_DATA_CACHE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub data_cache_bytes: usize,

    /// How often persistent instances are health-checked, in ms (0 = never).
    #[arg(
        long,
        env = "REGISTRY_HEALTH_CHECK_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub health_check_interval_ms: u64,

    /// Time one health check (connect, and for HTTP the status line) may
    /// take before it counts as a failure, in ms.
    #[arg(
        long,
        env = "REGISTRY_HEALTH_CHECK_TIMEOUT_MS",
        default_value_t = 2_000
    )]
    pub health_check_timeout_ms: u64,

    /// Most health checks in flight at once.
    #[arg(long, env = "REGISTRY_HEALTH_CHECK_CONCURRENCY", default_value_t = 64)]
    pub health_check_concurrency: usize,

    /// Consecutive results disagreeing with an instance's health before it
    /// flips (Nacos `checkTimes`).
    #[arg(long, env = "REGISTRY_HEALTH_CHECK_THRESHOLD", default_value_t = 3)]
    pub health_check_threshold: u32,

    /// Checker for clusters that name none: `TCP` (connect), `HTTP[:/path]`
    /// (GET expecting 2xx), `MYSQL:{"user":..,"pwd":..,"cmd":..}` (log in
    /// and run `cmd`; a `read_only` server fails) or `NONE`. A service overrides it with the
    /// metadata `preserved.health.checker` (all its clusters) or
    /// `preserved.health.checker.<cluster>`.
    #[arg(long, env = "REGISTRY_HEALTH_CHECKER", default_value = "TCP")]
    pub health_checker: String,

    /// File of users allowed in (`name:pbkdf2-sha256$ITERATIONS$SALT_HEX$HASH_HEX`
    /// per line; `registry users add NAME --file FILE` writes them). When given, every API call but the login and `/metrics`
    /// needs an `accessToken` from `POST /nacos/v1/auth/login`. There are no
    /// default users and no default secret.
    #[arg(long, env = "REGISTRY_AUTH_USERS")]
    pub auth_users: Option<PathBuf>,

    /// Serve without `--auth-users` on an address other than loopback.
    /// Without it such a start is refused: anyone who reaches the port
    /// could change or deregister every service (Nacos 3 requires a login
    /// for its admin and console APIs by default). Loopback needs no flag.
    #[arg(long, env = "REGISTRY_ALLOW_UNAUTHENTICATED", num_args = 0..=1,
          default_missing_value = "true", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub allow_unauthenticated: bool,

    /// Lifetime of an access token, in seconds (Nacos's default).
    #[arg(long, env = "REGISTRY_AUTH_TOKEN_TTL_SECS", default_value_t = 18_000)]
    pub auth_token_ttl_secs: u64,

    /// Most password verifications running at once; past it a login is
    /// answered 503 (each costs a deliberate burst of CPU).
    #[arg(long, env = "REGISTRY_AUTH_MAX_LOGINS", default_value_t = 2)]
    pub auth_max_logins: usize,

    /// Every member of the cluster by its HTTP address, comma-separated
    /// (`ip:port,ip:port,...`), this node included. Without it (and
    /// without `--members-file`) the registry runs as a single node.
    #[arg(long, env = "REGISTRY_MEMBERS", value_delimiter = ',')]
    pub members: Vec<String>,

    /// A Nacos `cluster.conf`: one member `ip:port` per line, `#` comments.
    #[arg(long, env = "REGISTRY_MEMBERS_FILE")]
    pub members_file: Option<PathBuf>,

    /// This node's address as the member list names it (default: the
    /// listen address).
    #[arg(long, env = "REGISTRY_ADVERTISE")]
    pub advertise: Option<String>,

    /// This node joins a running cluster: with `--data-dir` it never starts
    /// a Raft group of its own and waits for `registry members add` on a
    /// member to add it (a learner until it has caught up, then a voter).
    /// Its `--members` must name at least one running member.
    #[arg(long, env = "REGISTRY_CLUSTER_JOIN", num_args = 0..=1,
          default_missing_value = "true", default_value_t = false,
          action = clap::ArgAction::Set)]
    pub cluster_join: bool,

    /// How often each peer is probed, in ms.
    #[arg(
        long,
        env = "REGISTRY_CLUSTER_PROBE_INTERVAL_MS",
        default_value_t = 2_000
    )]
    pub cluster_probe_interval_ms: u64,

    /// Failed probes in a row after which a peer is DOWN.
    #[arg(long, env = "REGISTRY_CLUSTER_PROBE_FAILURES", default_value_t = 3)]
    pub cluster_probe_failures: u32,

    /// Time a relayed request may take before the client gets a 503, in ms.
    #[arg(
        long,
        env = "REGISTRY_CLUSTER_RELAY_TIMEOUT_MS",
        default_value_t = 3_000
    )]
    pub cluster_relay_timeout_ms: u64,

    /// Window in which changes to one service merge into one replication
    /// message, in ms (Nacos uses 1000).
    #[arg(long, env = "REGISTRY_DISTRO_SYNC_WINDOW_MS", default_value_t = 100)]
    pub distro_sync_window_ms: u64,

    /// How often a node sends the checksums of the services it is
    /// responsible for, in ms.
    #[arg(
        long,
        env = "REGISTRY_DISTRO_VERIFY_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub distro_verify_interval_ms: u64,

    /// How long a synced Nacos 2.x client outlives its responsible node's
    /// last renewal, in ms: it covers the client's reconnect to another
    /// node and its redo (Nacos keeps them 3 minutes:
    /// `nacos.naming.client.expired.time`).
    #[arg(
        long,
        env = "REGISTRY_CLIENT_EXPIRE_GRACE_MS",
        default_value_t = 10_000
    )]
    pub client_expire_grace_ms: u64,

    /// How often a node sends the revisions of its 2.x clients to its
    /// peers (renewal and repair), in ms; well under the grace.
    #[arg(
        long,
        env = "REGISTRY_CLIENT_VERIFY_INTERVAL_MS",
        default_value_t = 2_000
    )]
    pub client_verify_interval_ms: u64,

    /// File holding the secret peers present to each other (at least 16
    /// characters). Required with `--auth-users` in a cluster; there is
    /// no built-in one.
    #[arg(long, env = "REGISTRY_CLUSTER_SECRET_FILE")]
    pub cluster_secret_file: Option<PathBuf>,

    /// Raft (persistent data in a cluster with `--data-dir`): the shortest
    /// election timeout in ms; a follower that hears no leader for a random
    /// time between this and twice this starts an election. Sized for
    /// loopback and LAN: a new leader within a few seconds of a crash.
    #[arg(
        long,
        env = "REGISTRY_RAFT_ELECTION_TIMEOUT_MS",
        default_value_t = 1_000
    )]
    pub raft_election_timeout_ms: u64,

    /// Raft: the leader's heartbeat interval in ms (well under the election
    /// timeout).
    #[arg(long, env = "REGISTRY_RAFT_HEARTBEAT_MS", default_value_t = 200)]
    pub raft_heartbeat_ms: u64,

    /// Raft: entries applied since the last snapshot after which a new
    /// snapshot is built and the log before it compacted.
    #[arg(long, env = "REGISTRY_RAFT_SNAPSHOT_LOGS", default_value_t = 5_000)]
    pub raft_snapshot_logs: u64,

    /// Raft: how long a persistent write may wait for its commit before the
    /// client gets a 503 (no majority reachable); in ms.
    #[arg(long, env = "REGISTRY_RAFT_WRITE_TIMEOUT_MS", default_value_t = 5_000)]
    pub raft_write_timeout_ms: u64,

    /// Log format: `text` or `json`.
    #[arg(long, env = "REGISTRY_LOG_FORMAT", default_value = "text")]
    pub log_format: String,
}

impl Config {
    /// Defaults for tests: loopback, port 0 everywhere, few shards.
    pub fn for_test() -> Config {
        let mut c = Config::parse_from(["registry"]);
        c.listen = "127.0.0.1:0".parse().expect("valid address");
        c.grpc_listen = Some("127.0.0.1:0".parse().expect("valid address"));
        c.shards = 8;
        c.workers = 2;
        // In-process tests register persistent instances at made-up
        // addresses: never probe them (tests/health.rs turns this on).
        c.health_check_interval_ms = 0;
        c
    }

    /// Checks what clap cannot.
    ///
    /// # Errors
    /// A message naming the bad setting.
    pub fn validate(&self) -> Result<(), String> {
        self.store_config().validate()?;
        if self.client_verify_interval_ms == 0
            || self.client_verify_interval_ms >= self.client_expire_grace_ms
        {
            return Err(format!(
                "--client-verify-interval-ms ({}) must be above 0 and below \
                 --client-expire-grace-ms ({}): renewals must come within the grace",
                self.client_verify_interval_ms, self.client_expire_grace_ms
            ));
        }
        if self.max_connections == 0 || self.max_inflight == 0 {
            return Err("--max-connections and --max-inflight must be positive".into());
        }
        if self.head_timeout_ms == 0 || self.body_timeout_ms == 0 || self.write_timeout_ms == 0 {
            return Err(
                "--head-timeout-ms, --body-timeout-ms and --write-timeout-ms must be positive"
                    .into(),
            );
        }
        if self.max_buffered_bytes < crate::buffers::READ_CHUNK {
            return Err(format!(
                "--max-buffered-bytes must hold at least one read buffer ({} bytes)",
                crate::buffers::READ_CHUNK
            ));
        }
        if self.sweep_interval_ms == 0 {
            return Err("--sweep-interval-ms must be positive".into());
        }
        if self.max_pending_writes == 0 || self.max_commit_batch == 0 {
            return Err("--max-pending-writes and --max-commit-batch must be positive".into());
        }
        if self.health_check_timeout_ms == 0
            || self.health_check_concurrency == 0
            || self.health_check_threshold == 0
        {
            return Err("--health-check-timeout-ms, --health-check-concurrency and \
                 --health-check-threshold must be positive"
                .into());
        }
        crate::health::Checker::from_metadata_value(&self.health_checker)
            .map_err(|e| format!("--health-checker: {e}"))?;
        if self.auth_token_ttl_secs == 0 || self.auth_max_logins == 0 {
            return Err("--auth-token-ttl-secs and --auth-max-logins must be positive".into());
        }
        if self.grpc_addr().is_none() {
            return Err("--grpc-listen: the HTTP port + 1000 is past 65535; set it".into());
        }
        if self.grpc_max_body_bytes == 0
            || self.grpc_max_connections == 0
            || self.grpc_max_sockets == 0
            || self.grpc_max_subscriptions_per_connection == 0
            || self.grpc_idle_ms == 0
            || self.grpc_detect_timeout_ms == 0
        {
            return Err("the --grpc-* limits and times must be positive".into());
        }
        if self.dns_listen.is_some() {
            registry_proto::dns::Responder::new(&self.dns_domain, self.dns_ttl)
                .map_err(|e| e.to_string())?;
        }
        self.check_exposure()?;
        if !matches!(self.log_format.as_str(), "text" | "json") {
            return Err(format!(
                "--log-format must be text or json, got {}",
                self.log_format
            ));
        }
        Ok(())
    }

    /// Refuses an open door off loopback: a listener (HTTP, which also
    /// carries the cluster's traffic, gRPC, UDP or DNS) bound to any other
    /// address while auth is off, unless `--allow-unauthenticated` says the
    /// operator means it.
    fn check_exposure(&self) -> Result<(), String> {
        if self.auth_users.is_some() || self.allow_unauthenticated {
            return Ok(());
        }
        let listeners = [
            ("--listen", Some(self.listen)),
            ("--grpc-listen", self.grpc_addr()),
            ("--udp-listen", Some(self.udp_listen)),
            ("--dns-listen", self.dns_listen),
        ];
        let exposed = listeners.into_iter().find_map(|(flag, addr)| {
            addr.filter(|a| !a.ip().to_canonical().is_loopback())
                .map(|a| (flag, a))
        });
        match exposed {
            None => Ok(()),
            Some((flag, addr)) => Err(format!(
                "refusing to serve without auth on {flag} {addr}, which is not loopback: \
                 anyone who reaches it could change or deregister every service; \
                 give --auth-users FILE, or --allow-unauthenticated to serve it open"
            )),
        }
    }

    /// The store's part of the configuration.
    pub fn store_config(&self) -> StoreConfig {
        StoreConfig {
            shards: self.shards,
            timeouts: LeaseTimeouts {
                beat_interval_ms: self.beat_interval_ms,
                beat_timeout_ms: self.beat_timeout_ms,
                delete_timeout_ms: self.delete_timeout_ms,
            },
            empty_service_ttl_ms: self.empty_service_ttl_ms,
            max_instances_per_service: self.max_instances_per_service,
            max_services: self.max_services,
            ..StoreConfig::default()
        }
    }

    /// The gRPC address: `--grpc-listen`, else the HTTP address with the port
    /// + 1000 (0 stays 0). `None` when that port does not exist.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        if let Some(a) = self.grpc_listen {
            return Some(a);
        }
        let port = match self.listen.port() {
            0 => 0,
            p => p.checked_add(registry_proto::grpc::PORT_OFFSET)?,
        };
        Some(SocketAddr::new(self.listen.ip(), port))
    }

    /// The health checker's part of the configuration.
    pub fn health_settings(&self) -> crate::health::HealthSettings {
        crate::health::HealthSettings {
            interval: Duration::from_millis(self.health_check_interval_ms),
            timeout: Duration::from_millis(self.health_check_timeout_ms),
            concurrency: self.health_check_concurrency,
            threshold: self.health_check_threshold,
            default_checker: self.default_checker(),
        }
    }

    /// The checker of clusters whose service names none (`--health-checker`).
    pub fn default_checker(&self) -> crate::health::Checker {
        // Validated at start; a bad value falls back to Nacos's default.
        crate::health::Checker::from_metadata_value(&self.health_checker)
            .unwrap_or(crate::health::Checker::Tcp)
    }

    /// The shutdown grace period.
    pub fn grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}
