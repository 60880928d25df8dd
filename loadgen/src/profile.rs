//! Load profiles: what to simulate, read from TOML.
//!
//! A profile names the fleet (services, instances, subscribers), the rates of each
//! phase of the [`crate::plan`], the connection pool and the generator's own health
//! limits. The built-in profiles live in `loadgen/profiles/*.toml` and are compiled
//! into the binary with `include_str!`, so `loadgen run --profile smoke` works from a
//! fresh clone; `--profile PATH` reads any other file. Every section and field is
//! optional except `name` (defaults are the smoke profile's), unknown fields are
//! errors (a typo must not silently fall back to a default), and command-line
//! [`Overrides`] are applied on top before [`Profile::validate`].

use std::fmt;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::segment::Segment;

/// The built-in profiles: `(name, TOML text)`. The first is the default.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("smoke", include_str!("../profiles/smoke.toml")),
    (
        "nacos-1x-report",
        include_str!("../profiles/nacos-1x-report.toml"),
    ),
    (
        "heartbeat-storm",
        include_str!("../profiles/heartbeat-storm.toml"),
    ),
    ("push-fanout", include_str!("../profiles/push-fanout.toml")),
    ("churn", include_str!("../profiles/churn.toml")),
    ("grpc-smoke", include_str!("../profiles/grpc-smoke.toml")),
    (
        "nacos-2x-report",
        include_str!("../profiles/nacos-2x-report.toml"),
    ),
    (
        "nacos-2x-restart",
        include_str!("../profiles/nacos-2x-restart.toml"),
    ),
    (
        "nacos-2x-full-restart",
        include_str!("../profiles/nacos-2x-full-restart.toml"),
    ),
];

/// The profile `loadgen run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "smoke";

/// Why a profile could not be loaded or is not usable. Each variant says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Neither a built-in name nor a readable file. Run `loadgen profiles` for the names.
    #[error("no built-in profile or file named {name:?} (built-in: {known})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// The built-in names, comma-separated.
        known: String,
    },
    /// The file exists but could not be read.
    #[error("cannot read profile {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Not valid TOML, or a field that does not exist or has the wrong type.
    #[error("invalid profile {name}: {source}")]
    Toml {
        /// The profile name or path.
        name: String,
        /// The parser's message (it names the line and field).
        #[source]
        source: toml::de::Error,
    },
    /// A value out of range or inconsistent with another; the text names the field.
    #[error("invalid profile {name}: {reason}")]
    Invalid {
        /// The profile name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// A whole load profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Short name, shown in reports and used in file names.
    pub name: String,
    /// One line for `loadgen profiles`.
    #[serde(default)]
    pub description: String,
    /// Gates evaluated at the end (`beat.p99<5ms`, `*.errors<=0`), in addition to
    /// `--threshold` flags. See [`crate::threshold`].
    #[serde(default)]
    pub thresholds: Vec<String>,
    /// What is simulated.
    #[serde(default)]
    pub fleet: Fleet,
    /// Registering the fleet.
    #[serde(default)]
    pub load: Load,
    /// The measured middle of the run.
    #[serde(default)]
    pub steady: Steady,
    /// Deregistering everything at the end.
    #[serde(default)]
    pub drain: Drain,
    /// Push subscribers.
    #[serde(default)]
    pub subscribers: Subscribers,
    /// The HTTP connection pool.
    #[serde(default)]
    pub connections: Connections,
    /// The generator's own settings and health limits.
    #[serde(default)]
    pub generator: Generator,
    /// The protocol the fleet speaks: `http` (Nacos 1.x, the default), `grpc`
    /// (Nacos 2.x, see [`crate::grpc`]) or `v3` (the v3 client HTTP API, see
    /// [`crate::dialect`]).
    #[serde(default)]
    pub protocol: Protocol,
    /// The 2.x fleet's settings (used when `protocol = "grpc"`).
    #[serde(default)]
    pub grpc: GrpcFleet,
    /// Faults run in the steady phase besides `--fault` ([`crate::fault`]). The
    /// command runs under `sh -c`, so a profile names the operator's script by a
    /// variable (`command = '"$RESTART_NODES" rolling'`). Absent from the
    /// serialized profile when empty, so other profiles' hashes stay as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<ProfileFault>,
}

/// One `[[faults]]` entry: `at` into the steady phase, `command` by `sh -c`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFault {
    /// When, after the start of the steady phase.
    pub at: Dur,
    /// What to run.
    pub command: String,
}

/// The protocol a run speaks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// Nacos 1.x: HTTP requests, beats, UDP push subscribers.
    #[default]
    Http,
    /// Nacos 2.x: one gRPC connection per simulated client, pushes on its stream.
    Grpc,
    /// Nacos 3.x's v3 client HTTP API: register, heartbeat, list and deregister
    /// under `/nacos/v3/client/ns/`; subscribers poll (3.x has no UDP push).
    V3,
}

impl Protocol {
    /// The HTTP dialect of an HTTP fleet (`None`: the 2.x gRPC fleet).
    pub fn dialect(self) -> Option<crate::dialect::Dialect> {
        match self {
            Protocol::Http => Some(crate::dialect::Dialect::V1),
            Protocol::V3 => Some(crate::dialect::Dialect::V3),
            Protocol::Grpc => None,
        }
    }
}

/// The simulated 2.x clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcFleet {
    /// Clients, each with its own gRPC connection; instance `i` belongs to client
    /// `i % clients`, subscription `j` to client `j % clients`.
    pub clients: u32,
    /// Register each client's instances of a service in one `BatchInstanceRequest`
    /// (one `register` operation per batch) instead of one request per instance.
    pub batch: bool,
}

impl Default for GrpcFleet {
    fn default() -> Self {
        GrpcFleet {
            clients: 100,
            batch: false,
        }
    }
}

/// The simulated fleet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Fleet {
    /// Services instances are spread over (instance `i` belongs to service `i % services`).
    pub services: u32,
    /// Instances registered in the load phase, each beating at the server's
    /// `clientBeatInterval`.
    pub instances: u32,
    /// UDP push subscribers, each a real socket subscribed to one watched service.
    pub subscribers: u32,
    /// Services `0..watched_services` are the ones subscribers watch (subscriber `j`
    /// watches service `j % watched_services`). Changes to them are tracked for
    /// change-to-receipt latency and convergence.
    pub watched_services: u32,
    /// `namespaceId`.
    pub namespace: String,
    /// `groupName`.
    pub group: String,
    /// Service names are `{prefix}-{index}`.
    pub service_prefix: String,
    /// `clusterName` of every instance.
    pub cluster: String,
    /// The port every instance registers (instances differ by IP: `10.x.y.z`).
    pub port: u16,
    /// Beat interval until the server's first beat reply says otherwise
    /// (`clientBeatInterval`); the first beat is sent this long after registering.
    pub beat_interval: Dur,
    /// Beat style: `light` (identity only, what the Java client sends while the server
    /// says `lightBeatEnabled`) or `full` (with the `beat` JSON body, which lets a
    /// server re-register an expired instance by itself).
    pub beat: BeatStyle,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            services: 1000,
            instances: 10_000,
            subscribers: 1000,
            watched_services: 100,
            namespace: "public".into(),
            group: "DEFAULT_GROUP".into(),
            service_prefix: "loadgen".into(),
            cluster: "DEFAULT".into(),
            port: 8080,
            beat_interval: Dur(Duration::from_secs(5)),
            beat: BeatStyle::Light,
        }
    }
}

/// How beats are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BeatStyle {
    /// Identity parameters only.
    Light,
    /// With the `beat` JSON in a form body, as the Java client's first beat.
    Full,
}

/// The load phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Load {
    /// Registrations per second.
    pub rate: f64,
}

impl Default for Load {
    fn default() -> Self {
        Load { rate: 5000.0 }
    }
}

/// The steady phase: beats continue, plus this mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Steady {
    /// How long it lasts.
    pub duration: Dur,
    /// Registrations per second (of instances deregistered earlier, or new ones).
    pub register_rate: f64,
    /// Deregistrations per second (of random registered instances).
    pub deregister_rate: f64,
    /// `instance/list` queries per second (random services, no subscription).
    pub query_rate: f64,
    /// Subscribers per second that leave (close their socket) and are replaced by a
    /// new one on a new port.
    pub subscriber_churn_rate: f64,
}

impl Default for Steady {
    fn default() -> Self {
        Steady {
            duration: Dur(Duration::from_secs(10)),
            register_rate: 0.0,
            deregister_rate: 0.0,
            query_rate: 0.0,
            subscriber_churn_rate: 0.0,
        }
    }
}

/// The drain phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Drain {
    /// Whether to deregister everything at the end (otherwise the server expires the
    /// instances after its delete timeout).
    pub enabled: bool,
    /// Deregistrations per second.
    pub rate: f64,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            enabled: true,
            rate: 5000.0,
        }
    }
}

/// Push subscribers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Subscribers {
    /// How often each subscriber re-polls `instance/list` (Nacos 1.x: `cacheMillis`,
    /// 10 s in push mode), which also renews its subscription.
    pub poll_interval: Dur,
    /// Subscribers joining per second at the start of the steady phase; 0 means all
    /// within the first second.
    pub join_rate: f64,
}

impl Default for Subscribers {
    fn default() -> Self {
        Subscribers {
            poll_interval: Dur(Duration::from_secs(10)),
            join_rate: 0.0,
        }
    }
}

/// The HTTP connection pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Connections {
    /// Keep-alive connections in total, split over the workers.
    pub count: u32,
    /// Loopback source addresses `127.0.0.1 ..= 127.0.0.N` the connections (and the
    /// subscribers' UDP sockets) are spread over. Only used for a loopback target.
    pub source_ips: u8,
    /// Most requests in flight per connection (1 = one request at a time, like a
    /// Java client; more pipelines requests on the connection).
    pub pipeline: u32,
    /// A request without a response after this long counts as a timeout and its
    /// connection is reopened.
    pub timeout: Dur,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            count: 32,
            source_ips: 8,
            pipeline: 4,
            timeout: Dur(Duration::from_secs(10)),
        }
    }
}

/// The generator's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Generator {
    /// Worker threads; 0 means one per available core (as `taskset` allows), less the
    /// embedded registry's workers when loadgen starts one.
    pub workers: u32,
    /// The run counts as "generator fell behind" when the p99 of the scheduling lag
    /// (dispatch time minus intended time) is above this ...
    pub max_p99_lag: Dur,
    /// ... or when any operation was dispatched later than this.
    pub max_lag: Dur,
    /// How long to wait at the end of the steady phase and of the drain for
    /// subscribers to converge and in-flight changes to finish.
    pub settle_timeout: Dur,
    /// Workers spin instead of sleeping when idle (`--busy-poll`). On one host the
    /// sender of a loopback segment runs the receiver's wake-up: every response the
    /// server sends to a sleeping generator costs the server a cross-core wake-up
    /// (11 % of the registry's CPU at 2.2M instances on this project's 2-core VM),
    /// which a generator on another machine would never charge it. A spinning
    /// generator is never asleep, so the server's CPU is spent on the server's work.
    /// The generator's own CPU figures then read 100 % and mean nothing. Written into
    /// the report's profile only when on, so the default keeps every config hash.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub busy_poll: bool,
}

impl Default for Generator {
    fn default() -> Self {
        Generator {
            workers: 0,
            max_p99_lag: Dur(Duration::from_millis(10)),
            max_lag: Dur(Duration::from_millis(100)),
            settle_timeout: Dur(Duration::from_secs(15)),
            busy_poll: false,
        }
    }
}

/// Command-line overrides, applied on top of a profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--services`
    pub services: Option<u32>,
    /// `--instances`
    pub instances: Option<u32>,
    /// `--subscribers`
    pub subscribers: Option<u32>,
    /// `--watched-services`
    pub watched_services: Option<u32>,
    /// `--rate`: registrations per second in the load phase (and deregistrations in
    /// the drain).
    pub rate: Option<f64>,
    /// `--duration`: the steady phase.
    pub duration: Option<Duration>,
    /// `--query-rate`
    pub query_rate: Option<f64>,
    /// `--churn-rate`: both the register and the deregister rate of the steady phase.
    pub churn_rate: Option<f64>,
    /// `--connections`
    pub connections: Option<u32>,
    /// `--pipeline`
    pub pipeline: Option<u32>,
    /// `--workers`
    pub workers: Option<u32>,
    /// `--no-drain`
    pub no_drain: bool,
    /// `--busy-poll`
    pub busy_poll: bool,
    /// `--protocol`
    pub protocol: Option<Protocol>,
    /// `--grpc-clients`
    pub grpc_clients: Option<u32>,
}

impl Profile {
    /// A built-in profile by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Profile::from_toml(name_or_path, text);
        }
        let path = Path::new(name_or_path);
        if path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
                path: name_or_path.to_owned(),
                source,
            })?;
            return Profile::from_toml(name_or_path, &text);
        }
        Err(ProfileError::Unknown {
            name: name_or_path.to_owned(),
            known: BUILT_IN
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// Parses TOML text; `origin` names it in errors.
    pub fn from_toml(origin: &str, text: &str) -> Result<Profile, ProfileError> {
        toml::from_str(text).map_err(|source| ProfileError::Toml {
            name: origin.to_owned(),
            source,
        })
    }

    /// Every built-in profile, parsed.
    pub fn built_in() -> Result<Vec<Profile>, ProfileError> {
        BUILT_IN
            .iter()
            .map(|(name, text)| Profile::from_toml(name, text))
            .collect()
    }

    /// Applies command-line overrides.
    pub fn apply(&mut self, o: &Overrides) {
        if let Some(p) = o.protocol {
            self.protocol = p;
        }
        if let Some(c) = o.grpc_clients {
            self.grpc.clients = c;
        }
        let f = &mut self.fleet;
        if let Some(v) = o.services {
            f.services = v;
            f.watched_services = f.watched_services.min(v);
        }
        if let Some(v) = o.instances {
            f.instances = v;
        }
        if let Some(v) = o.subscribers {
            f.subscribers = v;
        }
        if let Some(v) = o.watched_services {
            f.watched_services = v;
        }
        if let Some(v) = o.rate {
            self.load.rate = v;
            self.drain.rate = v;
        }
        if let Some(v) = o.duration {
            self.steady.duration = Dur(v);
        }
        if let Some(v) = o.query_rate {
            self.steady.query_rate = v;
        }
        if let Some(v) = o.churn_rate {
            self.steady.register_rate = v;
            self.steady.deregister_rate = v;
        }
        if let Some(v) = o.connections {
            self.connections.count = v;
        }
        if let Some(v) = o.pipeline {
            self.connections.pipeline = v;
        }
        if let Some(v) = o.workers {
            self.generator.workers = v;
        }
        if o.no_drain {
            self.drain.enabled = false;
        }
        if o.busy_poll {
            self.generator.busy_poll = true;
        }
    }

    /// Checks ranges and consistency.
    pub fn validate(&self) -> Result<(), ProfileError> {
        self.check_fleet()
            .and_then(|()| self.check_rates())
            .and_then(|()| self.check_limits())
            .map_err(|reason| ProfileError::Invalid {
                name: self.name.clone(),
                reason,
            })
    }

    /// The fleet's sizes and names.
    fn check_fleet(&self) -> Result<(), String> {
        let f = &self.fleet;
        if f.services == 0 {
            return Err("fleet.services must be at least 1".into());
        }
        if f.instances > MAX_INSTANCES {
            return Err(format!("fleet.instances must be at most {MAX_INSTANCES}"));
        }
        if f.subscribers > 0 && f.watched_services == 0 {
            return Err(
                "fleet.watched_services must be at least 1 when there are subscribers".into(),
            );
        }
        if f.watched_services > f.services {
            return Err(format!(
                "fleet.watched_services ({}) must not exceed fleet.services ({})",
                f.watched_services, f.services
            ));
        }
        if f.service_prefix.is_empty()
            || !f
                .service_prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        {
            return Err(
                "fleet.service_prefix must be non-empty and use only [0-9a-zA-Z._:-]".into(),
            );
        }
        if f.namespace.is_empty() || f.group.is_empty() || f.cluster.is_empty() {
            return Err("fleet.namespace, fleet.group and fleet.cluster must not be empty".into());
        }
        Ok(())
    }

    /// Every rate finite and non-negative; the ones a phase needs, positive.
    fn check_rates(&self) -> Result<(), String> {
        let f = &self.fleet;
        for (field, v) in [
            ("load.rate", self.load.rate),
            ("drain.rate", self.drain.rate),
            ("steady.register_rate", self.steady.register_rate),
            ("steady.deregister_rate", self.steady.deregister_rate),
            ("steady.query_rate", self.steady.query_rate),
            (
                "steady.subscriber_churn_rate",
                self.steady.subscriber_churn_rate,
            ),
            ("subscribers.join_rate", self.subscribers.join_rate),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{field} must be a finite number >= 0, got {v}"));
            }
        }
        if f.instances > 0 && self.load.rate <= 0.0 {
            return Err("load.rate must be positive when there are instances".into());
        }
        if self.drain.enabled && self.drain.rate <= 0.0 {
            return Err("drain.rate must be positive when the drain is enabled".into());
        }
        Ok(())
    }

    /// Connections, timeouts, intervals and the worker count within range.
    fn check_limits(&self) -> Result<(), String> {
        let f = &self.fleet;
        let c = &self.connections;
        if c.count == 0 || c.pipeline == 0 {
            return Err("connections.count and connections.pipeline must be at least 1".into());
        }
        if c.source_ips == 0 || c.source_ips > 250 {
            return Err("connections.source_ips must be within 1..=250".into());
        }
        if c.timeout.0 < Duration::from_millis(10) {
            return Err("connections.timeout must be at least 10ms".into());
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&f.beat_interval.0) {
            return Err("fleet.beat_interval must be within 100ms..=1h".into());
        }
        if self.subscribers.poll_interval.0 < Duration::from_millis(100) {
            return Err("subscribers.poll_interval must be at least 100ms".into());
        }
        if self.generator.workers > 256 {
            return Err("generator.workers must be at most 256".into());
        }
        Ok(())
    }

    /// The slice of this profile that `segment` runs (see [`crate::segment`]): its
    /// instances and subscribers, and `1/N` of every rate. Services and watched
    /// services keep the whole profile's numbers: names follow from them.
    pub fn slice(&self, segment: Segment) -> Result<Profile, ProfileError> {
        if segment.is_whole() {
            return Ok(self.clone());
        }
        let f = &self.fleet;
        let bad = |reason: String| {
            Err(ProfileError::Invalid {
                name: self.name.clone(),
                reason,
            })
        };
        if segment.owned(f.services) == 0 {
            return bad(format!(
                "segment {segment} owns no service: fleet.services ({}) must be at least {}",
                f.services, segment.count
            ));
        }
        if f.subscribers > 0 && segment.owned(f.watched_services) == 0 {
            return bad(format!(
                "segment {segment} owns no watched service: fleet.watched_services ({}) must be at least {}",
                f.watched_services, segment.count
            ));
        }
        let mut slice = self.clone();
        slice.fleet.instances = segment.items(f.instances, f.services);
        slice.fleet.subscribers = if f.subscribers > 0 {
            segment.items(f.subscribers, f.watched_services)
        } else {
            0
        };
        let n = f64::from(segment.count);
        slice.load.rate /= n;
        slice.drain.rate /= n;
        slice.steady.register_rate /= n;
        slice.steady.deregister_rate /= n;
        slice.steady.query_rate /= n;
        slice.steady.subscriber_churn_rate /= n;
        slice.subscribers.join_rate /= n;
        Ok(slice)
    }

    /// This profile at `multiple` times its load: the fleet (instances, subscribers)
    /// and every rate multiplied together, as `loadgen capacity` steps it. Durations
    /// stay, so a step takes as long as the profile.
    pub fn scaled(&self, multiple: f64) -> Profile {
        let mut p = self.clone();
        let times = |n: u32| ((f64::from(n) * multiple).round() as u32).min(MAX_INSTANCES);
        p.fleet.instances = times(p.fleet.instances);
        p.fleet.subscribers = times(p.fleet.subscribers);
        p.load.rate *= multiple;
        p.drain.rate *= multiple;
        p.steady.register_rate *= multiple;
        p.steady.deregister_rate *= multiple;
        p.steady.query_rate *= multiple;
        p.steady.subscriber_churn_rate *= multiple;
        p.subscribers.join_rate *= multiple;
        p
    }

    /// A stable hash of the resolved profile (FNV-1a 64 over its JSON), so reports of
    /// different configurations are not compared.
    pub fn config_hash(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

/// Most instances a profile may simulate: instance IPs are `10.0.0.0 + index`.
pub const MAX_INSTANCES: u32 = 1 << 24;

/// A duration written as text: `250ms`, `5s`, `2m`, `1h`, or `1.5s`. A bare number is
/// seconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl fmt::Debug for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        if ms % 1000 == 0 {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

/// Parses `250ms`, `5s`, `1.5s`, `2m`, `1h`, `100us`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 500ms, 10s, 2m"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("invalid duration unit {other:?} in {text:?}")),
    };
    let secs = value * scale;
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Secs(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => parse_duration(&t)
                .map(Dur)
                .map_err(serde::de::Error::custom),
            Raw::Secs(s) if s.is_finite() && s >= 0.0 => Ok(Dur(Duration::from_secs_f64(s))),
            Raw::Secs(s) => Err(serde::de::Error::custom(format!("invalid duration {s}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_parses_and_validates() {
        let all = Profile::built_in().unwrap();
        assert_eq!(all.len(), BUILT_IN.len());
        for (p, (name, _)) in all.iter().zip(BUILT_IN) {
            assert_eq!(&p.name, name, "file name and `name` agree");
            assert!(!p.description.is_empty(), "{name} has a description");
            p.validate().unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(BUILT_IN[0].0, DEFAULT_PROFILE);
    }

    /// Issue 34: the restart profiles are `nacos-2x-report` at 1/10, each with one
    /// fault that runs the operator's script by `$RESTART_NODES`.
    #[test]
    fn the_restart_profiles_are_a_tenth_of_the_2x_report_with_a_fault() {
        let report = Profile::load("nacos-2x-report").unwrap();
        for (name, action) in [
            ("nacos-2x-restart", "rolling"),
            ("nacos-2x-full-restart", "full"),
        ] {
            let p = Profile::load(name).unwrap();
            assert_eq!(p.fleet.instances * 10, report.fleet.instances, "{name}");
            assert_eq!(p.fleet.services * 10, report.fleet.services, "{name}");
            assert_eq!(p.grpc.clients * 10, report.grpc.clients, "{name}");
            assert!(
                (p.load.rate * 10.0 - report.load.rate).abs() < 1.0,
                "{name}"
            );
            assert_eq!(p.faults.len(), 1, "{name}");
            assert_eq!(p.faults[0].at.0, Duration::from_secs(10));
            assert_eq!(p.faults[0].command, format!("\"$RESTART_NODES\" {action}"));
        }
        assert!(Profile::from_toml("x", "name='x'\n[[faults]]\nat='1s'\n").is_err());
        let text = toml::to_string(&report).unwrap();
        assert!(
            !text.contains("faults"),
            "no empty faults in other profiles: {text}"
        );
    }

    #[test]
    fn the_report_profile_is_the_published_capacity() {
        let p = Profile::load("nacos-1x-report").unwrap();
        assert_eq!(p.fleet.services, 600_000);
        assert_eq!(p.fleet.instances, 1_100_000);
        let mix = p.steady.register_rate + p.steady.deregister_rate + p.steady.query_rate;
        assert!((mix - 13_000.0).abs() < 1.0, "13k TPS mix, got {mix}");
        assert!(p.fleet.subscribers > 0);
        assert_eq!(p.thresholds, ["*.errors<=0"], "holding it means no errors");
    }

    #[test]
    fn unknown_fields_and_names_are_errors() {
        let e = Profile::from_toml("x", "name = \"x\"\n[fleet]\ninstance = 3\n").unwrap_err();
        assert!(e.to_string().contains("unknown field"), "{e}");
        let e = Profile::load("no-such-profile").unwrap_err();
        assert!(e.to_string().contains("smoke"), "{e}");
    }

    #[test]
    fn overrides_apply_and_validation_catches_nonsense() {
        let mut p = Profile::load("smoke").unwrap();
        p.apply(&Overrides {
            services: Some(10),
            instances: Some(50),
            duration: Some(Duration::from_secs(2)),
            churn_rate: Some(7.0),
            no_drain: true,
            ..Overrides::default()
        });
        assert_eq!(
            (p.fleet.services, p.fleet.watched_services),
            (10, 10),
            "watched services shrink with services"
        );
        assert_eq!(p.steady.duration.0, Duration::from_secs(2));
        assert_eq!(
            (p.steady.register_rate, p.steady.deregister_rate),
            (7.0, 7.0)
        );
        assert!(!p.drain.enabled);
        p.validate().unwrap();
        p.load.rate = -1.0;
        assert!(p.validate().is_err());
        p.load.rate = 1.0;
        p.fleet.service_prefix = "a b".into();
        assert!(p.validate().is_err());
    }

    #[test]
    fn busy_poll_enters_the_hash_only_when_on() {
        let plain = Profile::load("smoke").unwrap();
        let text = serde_json::to_string(&plain).unwrap();
        assert!(!text.contains("busy_poll"), "{text}");
        let mut spinning = plain.clone();
        spinning.apply(&Overrides {
            busy_poll: true,
            ..Overrides::default()
        });
        assert!(spinning.generator.busy_poll);
        assert_ne!(plain.config_hash(), spinning.config_hash());
        let from_toml = Profile::from_toml(
            "spin",
            &BUILT_IN[0]
                .1
                .replace("[fleet]", "[generator]\nbusy_poll = true\n\n[fleet]"),
        )
        .unwrap();
        assert!(from_toml.generator.busy_poll);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("").is_err());
        let p = Profile::from_toml("x", "name='x'\n[steady]\nduration = 2.5\n").unwrap();
        assert_eq!(p.steady.duration.0, Duration::from_millis(2500));
        assert_eq!(Dur(Duration::from_millis(1500)).to_string(), "1500ms");
    }

    #[test]
    fn config_hash_follows_the_configuration() {
        let a = Profile::load("smoke").unwrap();
        let mut b = a.clone();
        assert_eq!(a.config_hash(), b.config_hash());
        b.fleet.instances += 1;
        assert_ne!(a.config_hash(), b.config_hash());
    }
}
