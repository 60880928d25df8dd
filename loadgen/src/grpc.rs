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
//! the server's instance count must match what was registered.
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
    BatchInstanceRequest, ConnectionSetupRequest, HealthCheckRequest, Host, InstanceRequest,
    NamingHead, NotifySubscriberRequest, QueryServiceResponse, RequestHead, ResponseHead,
    ServerCheckRequest, ServiceQueryRequest, SubscribeServiceRequest, SubscribeServiceResponse,
    WireInstance,
};
use registry_proto::grpc::{Message, Payload, REQUEST_PATH, STREAM_PATH};
use reports::{LatencyBlock, PushStats, Verification};
use tokio::sync::{mpsc, Semaphore};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};

use crate::profile::Profile;
use crate::recorder::{ErrorClass, Op, Recorder, Stats};
use crate::schedule::{Clock, Nanos, Pacer, SECOND};
use crate::target::Server;

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
        .enable_all()
        .build()
        .context("building the gRPC fleet's runtime")?;
    let profile = profile.clone();
    let mut control = crate::target::ControlClient::for_members(server.addrs.clone());
    let baseline = crate::verify::server_count(&mut control)?;
    runtime.block_on(drive(profile, grpc, baseline, control))
}

async fn drive(
    profile: Profile,
    grpc: SocketAddr,
    baseline: u64,
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
    });
    subscribe_all(&fleet).await;
    load(&fleet).await;
    let churned = steady(&fleet).await;
    let unconverged = settle(&fleet).await;
    let registered = u64::from(fleet.profile.fleet.instances) + churned.len() as u64;
    let after_steady = tokio::task::block_in_place(|| crate::verify::server_count(&mut control))?;
    let mut detail = format!(
        "after steady: server {after_steady}, expected {}",
        baseline + registered
    );
    let mut ok = after_steady == baseline + registered && unconverged == 0;
    let mut final_count = after_steady;
    let mut expected = baseline + registered;
    if fleet.profile.drain.enabled {
        drain(&fleet, &churned).await;
        final_count = tokio::task::block_in_place(|| crate::verify::server_count(&mut control))?;
        expected = baseline;
        ok &= final_count == baseline;
        detail.push_str(&format!(
            "; after drain: server {final_count}, expected {baseline}"
        ));
    }
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
            expected_instances: expected,
            server_instances: final_count,
            ok,
            detail,
        },
        bytes_per_client,
    })
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
    let check = unary(&channel, Payload::of(&ServerCheckRequest::default())).await?;
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
    tx.send(Payload::of(&ConnectionSetupRequest {
        client_version: Some(format!("loadgen:{}", env!("CARGO_PKG_VERSION"))),
        ..ConnectionSetupRequest::default()
    }))
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
        let p = unary(&client.channel, Payload::of(&HealthCheckRequest::default())).await?;
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
                .and_then(|h| h.request_id);
            let body = serde_json::to_vec(&ResponseHead::ok(id)).unwrap_or_default();
            if tx.send(Payload::new(answer, body)).await.is_err() {
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

fn naming(p: &Profile, s: u32) -> NamingHead {
    NamingHead {
        namespace: Some(p.fleet.namespace.clone()),
        service_name: Some(service_name(p, s)),
        group_name: Some(p.fleet.group.clone()),
    }
}

/// Instance `i` of the fleet: a distinct address per instance.
fn fleet_instance(p: &Profile, i: u32) -> WireInstance {
    WireInstance {
        ip: Some(format!(
            "10.{}.{}.{}",
            (i >> 16) & 0xff,
            (i >> 8) & 0xff,
            i & 0xff
        )),
        port: Some(i64::from(p.fleet.port)),
        cluster_name: Some(p.fleet.cluster.clone()),
        ..WireInstance::default()
    }
}

/// Churn instance `seq`: its own address range, its sequence in the metadata.
fn churn_instance(p: &Profile, seq: u64) -> WireInstance {
    let metadata: BTreeMap<String, String> = [("loadgen.seq".to_owned(), seq.to_string())].into();
    WireInstance {
        ip: Some(format!(
            "11.{}.{}.{}",
            (seq >> 16) & 0xff,
            (seq >> 8) & 0xff,
            seq & 0xff
        )),
        port: Some(i64::from(p.fleet.port)),
        cluster_name: Some(p.fleet.cluster.clone()),
        metadata: Some(metadata),
        ..WireInstance::default()
    }
}

// ----- requests -------------------------------------------------------------

/// Sends `body` on `client`'s connection as `op` intended at `intended`, without
/// waiting for the answer; the answer is recorded when it comes.
async fn fire<T: Message + serde::Serialize>(
    fleet: &Arc<Fleet>,
    client: &Arc<Client>,
    op: Op,
    intended: Nanos,
    body: &T,
) -> tokio::task::JoinHandle<()> {
    let permit = fleet.in_flight.clone().acquire_owned().await;
    let payload = Payload::of(body);
    let (fleet, client) = (fleet.clone(), client.clone());
    tokio::spawn(async move {
        let _permit = permit;
        let sent = fleet.clock.now();
        {
            let mut r = lock(&client.recorder);
            r.dispatched(op, intended, sent);
            r.sent(intended, sent);
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
        let req = SubscribeServiceRequest {
            naming: naming(p, service),
            subscribe: Some(true),
            clusters: Some(String::new()),
            ..SubscribeServiceRequest::default()
        };
        let clock = fleet.clock;
        set.spawn(async move {
            let start = clock.now();
            let answer = unary(&client.channel, Payload::of(&req)).await;
            let done = clock.now();
            let hosts = answer
                .ok()
                .filter(|a| a.type_name() == SubscribeServiceResponse::TYPE)
                .and_then(|a| serde_json::from_slice::<SubscribeServiceResponse>(a.json()).ok())
                .and_then(|r| r.service_info)
                .map(|i| i.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect());
            let mut r = lock(&client.recorder);
            r.dispatched(Op::Subscribe, start, start);
            r.sent(start, start);
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
            sleep_until(fleet, intended).await;
            let req = BatchInstanceRequest {
                naming: naming(p, s),
                r#type: Some("batchRegisterInstance".into()),
                instances: Some(members.iter().map(|i| fleet_instance(p, *i)).collect()),
                ..BatchInstanceRequest::default()
            };
            handles.push(
                fire(
                    fleet,
                    &fleet.clients[c as usize],
                    Op::Register,
                    intended,
                    &req,
                )
                .await,
            );
        }
    } else {
        let pacer = Pacer::new(start, p.load.rate, None);
        for i in 0..n {
            let intended = pacer.intended(u64::from(i));
            sleep_until(fleet, intended).await;
            let req = InstanceRequest {
                naming: naming(p, i % services),
                r#type: Some("registerInstance".into()),
                instance: Some(fleet_instance(p, i)),
                ..InstanceRequest::default()
            };
            let client = &fleet.clients[(i % clients) as usize];
            handles.push(fire(fleet, client, Op::Register, intended, &req).await);
        }
    }
    for h in handles {
        let _ = h.await;
    }
}

async fn sleep_until(fleet: &Fleet, at: Nanos) {
    tokio::time::sleep_until(fleet.clock.instant(at)).await;
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
            let services = fleet.profile.fleet.services.max(1);
            let mut handles = Vec::new();
            for k in 0u64.. {
                let intended = pacer.intended(k);
                if intended >= end {
                    break;
                }
                sleep_until(&fleet, intended).await;
                let req = ServiceQueryRequest {
                    naming: naming(&fleet.profile, (k % u64::from(services)) as u32),
                    cluster: Some(String::new()),
                    ..ServiceQueryRequest::default()
                };
                let client = &fleet.clients[k as usize % fleet.clients.len()];
                handles.push(fire(&fleet, client, Op::Query, intended, &req).await);
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
        sleep_until(fleet, next).await;
        if next_r <= next_d {
            let client = r as usize % fleet.clients.len();
            let req = InstanceRequest {
                naming: naming(p, (r % watched) as u32),
                r#type: Some("registerInstance".into()),
                instance: Some(churn_instance(p, r)),
                ..InstanceRequest::default()
            };
            fleet.common.changes[r as usize].store(fleet.clock.now().max(1), Ordering::Relaxed);
            let registered = fire(fleet, &fleet.clients[client], Op::Register, next_r, &req).await;
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
                let req = InstanceRequest {
                    naming: naming(p, (seq % watched) as u32),
                    r#type: Some("deregisterInstance".into()),
                    instance: Some(churn_instance(p, seq)),
                    ..InstanceRequest::default()
                };
                handles
                    .push(fire(fleet, &fleet.clients[client], Op::Deregister, next_d, &req).await);
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
                    e.insert(server_hosts(fleet, &control, service).await);
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

async fn server_hosts(fleet: &Fleet, client: &Client, service: u32) -> HashSet<(String, i64)> {
    let req = ServiceQueryRequest {
        naming: naming(&fleet.profile, service),
        cluster: Some(String::new()),
        ..ServiceQueryRequest::default()
    };
    let Ok(answer) = unary(&client.channel, Payload::of(&req)).await else {
        return HashSet::new();
    };
    serde_json::from_slice::<QueryServiceResponse>(answer.json())
        .ok()
        .and_then(|r| r.service_info)
        .map(|i| i.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect())
        .unwrap_or_default()
}

/// The drain: every instance deregistered by the client that registered it.
async fn drain(fleet: &Arc<Fleet>, churned: &VecDeque<(u64, usize)>) {
    let p = &fleet.profile;
    let services = p.fleet.services.max(1);
    let watched = u64::from(p.fleet.watched_services.max(1));
    let clients = fleet.clients.len() as u32;
    let pacer = Pacer::new(fleet.clock.now(), p.drain.rate.max(1.0), None);
    let mut handles = Vec::new();
    let mut k = 0u64;
    for i in 0..p.fleet.instances {
        let intended = pacer.intended(k);
        k += 1;
        sleep_until(fleet, intended).await;
        let req = InstanceRequest {
            naming: naming(p, i % services),
            r#type: Some("deregisterInstance".into()),
            instance: Some(fleet_instance(p, i)),
            ..InstanceRequest::default()
        };
        let client = &fleet.clients[(i % clients) as usize];
        handles.push(fire(fleet, client, Op::Deregister, intended, &req).await);
    }
    for (seq, client) in churned {
        let intended = pacer.intended(k);
        k += 1;
        sleep_until(fleet, intended).await;
        let req = InstanceRequest {
            naming: naming(p, (seq % watched) as u32),
            r#type: Some("deregisterInstance".into()),
            instance: Some(churn_instance(p, *seq)),
            ..InstanceRequest::default()
        };
        handles.push(
            fire(
                fleet,
                &fleet.clients[*client],
                Op::Deregister,
                intended,
                &req,
            )
            .await,
        );
    }
    for h in handles {
        let _ = h.await;
    }
}
