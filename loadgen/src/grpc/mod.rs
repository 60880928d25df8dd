//! The Nacos 2.x fleet (`protocol = "grpc"`): simulated clients, each with its own
//! gRPC connection (server check, stream, setup, as the real clients do), that
//! register their instances (in batches where the profile says), query, subscribe,
//! receive `NotifySubscriberRequest` pushes on their stream and ack them.
//!
//! The same measurement rules as the 1.x fleet: every operation has an intended send
//! time from an open-loop schedule ([`Pacer`]) and is recorded corrected (from the
//! intended time) and uncorrected (from the send) in per-client [`Recorder`]s merged
//! at the end; a push is timed from the send of the change it reveals (each churn
//! instance carries its sequence number in its metadata) to its receipt; after the
//! steady phase every subscription must hold the server's list (convergence), and
//! the services listed over gRPC must hold what was registered ([`check`]).
//! The requests are [`request`]'s: what the real clients send, field for field.
//!
//! Phases: connect → subscribe → load → steady (queries + churn on watched services)
//! → settle (convergence) → drain. Requests are spawned at their intended time and
//! never wait for earlier answers (HTTP/2 multiplexes them on the client's
//! connection); a bound on requests in flight keeps memory finite, and waiting for
//! it shows up as scheduling lag.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use registry_proto::grpc::message::{
    Host, NotifySubscriberRequest, RequestHead, SubscribeServiceResponse,
};
use registry_proto::grpc::{Message, Payload, REQUEST_PATH, STREAM_PATH};
use reports::{LatencyBlock, PushStats, Verification};
use tokio::sync::{mpsc, Semaphore};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use crate::plan::{Phase, Span};
use crate::profile::Profile;
use crate::recorder::{ErrorClass, Op, Recorder, Stats};
use crate::schedule::{wait_until, Clock, Nanos, Pacer, Waiter, SECOND};
use crate::target::Server;
use request::{Instance, Naming};

mod check;
pub mod request;

/// Requests in flight over the whole fleet.
const MAX_IN_FLIGHT: usize = 8192;
/// A request not answered in this long has failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Recorders shared by the clients: a few per worker thread keeps the lock
/// uncontended without a recorder per client.
const RECORDERS: usize = 64;

/// What the fleet measured, for the runner's report.
pub struct Outcome {
    /// Every client's records, merged.
    pub stats: Stats,
    /// Seconds from the first connection to the end of the drain.
    pub duration_s: f64,
    /// Push figures.
    pub push: Option<PushStats>,
    /// The final count check and convergence.
    pub verification: Verification,
    /// Loadgen's resident memory per connected client, bytes (RSS growth while
    /// connecting, divided by the clients).
    pub bytes_per_client: Option<u64>,
    /// When each phase ran.
    pub spans: Vec<Span>,
}

/// One subscription a client holds: the service and the hosts it was last told.
struct Subscription {
    service: u32,
    hosts: HashSet<(String, i64)>,
    /// Churn sequence numbers already timed for this subscription.
    timed: HashSet<u64>,
}

/// Locks a mutex; a panicked holder (a bug already reported) does not stop the run.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the push readers need: the profile, the clock, the churn send times, the
/// recorders.
struct Common {
    profile: Profile,
    clock: Clock,
    /// Recorders shared by the clients (client `i` records into `i % len`): a
    /// recorder holds 30 histograms of at least 16 KiB, which per client was most
    /// of a simulated client's memory (~480 of ~560 KiB).
    recorders: Vec<Arc<Mutex<Recorder>>>,
    /// Send time of each churn change by sequence number (0 until sent).
    changes: Vec<AtomicU64>,
}

/// One simulated 2.x client.
struct Client {
    common: Arc<Common>,
    channel: Channel,
    /// One of [`Common::recorders`].
    recorder: Arc<Mutex<Recorder>>,
    subscriptions: Mutex<Vec<Subscription>>,
    pushes: AtomicU64,
    acks: AtomicU64,
}

/// What every task shares.
struct Fleet {
    common: Arc<Common>,
    profile: Profile,
    clock: Clock,
    clients: Vec<Arc<Client>>,
    in_flight: Arc<Semaphore>,
    /// The phases entered so far, the last one open.
    spans: Mutex<Vec<Span>>,
}

impl Fleet {
    /// Starts `phase` now: closes the last span, and writes count in the new phase.
    fn enter(&self, phase: Phase) {
        let now = self.clock.now();
        let mut spans = lock(&self.spans);
        if let Some(open) = spans.last_mut() {
            open.end = now;
        }
        if phase != Phase::Stop {
            spans.push(Span {
                phase,
                start: now,
                end: now,
            });
        }
        for r in &self.common.recorders {
            lock(r).set_phase(phase);
        }
    }
}

/// Runs the 2.x fleet against `server` on its own runtime.
///
/// # Errors
/// When the server's gRPC port cannot be reached.
pub fn run(profile: &Profile, server: &Server, grpc: SocketAddr) -> anyhow::Result<Outcome> {
    let threads = match profile.generator.workers {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n as usize,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("loadgen-grpc")
        // Precise wake-ups (see `schedule::Waiter`): the default 50 µs slack would be
        // the floor of every send's lag.
        .on_thread_start(|| {
            let _ = nix::sys::prctl::set_timerslack(1);
        })
        .enable_all()
        .build()
        .context("building the gRPC fleet's runtime")?;
    let profile = profile.clone();
    let mut control = crate::target::ControlClient::for_members(server.addrs.clone());
    // A hint only (see `check`): a server without the counter is still verified.
    let baseline = crate::verify::server_count(&mut control).ok();
    runtime.block_on(drive(profile, grpc, baseline, control))
}

async fn drive(
    profile: Profile,
    grpc: SocketAddr,
    baseline: Option<u64>,
    mut control: crate::target::ControlClient,
) -> anyhow::Result<Outcome> {
    let clock = Clock::start();
    let common = Arc::new(Common {
        changes: (0..churn_count(&profile))
            .map(|_| AtomicU64::new(0))
            .collect(),
        profile: profile.clone(),
        clock,
        recorders: (0..RECORDERS)
            .map(|_| Arc::new(Mutex::new(Recorder::new())))
            .collect(),
    });
    let rss_before = crate::host::memory(None).0;
    let clients = connect_all(&common, grpc).await?;
    let rss_after = crate::host::memory(None).0;
    let bytes_per_client = match (rss_before, rss_after) {
        (Some(a), Some(b)) if !clients.is_empty() => {
            Some(b.saturating_sub(a) / clients.len() as u64)
        }
        _ => None,
    };
    let fleet = Arc::new(Fleet {
        common,
        clock,
        clients,
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
        profile,
        spans: Mutex::new(Vec::new()),
    });
    subscribe_all(&fleet).await;
    fleet.enter(Phase::Load);
    load(&fleet).await;
    fleet.enter(Phase::Steady);
    let churned = steady(&fleet).await;
    fleet.enter(Phase::Settle);
    let unconverged = settle(&fleet).await;
    let counter = |control: &mut crate::target::ControlClient| {
        tokio::task::block_in_place(|| crate::verify::server_count(control).ok())
    };
    let registered = u64::from(fleet.profile.fleet.instances) + churned.len() as u64;
    let after_steady = check::lists(&fleet, &churned, false).await;
    let mut detail = format!("after steady: {}", after_steady.describe());
    detail.push_str(&hint(baseline, counter(&mut control), registered));
    let mut ok = after_steady.ok() && unconverged == 0;
    let mut last = after_steady;
    if fleet.profile.drain.enabled {
        fleet.enter(Phase::Drain);
        drain(&fleet, &churned).await;
        fleet.enter(Phase::Final);
        let after_drain = check::lists(&fleet, &churned, true).await;
        ok &= after_drain.ok();
        detail.push_str(&format!("; after drain: {}", after_drain.describe()));
        detail.push_str(&hint(baseline, counter(&mut control), 0));
        last = after_drain;
    }
    fleet.enter(Phase::Stop);
    let spans = std::mem::take(&mut *lock(&fleet.spans));
    let duration_s = fleet.clock.now() as f64 / SECOND as f64;
    let mut stats = Stats::default();
    let (mut pushes, mut acks) = (0, 0);
    for r in &fleet.common.recorders {
        stats.add(&std::mem::take(&mut *lock(r)).finish());
    }
    for c in &fleet.clients {
        pushes += c.pushes.load(Ordering::Relaxed);
        acks += c.acks.load(Ordering::Relaxed);
    }
    stats.pushes = pushes;
    stats.acks = acks;
    let push = if fleet.profile.fleet.subscribers == 0 {
        None
    } else {
        Some(PushStats {
            subscribers: u64::from(fleet.profile.fleet.subscribers),
            pushes_received: pushes,
            acks_sent: acks,
            converged: unconverged == 0,
            mismatched_subscribers: unconverged,
            latency: LatencyBlock::from_histogram(&stats.push)?,
        })
    };
    Ok(Outcome {
        stats,
        duration_s,
        push,
        verification: Verification {
            expected_instances: last.expected,
            server_instances: last.found,
            ok,
            detail,
        },
        bytes_per_client,
        spans,
    })
}

/// The server counter's reading, as a hint for the detail line.
fn hint(baseline: Option<u64>, now: Option<u64>, registered: u64) -> String {
    match (baseline, now) {
        (Some(b), Some(n)) => format!(
            " (hint: the server's instanceCount is {n}, {} expected from it)",
            b + registered
        ),
        _ => " (the server has no instanceCount to compare)".to_owned(),
    }
}

fn churn_count(p: &Profile) -> usize {
    let secs = p.steady.duration.0.as_secs_f64();
    (p.steady.register_rate * secs).ceil() as usize + 1
}

// ----- connections ---------------------------------------------------------

async fn connect_all(common: &Arc<Common>, grpc: SocketAddr) -> anyhow::Result<Vec<Arc<Client>>> {
    let n = common.profile.grpc.clients.max(1) as usize;
    let mut clients = Vec::with_capacity(n);
    // A few at a time: a burst of thousands of handshakes is not what is measured.
    for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
        let mut set = tokio::task::JoinSet::new();
        for &i in chunk {
            let recorder = common.recorders[i % common.recorders.len()].clone();
            set.spawn(connect(common.clone(), grpc, recorder));
        }
        while let Some(c) = set.join_next().await {
            clients.push(c.context("connecting a client")??);
        }
    }
    Ok(clients)
}

async fn connect(
    common: Arc<Common>,
    grpc: SocketAddr,
    recorder: Arc<Mutex<Recorder>>,
) -> anyhow::Result<Arc<Client>> {
    let channel = Endpoint::from_shared(format!("http://{grpc}"))?
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to gRPC {grpc}"))?;
    let check = unary(&channel, request::server_check()).await?;
    anyhow::ensure!(
        check.type_name() == "ServerCheckResponse",
        "server check refused: {}",
        String::from_utf8_lossy(check.json())
    );
    let (tx, rx) = mpsc::channel::<Payload>(256);
    let mut g = tonic::client::Grpc::new(channel.clone());
    g.ready().await?;
    let inbound = g
        .streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
            PathAndQuery::from_static(STREAM_PATH),
            tonic_prost::ProstCodec::<Payload, Payload>::default(),
        )
        .await?
        .into_inner();
    tx.send(request::connection_setup(&common.profile.fleet.namespace))
        .await?;
    let client = Arc::new(Client {
        common,
        channel,
        recorder,
        subscriptions: Mutex::new(Vec::new()),
        pushes: AtomicU64::new(0),
        acks: AtomicU64::new(0),
    });
    spawn_reader(client.clone(), inbound, tx);
    // Ready once the server answers a health check (it has seen the setup).
    for _ in 0..500 {
        let p = unary(&client.channel, request::health_check()).await?;
        if p.type_name() == "HealthCheckResponse" {
            return Ok(client);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("the server never registered the connection's setup")
}

async fn unary(channel: &Channel, p: Payload) -> anyhow::Result<Payload> {
    let mut g = tonic::client::Grpc::new(channel.clone());
    g.ready().await?;
    let answer = g
        .unary(
            tonic::Request::new(p),
            PathAndQuery::from_static(REQUEST_PATH),
            tonic_prost::ProstCodec::<Payload, Payload>::default(),
        )
        .await?;
    Ok(answer.into_inner())
}

fn spawn_reader(
    client: Arc<Client>,
    mut inbound: tonic::Streaming<Payload>,
    tx: mpsc::Sender<Payload>,
) {
    tokio::spawn(async move {
        while let Ok(Some(p)) = inbound.message().await {
            let answer = match p.type_name() {
                NotifySubscriberRequest::TYPE => {
                    client.pushes.fetch_add(1, Ordering::Relaxed);
                    on_push(&client, &p);
                    "NotifySubscriberResponse"
                }
                "ClientDetectionRequest" => "ClientDetectionResponse",
                _ => continue,
            };
            let id = serde_json::from_slice::<RequestHead>(p.json())
                .ok()
                .and_then(|h| h.request_id)
                .unwrap_or_default();
            if tx.send(request::ack(answer, &id)).await.is_err() {
                return;
            }
            if answer == "NotifySubscriberResponse" {
                client.acks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
}

fn on_push(client: &Client, p: &Payload) {
    let Ok(req) = serde_json::from_slice::<NotifySubscriberRequest>(p.json()) else {
        return;
    };
    let Some(info) = req.service_info else { return };
    let common = &client.common;
    let now = common.clock.now();
    let Some(service) = service_index(&common.profile, &info.name) else {
        return;
    };
    let mut subs = lock(&client.subscriptions);
    let mut recorder = lock(&client.recorder);
    for sub in subs.iter_mut().filter(|s| s.service == service) {
        for h in &info.hosts {
            if let Some(seq) = churn_seq(h) {
                let sent = common
                    .changes
                    .get(seq as usize)
                    .map_or(0, |c| c.load(Ordering::Relaxed));
                if sent > 0 && sub.timed.insert(seq) {
                    recorder.push_latency(sent, now);
                }
            }
        }
        sub.hosts = info.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect();
    }
}

fn churn_seq(h: &Host) -> Option<u64> {
    h.metadata.get("loadgen.seq")?.parse().ok()
}

// ----- naming ---------------------------------------------------------------

fn service_name(p: &Profile, s: u32) -> String {
    format!("{}-{s}", p.fleet.service_prefix)
}

fn service_index(p: &Profile, name: &str) -> Option<u32> {
    name.strip_prefix(&p.fleet.service_prefix)?
        .strip_prefix('-')?
        .parse()
        .ok()
}

fn naming(p: &Profile, s: u32) -> Naming {
    Naming {
        namespace: p.fleet.namespace.clone(),
        service_name: service_name(p, s),
        group_name: p.fleet.group.clone(),
    }
}

/// Instance `i` of the fleet: a distinct address per instance.
fn fleet_instance(p: &Profile, i: u32) -> Instance {
    let ip = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
    Instance::new(ip, i64::from(p.fleet.port), &p.fleet.cluster)
}

/// Churn instance `seq`: its own address range, its sequence in the metadata.
fn churn_instance(p: &Profile, seq: u64) -> Instance {
    let ip = format!(
        "11.{}.{}.{}",
        (seq >> 16) & 0xff,
        (seq >> 8) & 0xff,
        seq & 0xff
    );
    let mut instance = Instance::new(ip, i64::from(p.fleet.port), &p.fleet.cluster);
    instance
        .metadata
        .insert("loadgen.seq".to_owned(), seq.to_string());
    instance
}

// ----- requests -------------------------------------------------------------

/// Sends `body` on `client`'s connection as `op` intended at `intended`, without
/// waiting for the answer; the answer is recorded when it comes.
async fn fire(
    fleet: &Arc<Fleet>,
    client: &Arc<Client>,
    op: Op,
    intended: Nanos,
    payload: Payload,
) -> tokio::task::JoinHandle<()> {
    let permit = fleet.in_flight.clone().acquire_owned().await;
    let (fleet, client) = (fleet.clone(), client.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let sent = fleet.clock.now();
        {
            let mut r = lock(&client.recorder);
            r.dispatched(op, intended, sent);
            r.sent(op, intended, sent);
        }
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, unary(&client.channel, payload)).await;
        let done = fleet.clock.now();
        let mut r = lock(&client.recorder);
        match answer {
            Ok(Ok(p)) if p.type_name() != "ErrorResponse" => {
                r.completed(op, intended, sent, done, Ok(()));
            }
            Ok(Ok(_)) => r.completed(op, intended, sent, done, Err(ErrorClass::Protocol)),
            Ok(Err(_)) => r.failed(op, ErrorClass::Connection, intended, Some(sent), done),
            Err(_) => r.failed(op, ErrorClass::Timeout, intended, Some(sent), done),
        }
    })
}

async fn subscribe_all(fleet: &Arc<Fleet>) {
    let p = &fleet.profile;
    let watched = p.fleet.watched_services.max(1);
    let mut set = tokio::task::JoinSet::new();
    for j in 0..p.fleet.subscribers {
        let client = fleet.clients[j as usize % fleet.clients.len()].clone();
        let service = j % watched;
        let req = request::subscribe(&naming(p, service));
        let clock = fleet.clock;
        set.spawn(async move {
            let start = clock.now();
            let answer = unary(&client.channel, req).await;
            let done = clock.now();
            let hosts = answer
                .ok()
                .filter(|a| a.type_name() == SubscribeServiceResponse::TYPE)
                .and_then(|a| serde_json::from_slice::<SubscribeServiceResponse>(a.json()).ok())
                .and_then(|r| r.service_info)
                .map(|i| i.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect());
            let mut r = lock(&client.recorder);
            r.dispatched(Op::Subscribe, start, start);
            r.sent(Op::Subscribe, start, start);
            let outcome = if hosts.is_some() {
                Ok(())
            } else {
                Err(ErrorClass::Protocol)
            };
            r.completed(Op::Subscribe, start, start, done, outcome);
            drop(r);
            lock(&client.subscriptions).push(Subscription {
                service,
                hosts: hosts.unwrap_or_default(),
                timed: HashSet::new(),
            });
        });
        if set.len() >= 256 {
            set.join_next().await;
        }
    }
    while set.join_next().await.is_some() {}
}

/// The load phase: every fleet instance registered by its client, open-loop.
async fn load(fleet: &Arc<Fleet>) {
    let p = &fleet.profile;
    let n = p.fleet.instances;
    let services = p.fleet.services.max(1);
    let clients = fleet.clients.len() as u32;
    let start = fleet.clock.now();
    let mut w = waiter(fleet);
    let mut handles = Vec::new();
    if p.grpc.batch {
        // One batch per (client, service) pair holding instances.
        let mut groups: BTreeMap<(u32, u32), Vec<u32>> = BTreeMap::new();
        for i in 0..n {
            groups
                .entry((i % clients, i % services))
                .or_default()
                .push(i);
        }
        let per_batch = f64::from(n) / groups.len().max(1) as f64;
        let pacer = Pacer::new(start, p.load.rate / per_batch, None);
        for (k, ((c, s), members)) in groups.into_iter().enumerate() {
            let intended = pacer.intended(k as u64);
            wait_until(&mut w, intended).await;
            let instances: Vec<Instance> = members.iter().map(|i| fleet_instance(p, *i)).collect();
            let req = request::batch_register(&naming(p, s), &instances);
            let client = &fleet.clients[c as usize];
            handles.push(fire(fleet, client, Op::Register, intended, req).await);
        }
    } else {
        let pacer = Pacer::new(start, p.load.rate, None);
        for i in 0..n {
            let intended = pacer.intended(u64::from(i));
            wait_until(&mut w, intended).await;
            let req = request::register(&naming(p, i % services), &fleet_instance(p, i));
            let client = &fleet.clients[(i % clients) as usize];
            handles.push(fire(fleet, client, Op::Register, intended, req).await);
        }
    }
    for h in handles {
        let _ = h.await;
    }
}

/// A precise waiter for one of the fleet's schedules.
fn waiter(fleet: &Fleet) -> Waiter {
    Waiter::new(fleet.clock)
}

/// The steady phase: queries over all services and churn on the watched ones.
/// Returns the churn instances still registered: (sequence, client).
async fn steady(fleet: &Arc<Fleet>) -> VecDeque<(u64, usize)> {
    let p = fleet.profile.clone();
    let start = fleet.clock.now();
    let end = start + p.steady.duration.0.as_nanos() as Nanos;
    let queries = {
        let fleet = fleet.clone();
        tokio::spawn(async move {
            if fleet.profile.steady.query_rate <= 0.0 {
                return;
            }
            let pacer = Pacer::new(start, fleet.profile.steady.query_rate, None);
            let mut w = waiter(&fleet);
            let services = fleet.profile.fleet.services.max(1);
            let mut handles = Vec::new();
            for k in 0u64.. {
                let intended = pacer.intended(k);
                if intended >= end {
                    break;
                }
                wait_until(&mut w, intended).await;
                let req = request::query(&naming(&fleet.profile, (k % u64::from(services)) as u32));
                let client = &fleet.clients[k as usize % fleet.clients.len()];
                handles.push(fire(&fleet, client, Op::Query, intended, req).await);
                if handles.len() >= 4096 {
                    for h in handles.drain(..) {
                        let _ = h.await;
                    }
                }
            }
            for h in handles {
                let _ = h.await;
            }
        })
    };
    let live = churn(fleet, start, end).await;
    let _ = queries.await;
    live
}

/// Register/deregister churn on the watched services; each register's send time is
/// kept by sequence number so subscribers can time its push.
async fn churn(fleet: &Arc<Fleet>, start: Nanos, end: Nanos) -> VecDeque<(u64, usize)> {
    let p = &fleet.profile;
    let mut live: VecDeque<(u64, usize)> = VecDeque::new();
    if p.steady.register_rate <= 0.0 {
        return live;
    }
    let watched = u64::from(p.fleet.watched_services.max(1));
    let registers = Pacer::new(start, p.steady.register_rate, None);
    let mut w = waiter(fleet);
    let deregisters = (p.steady.deregister_rate > 0.0)
        .then(|| Pacer::new(start + SECOND / 2, p.steady.deregister_rate, None));
    let (mut r, mut d) = (0u64, 0u64);
    let mut handles = Vec::new();
    let mut pending: HashMap<u64, tokio::task::JoinHandle<()>> = HashMap::new();
    loop {
        let next_r = registers.intended(r);
        let next_d = deregisters.as_ref().map_or(Nanos::MAX, |x| x.intended(d));
        let next = next_r.min(next_d);
        if next >= end || r as usize >= fleet.common.changes.len() {
            break;
        }
        wait_until(&mut w, next).await;
        if next_r <= next_d {
            let client = r as usize % fleet.clients.len();
            let req = request::register(&naming(p, (r % watched) as u32), &churn_instance(p, r));
            fleet.common.changes[r as usize].store(fleet.clock.now().max(1), Ordering::Relaxed);
            let registered = fire(fleet, &fleet.clients[client], Op::Register, next_r, req).await;
            pending.insert(r, registered);
            live.push_back((r, client));
            r += 1;
        } else {
            // Deregister the oldest churn instance, if there is one, once its register
            // is answered: the two travel on separate HTTP/2 streams, so a deregister
            // sent earlier could overtake it and leave the instance behind.
            if let Some((seq, client)) = live.pop_front() {
                if let Some(h) = pending.remove(&seq) {
                    let _ = h.await;
                }
                let req = request::deregister(
                    &naming(p, (seq % watched) as u32),
                    &churn_instance(p, seq),
                );
                handles
                    .push(fire(fleet, &fleet.clients[client], Op::Deregister, next_d, req).await);
            } else {
                lock(&fleet.clients[0].recorder).skip(Op::Deregister);
            }
            d += 1;
        }
    }
    for h in handles.into_iter().chain(pending.into_values()) {
        let _ = h.await;
    }
    live
}

/// Waits until every subscription holds the server's list, up to the settle timeout;
/// returns how many do not.
async fn settle(fleet: &Arc<Fleet>) -> u64 {
    let limit = fleet.clock.now() + fleet.profile.generator.settle_timeout.0.as_nanos() as Nanos;
    let control = fleet.clients[0].clone();
    loop {
        let mut truth: HashMap<u32, HashSet<(String, i64)>> = HashMap::new();
        let mut mismatched = 0u64;
        for c in &fleet.clients {
            let subs: Vec<(u32, HashSet<(String, i64)>)> = lock(&c.subscriptions)
                .iter()
                .map(|s| (s.service, s.hosts.clone()))
                .collect();
            for (service, hosts) in subs {
                if let std::collections::hash_map::Entry::Vacant(e) = truth.entry(service) {
                    e.insert(
                        check::server_hosts(fleet, &control, service)
                            .await
                            .unwrap_or_default(),
                    );
                }
                if truth.get(&service) != Some(&hosts) {
                    mismatched += 1;
                }
            }
        }
        if mismatched == 0 || fleet.clock.now() >= limit {
            return mismatched;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The drain: every instance deregistered by the client that registered it.
async fn drain(fleet: &Arc<Fleet>, churned: &VecDeque<(u64, usize)>) {
    let p = &fleet.profile;
    let services = p.fleet.services.max(1);
    let watched = u64::from(p.fleet.watched_services.max(1));
    let clients = fleet.clients.len() as u32;
    let pacer = Pacer::new(fleet.clock.now(), p.drain.rate.max(1.0), None);
    let mut w = waiter(fleet);
    let mut handles = Vec::new();
    let mut k = 0u64;
    for i in 0..p.fleet.instances {
        let intended = pacer.intended(k);
        k += 1;
        wait_until(&mut w, intended).await;
        let req = request::deregister(&naming(p, i % services), &fleet_instance(p, i));
        let client = &fleet.clients[(i % clients) as usize];
        handles.push(fire(fleet, client, Op::Deregister, intended, req).await);
    }
    for (seq, client) in churned {
        let intended = pacer.intended(k);
        k += 1;
        wait_until(&mut w, intended).await;
        let req = request::deregister(&naming(p, (seq % watched) as u32), &churn_instance(p, *seq));
        handles.push(
            fire(
                fleet,
                &fleet.clients[*client],
                Op::Deregister,
                intended,
                req,
            )
            .await,
        );
    }
    for h in handles {
        let _ = h.await;
    }
}
