//! A worker: one thread, one single-threaded runtime, a share of the fleet.
//!
//! Each worker simulates every instance and subscriber whose index is congruent to its
//! own number modulo the worker count, on its own thread with a `current_thread` tokio
//! runtime, like wrk's thread-per-core design: its instances are on its beat wheel, its
//! subscribers on its poll wheel, its requests go out over its own connections
//! ([`crate::conn::Lane`]), and it records into its own [`Recorder`]. Nothing is shared
//! per request; the workers meet only at the [`Shared`] phase word, the change logs of
//! watched services (a mutex per service, touched only by changes to those) and the
//! once-per-second [`Interval`] they send to the runner.
//!
//! The driver ([`drive`]) wakes every millisecond: it advances the wheels, asks each
//! phase's pacers what is due, and hands every due operation, stamped with its
//! intended time, to a lane. The lanes' tasks and the subscribers' receive tasks call
//! back into the worker ([`Exchange`], [`Inbox`]) to encode requests and apply
//! responses; state lives in one `RefCell` that is never borrowed across an await.

use std::cell::RefCell;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use registry_proto::grpc::message::{
    Host, NotifySubscriberRequest, ServiceInfo as GrpcServiceInfo, SubscribeServiceResponse,
};
use registry_proto::grpc::Payload;
use registry_proto::http1::{write_request, Method, Response};
use registry_proto::naming::beat::BeatResponse;
use registry_proto::naming::client::{self, InstanceSpec, ListSpec, FORM_CONTENT_TYPE};
use registry_proto::naming::list::ServiceInfo;
use registry_proto::naming::ServiceName;
use tokio::net::UdpSocket;
use tokio::task::{AbortHandle, JoinHandle};

use crate::conn::{self, Exchange, Lane, LaneConfig, Request};
use crate::dialect::{self, Dialect, Heartbeat};
use crate::fleet::{Change, Endpoint, Instances, Life, Naming, SetHash, Subscriber, Watch};
use crate::grpc::{self, request};
use crate::plan::{Phase, Plan};
use crate::profile::{BeatStyle, Profile};
use crate::recorder::{ErrorClass, Failure, Op, Progress, Recorder, Stats};
use crate::schedule::{
    next_wake, share, wait_until, Clock, DriverDue, Nanos, Pacer, Waiter, MILLI, SECOND,
};
use crate::subscriber::{self, HostList, Inbox};
use crate::template::{self, Templates};

/// What all workers and the runner share.
#[derive(Debug)]
pub struct Shared {
    /// The resolved profile.
    pub profile: Profile,
    /// Its plan.
    pub plan: Plan,
    /// Names and addresses.
    pub naming: Naming,
    /// Change logs and expected sets of watched services.
    pub watch: Watch,
    /// The run's clock.
    pub clock: Clock,
    /// The servers' HTTP addresses: one, or every member of a cluster.
    pub targets: Vec<SocketAddr>,
    /// The `Host` header value (the first server's: Nacos servers ignore it).
    pub host: String,
    /// Source addresses for connections and subscriber sockets (empty: the OS picks
    /// and subscribers bind to `subscriber_ip`).
    pub source_ips: Vec<IpAddr>,
    /// The address subscribers bind to when `source_ips` is empty.
    pub subscriber_ip: IpAddr,
    /// Worker count.
    pub workers: u32,
    /// Per-worker counters for the runner.
    pub progress: Vec<Progress>,
    phase: AtomicU8,
    phase_start: AtomicU64,
}

impl Shared {
    /// Shared state for a run against `targets` (at least one).
    pub fn new(
        profile: Profile,
        clock: Clock,
        targets: Vec<SocketAddr>,
        source_ips: Vec<IpAddr>,
        subscriber_ip: IpAddr,
        workers: u32,
    ) -> Shared {
        let naming = Naming::new(&profile.fleet);
        let instances = u64::from(profile.fleet.instances);
        let watch = Watch::new(if profile.fleet.subscribers > 0 {
            naming.watched
        } else {
            0
        });
        Shared {
            plan: Plan::from_profile(&profile),
            profile,
            naming,
            watch,
            clock,
            host: targets.first().map(|t| t.to_string()).unwrap_or_default(),
            targets,
            source_ips,
            subscriber_ip,
            workers: workers.max(1),
            // Load-phase registrations are "left" from the start, so the runner never
            // mistakes a worker that has not published yet for one that is done.
            progress: (0..workers.max(1))
                .map(|w| {
                    let p = Progress::default();
                    let n = share(instances, w, workers.max(1));
                    p.load_left.store(n, Ordering::Relaxed);
                    p
                })
                .collect(),
            phase: AtomicU8::new(Phase::Init.as_u8()),
            phase_start: AtomicU64::new(0),
        }
    }

    /// Moves every worker to `phase`, which starts at `start`.
    pub fn set_phase(&self, phase: Phase, start: Nanos) {
        // Start first, then the phase (Release): a worker that sees the phase
        // (Acquire) sees its start.
        self.phase_start.store(start, Ordering::Relaxed);
        self.phase.store(phase.as_u8(), Ordering::Release);
    }

    /// The current phase and its start.
    pub fn phase(&self) -> (Phase, Nanos) {
        let p = Phase::from_u8(self.phase.load(Ordering::Acquire));
        (p, self.phase_start.load(Ordering::Relaxed))
    }

    /// Sum of a progress counter over workers.
    pub fn sum(&self, f: impl Fn(&Progress) -> &AtomicU64) -> u64 {
        self.progress
            .iter()
            .map(|p| f(p).load(Ordering::Relaxed))
            .sum()
    }

    /// Failed operations so far, over workers and operations.
    pub fn errors(&self) -> u64 {
        self.progress
            .iter()
            .flat_map(|p| Op::ALL.map(|op| p.counts(op).1))
            .sum()
    }

    /// Whether every worker has seen `phase`.
    pub fn all_in(&self, phase: Phase) -> bool {
        self.progress
            .iter()
            .all(|p| p.phase_seen.load(Ordering::Relaxed) == u64::from(phase.as_u8()))
    }
}

/// One second of one worker's recording, sent to the runner.
#[derive(Debug)]
pub struct Interval {
    /// The worker.
    pub worker: u32,
    /// The second of the run it covers (`[second, second + 1)` since the epoch, or
    /// longer after a stall).
    pub second: u32,
    /// What was recorded.
    pub stats: Stats,
}

/// What a worker hands back at the end.
#[derive(Debug)]
pub struct Outcome {
    /// Everything it recorded.
    pub stats: Stats,
    /// Instance slots it held (for footprint figures).
    pub instance_slots: usize,
    /// Subscriber slots it held.
    pub subscriber_slots: usize,
}

/// Starts worker `index` on its own thread.
pub fn spawn(
    shared: Arc<Shared>,
    index: u32,
    tx: Sender<Interval>,
) -> io::Result<std::thread::JoinHandle<anyhow::Result<Outcome>>> {
    thread(format!("loadgen-w{index}"), move || {
        drive(shared, index, tx)
    })
}

/// Runs the future `make` returns on a thread of its own, in a `current_thread`
/// runtime with a [`tokio::task::LocalSet`]: the shape of every loadgen worker (a
/// profile run's and `bench-http`'s).
pub fn thread<T, F>(
    name: String,
    make: impl FnOnce() -> F + Send + 'static,
) -> io::Result<std::thread::JoinHandle<anyhow::Result<T>>>
where
    T: Send + 'static,
    F: std::future::Future<Output = anyhow::Result<T>>,
{
    std::thread::Builder::new().name(name).spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building a worker runtime")?;
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, make())
    })
}

#[derive(Debug, Default)]
struct Scratch {
    name: String,
    ip: String,
    path: String,
    body: String,
}

struct State {
    instances: Instances,
    /// Instances whose life is not `Absent`.
    live: u64,
    wheel: crate::wheel::Wheel,
    polls: crate::wheel::Wheel,
    subscribers: Vec<Subscriber>,
    subscriber_tasks: Vec<Option<AbortHandle>>,
    recorder: Recorder,
    rng: u64,
    /// The last beat reply body that meant "OK, same interval", to skip parsing it.
    beat_ok: Vec<u8>,
    /// Register/deregister requests not yet answered.
    changes_outstanding: u64,
    load_left: u64,
    /// Load-phase registrations issued (the next one registers this local index).
    next_load: u32,
    /// Subscribers started so far (they join in index order).
    joined: u32,
    drain_cursor: usize,
    /// The lane instance requests go to, and how many more go there before the next.
    instance_lane: usize,
    batch_left: u32,
    /// Per source-address group, the lane its last subscriber request went to.
    group_lane: Vec<usize>,
}

/// One `batchRegisterInstance` of the load phase: a client's instances of a service.
struct Batch {
    lane: usize,
    service: u32,
    locals: Vec<u32>,
}

/// [`Request::generation`] of a load-phase registration (1.x: one instance).
const LOAD: u32 = 1;
/// [`Request::generation`] of a load-phase batch (`id` is the batch's index).
const LOAD_BATCH: u32 = 2;
/// Requests in flight on one simulated 2.x client's connection.
const GRPC_DEPTH: usize = 256;

/// How long a 2.x client's redo task waits between rounds
/// (`Constants.DEFAULT_REDO_DELAY_TIME` in the Nacos client).
const REDO_DELAY_MS: u32 = 3_000;

/// Puts a 2.x instance whose registration failed on the wheel, to be
/// registered again [`REDO_DELAY_MS`] later if it is still meant to exist.
fn redo_later(state: &mut State, local: u32, now: Nanos) {
    let slot = &mut state.instances.slots[local as usize];
    if slot.life == Life::Registered && !slot.in_wheel {
        slot.in_wheel = true;
        state
            .wheel
            .insert(local, (now / MILLI) as u32 + REDO_DELAY_MS);
    }
}

struct Ctx {
    shared: Arc<Shared>,
    index: u32,
    state: RefCell<State>,
    lanes: Vec<Rc<Lane>>,
    /// Lane indexes per source-address group.
    groups: Vec<Vec<usize>>,
    group_ips: Vec<IpAddr>,
    scratch: RefCell<Scratch>,
    udp_buf: RefCell<Vec<u8>>,
    ack_buf: RefCell<Vec<u8>>,
    /// When the driver wants the thread next (pushes and answers yield to it).
    driver_due: DriverDue,
    beat_style: BeatStyle,
    /// Whole-request templates of the frequent requests (`None`: built the slow way).
    templates: Templates,
    /// The API generation an HTTP fleet speaks (V1 for the gRPC fleet, unused).
    dialect: Dialect,
    /// Whether the fleet is the 2.x gRPC fleet: a lane is one client's connection,
    /// instances belong to their lane's client and do not beat, subscriptions are
    /// pushed on the client's stream and not polled.
    grpc: bool,
    /// The 2.x fleet's load-phase batches (`grpc.batch`): one per (client, service)
    /// that holds instances.
    batches: Vec<Batch>,
    /// Consecutive instance requests per lane (the pipeline depth).
    batch: u32,
}

impl State {
    fn rand(&mut self) -> u64 {
        // xorshift64*: plenty for picking random instances and services.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rand() % n
        }
    }
}

impl Ctx {
    fn naming(&self) -> &Naming {
        &self.shared.naming
    }

    /// Instance requests go to one lane in batches of the pipeline depth before the
    /// next lane is used: a tick's requests then leave in a few writes instead of one
    /// write (and one read, on both sides) per request.
    ///
    /// Changes (register, deregister, re-register) instead go to the lane of their
    /// instance's block of `batch` consecutive numbers: one instance's changes then share
    /// a connection, where the server takes them and answers them in the order sent. On
    /// two connections a registration could be answered after a deregistration the
    /// server took after it, and loadgen would expect an instance the server no longer
    /// holds. The load and the drain go through the fleet in order, so their requests
    /// still leave a block at a time.
    fn lane_for_change(&self, id: u32) -> usize {
        if self.grpc {
            // A 2.x instance lives with the connection that registered it.
            return id as usize % self.lanes.len();
        }
        (id / self.batch) as usize % self.lanes.len()
    }

    fn lane_for_instance(&self, state: &mut State) -> usize {
        if state.batch_left == 0 {
            state.instance_lane = (state.instance_lane + 1) % self.lanes.len();
            state.batch_left = self.batch;
        }
        state.batch_left -= 1;
        state.instance_lane
    }

    fn lane_for_group(&self, state: &mut State, group: usize) -> usize {
        let lanes = &self.groups[group];
        state.group_lane[group] = (state.group_lane[group] + 1) % lanes.len();
        lanes[state.group_lane[group]]
    }

    fn dispatch(&self, state: &mut State, req: Request, now: Nanos) {
        let lane = match req.op {
            Op::Register if req.generation == LOAD_BATCH => self.batches[req.id as usize].lane,
            // A 2.x subscription lives on its client's stream.
            Op::Subscribe if self.grpc => req.id as usize % self.lanes.len(),
            Op::Subscribe => {
                let group = usize::from(state.subscribers[req.id as usize].ip_group);
                self.lane_for_group(state, group)
            }
            Op::Register | Op::Deregister | Op::Reregister => self.lane_for_change(req.id),
            Op::Beat | Op::Query => self.lane_for_instance(state),
        };
        if matches!(req.op, Op::Register | Op::Deregister | Op::Reregister) {
            state.changes_outstanding += 1;
        }
        state.recorder.dispatched(req.op, req.intended, now);
        self.lanes[lane].push(req);
    }

    /// Registers instance `local` at `intended` (the beat schedule starts with it,
    /// as the Java client adds its beat task when it registers).
    fn register(&self, state: &mut State, local: u32, intended: Nanos, now: Nanos, load: bool) {
        let slot = &mut state.instances.slots[local as usize];
        if slot.life == Life::Absent {
            state.live += 1;
        }
        slot.life = Life::Registered;
        if !slot.in_wheel && !self.grpc {
            slot.in_wheel = true;
            let due = (intended / MILLI) as u32 + slot.interval_ms;
            state.wheel.insert(local, due);
        }
        let req = Request {
            op: Op::Register,
            id: local,
            generation: if load { LOAD } else { 0 },
            intended,
        };
        self.dispatch(state, req, now);
    }

    fn deregister(&self, state: &mut State, local: u32, intended: Nanos, now: Nanos) {
        state.instances.slots[local as usize].life = Life::Leaving;
        let req = Request {
            op: Op::Deregister,
            id: local,
            generation: 0,
            intended,
        };
        self.dispatch(state, req, now);
    }

    fn start_subscriber(self: &Rc<Self>, state: &mut State, i: u32, intended: Nanos, now: Nanos) {
        let w = self.shared.workers;
        let global = i * w + self.index;
        let group = (i as usize) % self.groups.len();
        let ip = self.group_ips[group];
        let udp = self.dialect.pushes() && !self.grpc;
        let socket = match udp.then(|| subscriber::bind(ip)) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                // Out of file descriptors or ports: a failed poll, recorded as one.
                let failure = Failure::because(
                    ErrorClass::Connection,
                    format_args!("binding the subscriber's UDP socket: {e}"),
                );
                state.recorder.dispatched(Op::Subscribe, intended, now);
                state
                    .recorder
                    .failed(Op::Subscribe, &failure, intended, None, now);
                return;
            }
        };
        let port = socket
            .as_ref()
            .and_then(|s| s.local_addr().ok())
            .map_or(0, |a| a.port());
        let idx = i as usize;
        // A replaced subscriber keeps its place on the poll wheel.
        let fresh = !state.subscribers.get(idx).is_some_and(|s| s.active);
        if state.subscribers.len() <= idx {
            state.subscribers.resize(idx + 1, Subscriber::default());
            state.subscriber_tasks.resize_with(idx + 1, || None);
        }
        let generation = state.subscribers[idx].generation.wrapping_add(1);
        state.subscribers[idx] = Subscriber {
            service: self.naming().subscriber_service(global),
            ip_group: group as u8,
            active: true,
            has_view: false,
            port,
            generation,
            view: SetHash::default(),
            seen: 0,
        };
        // A subscriber without a socket (no push in the dialect) only polls.
        let task = socket.map(|socket| {
            tokio::task::spawn_local(subscriber::receive(self.clone(), socket, i, generation))
                .abort_handle()
        });
        if let Some(old) = std::mem::replace(&mut state.subscriber_tasks[idx], task) {
            old.abort();
        }
        // 2.x subscriptions are pushed on the stream, never polled.
        if fresh && !self.grpc {
            let poll_ms = self.shared.profile.subscribers.poll_interval.0.as_millis() as u32;
            state.polls.insert(i, (intended / MILLI) as u32 + poll_ms);
        }
        let req = Request {
            op: Op::Subscribe,
            id: i,
            generation,
            intended,
        };
        self.dispatch(state, req, now);
    }

    fn encode_instance(&self, req: &Request, out: &mut Vec<u8>) {
        let n = self.naming();
        let t = &self.templates;
        let fast = match req.op {
            Op::Register | Op::Reregister => t.register.as_ref(),
            Op::Deregister => t.deregister.as_ref(),
            _ => match (self.beat_style, self.dialect) {
                (BeatStyle::Light, _) | (_, Dialect::V3) => t.beat_light.as_ref(),
                (BeatStyle::Full, Dialect::V1) => None,
            },
        };
        if let Some(template) = fast {
            let global = self.state.borrow().instances.global(req.id);
            template.write(out, n.service_of(global), n.instance_ip(global));
            return;
        }
        let mut scratch = self.scratch.borrow_mut();
        let Scratch {
            name,
            ip,
            path,
            body,
        } = &mut *scratch;
        let global = {
            let state = self.state.borrow();
            state.instances.global(req.id)
        };
        n.service_name(n.service_of(global), name);
        ip.clear();
        use std::fmt::Write as _;
        let _ = write!(ip, "{}", n.instance_ip(global));
        let spec = InstanceSpec {
            namespace_id: &n.namespace,
            cluster: &n.cluster,
            ..InstanceSpec::new(ServiceName::new(&n.group, name), ip, n.port)
        };
        path.clear();
        let d = self.dialect;
        let method = match (req.op, self.beat_style, d) {
            (Op::Register | Op::Reregister, _, _) => d.register(path, &spec),
            (Op::Deregister, _, _) => d.deregister(path, &spec),
            (_, BeatStyle::Light, _) | (_, _, Dialect::V3) => d.beat(path, &spec),
            (_, BeatStyle::Full, Dialect::V1) => {
                body.clear();
                client::beat_full(path, &spec, Some(body));
                write_request(
                    out,
                    Method::Put,
                    path,
                    &self.shared.host,
                    Some((FORM_CONTENT_TYPE, body.as_bytes())),
                );
                return;
            }
        };
        write_request(out, method, path, &self.shared.host, None);
    }

    fn encode_list(&self, req: &Request, out: &mut Vec<u8>) {
        let n = self.naming();
        if let (Op::Query, Some(template)) = (req.op, &self.templates.query) {
            template.write(out, req.id, std::net::Ipv4Addr::UNSPECIFIED);
            return;
        }
        let mut scratch = self.scratch.borrow_mut();
        let Scratch { name, ip, path, .. } = &mut *scratch;
        let (service, udp_port, client_ip) = if req.op == Op::Query {
            (req.id, 0, None)
        } else {
            let state = self.state.borrow();
            let sub = state.subscribers[req.id as usize];
            (
                sub.service,
                sub.port,
                Some(self.group_ips[usize::from(sub.ip_group)]),
            )
        };
        n.service_name(service, name);
        ip.clear();
        if let Some(addr) = client_ip {
            use std::fmt::Write as _;
            let _ = write!(ip, "{addr}");
        }
        path.clear();
        self.dialect.list(
            path,
            &ListSpec {
                udp_port,
                client_ip: client_ip.map(|_| ip.as_str()),
                ..template::query_spec(n, name)
            },
            &n.cluster,
        );
        write_request(out, Method::Get, path, &self.shared.host, None);
    }

    /// Applies a register/deregister outcome to the instance and the expected set.
    fn set_present(&self, state: &mut State, local: u32, present: bool) {
        if state.instances.set_present(local, present) {
            let global = state.instances.global(local);
            let n = self.naming();
            let s = n.service_of(global);
            if n.is_watched(s) {
                let e = n.endpoint(global);
                self.shared.watch.with(s, |log| {
                    if present {
                        log.expected.add(e);
                    } else {
                        log.expected.remove(e);
                    }
                });
            }
        }
    }

    fn change_done(&self, state: &mut State, req: &Request) {
        state.changes_outstanding = state.changes_outstanding.saturating_sub(1);
        let loaded = match (req.op, req.generation) {
            (Op::Register, LOAD) => 1,
            (Op::Register, LOAD_BATCH) => self.batches[req.id as usize].locals.len() as u64,
            _ => 0,
        };
        state.load_left = state.load_left.saturating_sub(loaded);
    }

    /// A change failed: the instance's state on the server is unknown. A failed
    /// deregistration keeps the instance (it beats again, and a drain retries it);
    /// a failed registration is left to the beats (a 20404 re-registers it).
    fn change_failed(&self, state: &mut State, req: &Request, now: Nanos) {
        if req.op == Op::Deregister {
            let slot = &mut state.instances.slots[req.id as usize];
            if slot.life == Life::Leaving {
                slot.life = Life::Registered;
                if !slot.in_wheel && !self.grpc {
                    slot.in_wheel = true;
                    let due = (now / MILLI) as u32 + slot.interval_ms;
                    state.wheel.insert(req.id, due);
                }
            }
        } else if self.grpc {
            // A 2.x client keeps what it failed to register for its redo task
            // (`NamingGrpcRedoService`'s `RedoScheduledTask`, every
            // `DEFAULT_REDO_DELAY_TIME`, 3 s), which registers it again while
            // it is still meant to exist: without this, one refused redo after
            // a restart left the instance missing for the rest of the run.
            if req.op == Op::Register && req.generation == LOAD_BATCH {
                for &local in &self.batches[req.id as usize].locals {
                    redo_later(state, local, now);
                }
            } else {
                redo_later(state, req.id, now);
            }
        }
    }

    fn on_ok(
        &self,
        state: &mut State,
        req: &Request,
        resp: &Response<'_>,
        done: Nanos,
    ) -> Result<(), Failure> {
        match req.op {
            Op::Register | Op::Reregister => {
                if !self.dialect.write_ok(&resp.body) {
                    return Err(not_ok(&resp.body));
                }
                self.set_present(state, req.id, true);
            }
            Op::Deregister => {
                if !self.dialect.write_ok(&resp.body) {
                    return Err(not_ok(&resp.body));
                }
                self.deregistered(state, req.id);
            }
            Op::Beat => self.on_beat(state, req, resp, done)?,
            Op::Query => {
                let parsed = match self.dialect {
                    Dialect::V1 => ServiceInfo::parse(&resp.body).is_ok(),
                    Dialect::V3 => dialect::v3_endpoints(&resp.body).is_some(),
                };
                if !parsed {
                    return Err(Failure::new(
                        ErrorClass::Protocol,
                        "a 2xx list answer that is not a service's list",
                    ));
                }
            }
            Op::Subscribe => {
                let list = self.polled_list(state, req, &resp.body)?;
                self.observe(state, req.id, req.generation, &list, None)?;
            }
        }
        Ok(())
    }

    /// A deregistration of `local` was applied: absent, and its slot free again.
    fn deregistered(&self, state: &mut State, local: u32) {
        self.set_present(state, local, false);
        let slot = &mut state.instances.slots[local as usize];
        if slot.life == Life::Leaving {
            slot.life = Life::Absent;
            state.live = state.live.saturating_sub(1);
            state.instances.free.push(local);
        }
    }

    /// A subscriber's poll answer as a host list. A v3 list names no service: it is
    /// the subscriber's own.
    fn polled_list(&self, state: &State, req: &Request, body: &[u8]) -> Result<HostList, Failure> {
        match self.dialect {
            Dialect::V1 => {
                let info = ServiceInfo::parse(body).map_err(|e| {
                    Failure::because(ErrorClass::Protocol, format_args!("unreadable list: {e}"))
                })?;
                Ok(HostList::from_info(&info))
            }
            Dialect::V3 => {
                let endpoints = dialect::v3_endpoints(body)
                    .ok_or(Failure::new(ErrorClass::Protocol, "unreadable v3 list"))?;
                let n = self.naming();
                let service = state
                    .subscribers
                    .get(req.id as usize)
                    .map_or(0, |s| s.service);
                let mut name = String::new();
                n.service_name(service, &mut name);
                let name = ServiceName::new(&n.group, &name).grouped();
                Ok(HostList::new(name, endpoints))
            }
        }
    }

    /// A v3 heartbeat's answer: renewed, or not found (registered again).
    fn on_heartbeat(
        &self,
        state: &mut State,
        req: &Request,
        body: &[u8],
        done: Nanos,
    ) -> Result<(), Failure> {
        let local = req.id;
        let stale = state.instances.slots[local as usize].life == Life::Absent;
        let unread = || Failure::new(ErrorClass::Protocol, "unreadable v3 heartbeat answer");
        match Dialect::v3_heartbeat(body).ok_or_else(unread)? {
            Heartbeat::Renewed => {
                if !stale {
                    self.set_present(state, local, true);
                }
            }
            Heartbeat::NotFound => self.not_found(state, local, done),
        }
        Ok(())
    }

    /// The server does not hold a beating instance: re-register it, as the clients'
    /// beat tasks do, if it is still meant to exist (a beat racing its
    /// deregistration is not found either).
    fn not_found(&self, state: &mut State, local: u32, done: Nanos) {
        self.set_present(state, local, false);
        if state.instances.slots[local as usize].life == Life::Registered {
            let r = Request {
                op: Op::Reregister,
                id: local,
                generation: 0,
                intended: done,
            };
            self.dispatch(state, r, done);
        }
    }

    fn on_beat(
        &self,
        state: &mut State,
        req: &Request,
        resp: &Response<'_>,
        done: Nanos,
    ) -> Result<(), Failure> {
        if self.dialect == Dialect::V3 {
            return self.on_heartbeat(state, req, &resp.body, done);
        }
        let local = req.id;
        // A beat answered after its instance's deregistration was answered is stale: the
        // server took it before the deregistration, and replies on different connections
        // arrive in any order. It says nothing of the server now, and counting it would
        // expect an instance the server rightly no longer holds.
        let stale = state.instances.slots[local as usize].life == Life::Absent;
        if !state.beat_ok.is_empty() && *resp.body == state.beat_ok[..] {
            if !stale {
                self.set_present(state, local, true);
            }
            return Ok(());
        }
        let beat = BeatResponse::parse(&resp.body).map_err(|e| {
            Failure::because(
                ErrorClass::Protocol,
                format_args!("unreadable beat answer: {e}"),
            )
        })?;
        if beat.is_not_found() {
            self.not_found(state, local, done);
            return Ok(());
        }
        if beat.code != registry_proto::naming::beat::CODE_OK {
            return Err(Failure::because(
                ErrorClass::Protocol,
                format_args!("beat answered code {}", beat.code),
            ));
        }
        if !stale {
            self.set_present(state, local, true);
        }
        let interval = beat.client_beat_interval.clamp(100, 3_600_000) as u32;
        let slot = &mut state.instances.slots[local as usize];
        if slot.interval_ms == interval {
            state.beat_ok = resp.body.to_vec();
        } else {
            // Takes effect from the next scheduling of this instance.
            slot.interval_ms = interval;
        }
        Ok(())
    }

    /// A subscriber received a list (a push when `received` is set, else a poll).
    fn observe(
        &self,
        state: &mut State,
        i: u32,
        generation: u32,
        list: &HostList,
        received: Option<Nanos>,
    ) -> Result<(), Failure> {
        let Some(sub) = state.subscribers.get(i as usize).copied() else {
            return Ok(());
        };
        if !sub.active || sub.generation != generation {
            return Ok(()); // a replaced subscriber's late answer
        }
        let n = self.naming();
        let mut want = String::new();
        n.service_name(sub.service, &mut want);
        if list.name != ServiceName::new(&n.group, &want).grouped() {
            return Err(Failure::new(
                ErrorClass::Protocol,
                "a list of another service than the one subscribed",
            ));
        }
        let seen = self
            .shared
            .watch
            .with(sub.service, |log| {
                log.observe(sub.seen, |e| list.contains(e))
            })
            .unwrap_or(crate::fleet::Seen {
                upto: 0,
                oldest: None,
            });
        if let (Some(at), Some(oldest)) = (received, seen.oldest) {
            state.recorder.push_latency(oldest, at);
        }
        let s = &mut state.subscribers[i as usize];
        s.seen = seen.upto;
        s.view = list.hash;
        s.has_view = true;
        Ok(())
    }
}

impl Exchange for Ctx {
    fn driver_due(&self) -> bool {
        self.driver_due.is_due()
    }

    fn encode(&self, req: &Request, out: &mut Vec<u8>) {
        match req.op {
            Op::Query | Op::Subscribe => self.encode_list(req, out),
            _ => self.encode_instance(req, out),
        }
    }

    fn sent(&self, req: &Request, ready: Nanos, sent: Nanos) {
        self.on_sent(req, ready, sent);
    }

    fn complete(
        &self,
        req: &Request,
        sent: Nanos,
        done: Nanos,
        result: Result<&Response<'_>, &Failure>,
    ) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let answer = result.map(|resp| {
            if (200..300).contains(&resp.status) {
                self.on_ok(state, req, resp, done)
            } else {
                Err(Failure::status(resp.status, &resp.body))
            }
        });
        self.record(state, req, Some(sent), done, answer);
    }

    fn abandon(&self, req: &Request, failure: &Failure, declared: Nanos) {
        self.on_abandon(req, failure, declared);
    }
}

/// What both kinds of lane report, recorded the same way.
impl Ctx {
    /// A request is being sent: recorded, and a change to a watched service logged.
    fn on_sent(&self, req: &Request, ready: Nanos, sent: Nanos) {
        let mut state = self.state.borrow_mut();
        state.recorder.sent(req.op, req.intended, ready, sent);
        self.log_change(&state, req, sent);
    }

    /// A change to a watched service is on its way (sent at `sent`): logged for its
    /// subscribers before any push can show it.
    fn log_change(&self, state: &State, req: &Request, sent: Nanos) {
        if !matches!(req.op, Op::Register | Op::Reregister | Op::Deregister)
            || self.shared.watch.is_empty()
        {
            return;
        }
        let add = req.op != Op::Deregister;
        let log = |local: u32| {
            let n = self.naming();
            let global = state.instances.global(local);
            let s = n.service_of(global);
            if n.is_watched(s) {
                let endpoint = n.endpoint(global);
                let change = Change {
                    sent,
                    endpoint,
                    add,
                };
                self.shared.watch.with(s, |log| log.sent(change));
            }
        };
        if req.generation == LOAD_BATCH {
            self.batches[req.id as usize]
                .locals
                .iter()
                .copied()
                .for_each(log);
        } else {
            log(req.id);
        }
    }

    /// Records an answered (`Ok`, with what the answer meant) or unanswered (`Err`)
    /// request, and for a change what it leaves of the instance.
    /// `sent` is `None` for a request that failed before it was written (a 2.x call
    /// whose bytes never left); an answered one always has a send.
    fn record(
        &self,
        state: &mut State,
        req: &Request,
        sent: Option<Nanos>,
        done: Nanos,
        answer: Result<Result<(), Failure>, &Failure>,
    ) {
        let is_change = matches!(req.op, Op::Register | Op::Deregister | Op::Reregister);
        match answer {
            Err(failure) => {
                state
                    .recorder
                    .failed(req.op, failure, req.intended, sent, done);
                if is_change {
                    self.change_failed(state, req, done);
                }
            }
            Ok(outcome) => {
                if outcome.is_err() && is_change {
                    self.change_failed(state, req, done);
                }
                let sent = sent.unwrap_or(done);
                state.recorder.completed(
                    req.op,
                    req.intended,
                    sent,
                    done,
                    outcome.as_ref().map(|_| ()),
                );
            }
        }
        if is_change {
            self.change_done(state, req);
        }
    }

    fn on_abandon(&self, req: &Request, failure: &Failure, declared: Nanos) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state
            .recorder
            .failed(req.op, failure, req.intended, None, declared);
        if matches!(req.op, Op::Register | Op::Deregister | Op::Reregister) {
            self.change_failed(state, req, declared);
            self.change_done(state, req);
        }
    }
}

impl Inbox for Ctx {
    fn driver_due(&self) -> bool {
        self.driver_due.is_due()
    }

    fn receive(&self, index: u32, generation: u32, socket: &UdpSocket) -> io::Result<bool> {
        let mut buf = self.udp_buf.borrow_mut();
        let (n, from) = socket.try_recv_from(&mut buf)?;
        let at = self.shared.clock.now();
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let current = state
            .subscribers
            .get(index as usize)
            .is_some_and(|s| s.active && s.generation == generation);
        if !current {
            return Ok(false);
        }
        state.recorder.current.pushes += 1;
        match subscriber::read_push(&buf[..n]) {
            Ok(r) => {
                let mut ack = self.ack_buf.borrow_mut();
                ack.clear();
                subscriber::encode_ack(&r, &mut ack);
                if socket.try_send_to(&ack, from).is_ok() {
                    state.recorder.current.acks += 1;
                }
                if let Some(list) = &r.list {
                    if self
                        .observe(state, index, generation, list, Some(at))
                        .is_err()
                    {
                        state.recorder.current.push_errors += 1;
                    }
                }
            }
            Err(_) => state.recorder.current.push_errors += 1,
        }
        Ok(true)
    }
}

/// How long after the runner starts a phase its schedules begin.
const PHASE_LEAD: Nanos = 2 * MILLI;

/// The pacers of the current phase: each turns one of its rates into intended times.
#[derive(Default)]
struct Pacers {
    load: Option<Pacer>,
    register: Option<Pacer>,
    deregister: Option<Pacer>,
    query: Option<Pacer>,
    churn: Option<Pacer>,
    join: Option<Pacer>,
    drain: Option<Pacer>,
}

impl Pacers {
    /// Each pacer's next due time.
    fn peeks(&self) -> [Option<Nanos>; 7] {
        [
            &self.load,
            &self.register,
            &self.deregister,
            &self.query,
            &self.churn,
            &self.join,
            &self.drain,
        ]
        .map(|p| p.as_ref().and_then(Pacer::peek))
    }

    /// The pacers of `phase`, which started at `start`, for worker `index`.
    fn for_phase(shared: &Shared, phase: Phase, start: Nanos, index: u32) -> Pacers {
        // A worker sees the runner's phase word within one wake-up: a schedule that
        // began at once would have its first items late before it was seen.
        let start = start + PHASE_LEAD;
        let rates = shared.plan.rates(phase);
        let pace = |rate: f64, limit: Option<u64>| {
            Some(Pacer::for_worker(start, rate, limit, index, shared.workers))
        };
        match phase {
            Phase::Load => Pacers {
                load: pace(
                    rates.register,
                    Some(u64::from(shared.profile.fleet.instances)),
                ),
                ..Pacers::default()
            },
            Phase::Steady => Pacers {
                register: pace(rates.register, None),
                deregister: pace(rates.deregister, None),
                query: pace(rates.query, None),
                churn: pace(rates.subscriber_churn, None),
                join: pace(shared.plan.join_rate, Some(shared.plan.subscribers)),
                ..Pacers::default()
            },
            Phase::Drain => Pacers {
                drain: pace(rates.deregister, None),
                ..Pacers::default()
            },
            _ => Pacers::default(),
        }
    }
}

fn build(shared: &Arc<Shared>, index: u32) -> anyhow::Result<Rc<Ctx>> {
    let p = &shared.profile;
    let grpc = p.protocol == crate::profile::Protocol::Grpc;
    let dialect = p.protocol.dialect().unwrap_or(Dialect::V1);
    let WorkerLanes {
        lanes,
        groups,
        group_ips,
    } = worker_lanes(shared, index);
    let instances = Instances::new(
        p.fleet.instances,
        index,
        shared.workers,
        p.fleet.beat_interval.0.as_millis() as u32,
    );
    let batches = if grpc && p.grpc.batch {
        batches(&shared.naming, &instances, lanes.len())
    } else {
        Vec::new()
    };
    let state = initial_state(shared, index, instances, groups.len());
    Ok(Rc::new(Ctx {
        shared: shared.clone(),
        index,
        state: RefCell::new(state),
        lanes,
        groups,
        group_ips,
        scratch: RefCell::new(Scratch::default()),
        udp_buf: RefCell::new(vec![0; 64 * 1024]),
        ack_buf: RefCell::new(Vec::with_capacity(128)),
        driver_due: DriverDue::new(shared.clock),
        beat_style: p.fleet.beat,
        templates: Templates::new(&shared.naming, &shared.host, dialect),
        dialect,
        grpc,
        batches,
        batch: p.connections.pipeline.max(1),
    }))
}

/// A worker's lanes and the groups of them that share a source address.
struct WorkerLanes {
    lanes: Vec<Rc<Lane>>,
    /// Lane indexes per source address (parallel to `group_ips`).
    groups: Vec<Vec<usize>>,
    group_ips: Vec<IpAddr>,
}

/// Worker `index`'s lanes: its share of the connections (HTTP), or exactly its
/// share of the profile's clients (the 2.x fleet's lanes are its clients; the
/// runner starts no more workers than clients).
fn worker_lanes(shared: &Shared, index: u32) -> WorkerLanes {
    let p = &shared.profile;
    let grpc = p.protocol == crate::profile::Protocol::Grpc;
    let workers = shared.workers;
    let per_worker = if grpc {
        share(u64::from(p.grpc.clients), index, workers).max(1) as usize
    } else {
        (p.connections.count as usize)
            .div_ceil(workers as usize)
            .max(1)
    };
    let ips: Vec<Option<IpAddr>> = if shared.source_ips.is_empty() {
        vec![None]
    } else {
        shared.source_ips.iter().copied().map(Some).collect()
    };
    // Lane k of worker w is lane number w * per_worker + k of the run: it uses that
    // number's source address and server, modulo their counts, so lanes (and the
    // simulated clients on them) spread evenly over both. Its subscribers use the
    // addresses its lanes use, so their polls and the pushes they cause share one.
    let servers: Rc<[SocketAddr]> = Rc::from(shared.targets.clone());
    let mut out = WorkerLanes {
        lanes: Vec::with_capacity(per_worker),
        groups: Vec::new(),
        group_ips: Vec::new(),
    };
    for k in 0..per_worker {
        // A 2.x worker's share may be one client short of another's: number its
        // clients across workers so they still spread evenly over the servers.
        let number = if grpc {
            k * workers as usize + index as usize
        } else {
            index as usize * per_worker + k
        };
        let ip = ips[number % ips.len()];
        out.lanes
            .push(Rc::new(Lane::new(ip, servers.clone(), number)));
        let addr = ip.unwrap_or(shared.subscriber_ip);
        match out.group_ips.iter().position(|a| *a == addr) {
            Some(group) => out.groups[group].push(k),
            None => {
                out.group_ips.push(addr);
                out.groups.push(vec![k]);
            }
        }
    }
    out
}

/// Worker `index`'s state before the run: its instances, empty wheels sized for
/// its share, a recorder, a seeded random stream.
fn initial_state(shared: &Shared, index: u32, instances: Instances, groups: usize) -> State {
    let p = &shared.profile;
    let mut wheel = crate::wheel::Wheel::new(8192, 0);
    wheel.reserve_ids(instances.slots.len());
    let subscribers = share(u64::from(p.fleet.subscribers), index, shared.workers) as usize;
    let mut polls = crate::wheel::Wheel::new(16384, 0);
    polls.reserve_ids(subscribers);
    State {
        load_left: instances.slots.len() as u64,
        instances,
        live: 0,
        wheel,
        polls,
        subscribers: Vec::with_capacity(subscribers),
        subscriber_tasks: Vec::with_capacity(subscribers),
        recorder: Recorder::new(),
        rng: 0x9e37_79b9_7f4a_7c15 ^ (u64::from(index) + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9),
        beat_ok: Vec::new(),
        changes_outstanding: 0,
        next_load: 0,
        joined: 0,
        drain_cursor: 0,
        instance_lane: 0,
        batch_left: 0,
        group_lane: vec![0; groups],
    }
}

/// The load phase's batches of a 2.x worker: its instances grouped by (client,
/// service), in the order of their first instance.
fn batches(naming: &Naming, instances: &Instances, lanes: usize) -> Vec<Batch> {
    let mut index: std::collections::HashMap<(usize, u32), usize> = Default::default();
    let mut out: Vec<Batch> = Vec::new();
    for local in 0..instances.slots.len() as u32 {
        let lane = local as usize % lanes.max(1);
        let service = naming.service_of(instances.global(local));
        let k = *index.entry((lane, service)).or_insert_with(|| {
            out.push(Batch {
                lane,
                service,
                locals: Vec::new(),
            });
            out.len() - 1
        });
        out[k].locals.push(local);
    }
    out
}

/// The worker's driver: runs until the runner sets [`Phase::Stop`].
///
/// Every millisecond it follows the runner's phase, sends what came due
/// ([`Driver::send_due`]), publishes its progress every 100 ms and its recording every
/// second; at the stop it lets the connections finish and records what they could not.
pub async fn drive(
    shared: Arc<Shared>,
    index: u32,
    tx: Sender<Interval>,
) -> anyhow::Result<Outcome> {
    let ctx = build(&shared, index)?;
    let clock = shared.clock;
    let lane_config = LaneConfig {
        depth: if ctx.grpc {
            GRPC_DEPTH
        } else {
            shared.profile.connections.pipeline as usize
        },
        timeout: shared.profile.connections.timeout.0,
    };
    let namespace: Rc<str> = Rc::from(shared.profile.fleet.namespace.as_str());
    let wires: Vec<Rc<grpc::lane::Wire>> = if ctx.grpc {
        ctx.lanes.iter().map(|_| Rc::default()).collect()
    } else {
        Vec::new()
    };
    let lane_tasks: Vec<JoinHandle<()>> = ctx
        .lanes
        .iter()
        .enumerate()
        .map(|(k, lane)| {
            let (ctx, lane) = (ctx.clone(), lane.clone());
            if ctx.grpc {
                let (ns, wire) = (namespace.clone(), wires[k].clone());
                let task = grpc::lane::drive(ctx, lane, wire, k, lane_config, clock, ns);
                tokio::task::spawn_local(task)
            } else {
                tokio::task::spawn_local(conn::drive(ctx, lane, lane_config, clock))
            }
        })
        .collect();
    let spinner = ctx
        .shared
        .profile
        .generator
        .busy_poll
        .then(|| tokio::task::spawn_local(spin()));
    let mut driver = Driver::new(ctx, tx, wires, lane_config);
    let mut waiter = Waiter::new(clock);
    loop {
        let now = clock.now();
        driver.follow_phase();
        if driver.phase == Phase::Stop {
            break;
        }
        driver.send_due(now);
        driver.write_through();
        driver.publish_progress(now, lane_config.timeout);
        driver.roll_second(now);
        // Wake exactly when the next rate-driven item is due, or at the next tick
        // (the wheels' resolution): not at the tick after a mid-millisecond item.
        let next = next_wake(now, driver.pacers.peeks());
        driver.ctx.driver_due.wait_for(next);
        wait_until(&mut waiter, next).await;
    }
    if let Some(s) = spinner {
        s.abort();
    }
    driver.stop(lane_tasks, lane_config.timeout).await
}

/// Keeps the worker's runtime from ever parking (`--busy-poll`): a task that is always
/// ready makes the scheduler poll the I/O driver without a timeout instead of sleeping
/// in `epoll_wait`, so the server's sends find nobody to wake. It does not yield the
/// thread: under the normal policy that would hand the core to any other runnable
/// task, whatever its nice value, for a whole time slice (the runner refuses a
/// real-time policy, under which it could not yield enough).
async fn spin() {
    loop {
        tokio::task::yield_now().await;
    }
}

/// The driver's own state between ticks.
struct Driver {
    ctx: Rc<Ctx>,
    tx: Sender<Interval>,
    /// The 2.x lanes' connections, parallel to the lanes (empty for the 1.x fleet).
    wires: Vec<Rc<grpc::lane::Wire>>,
    lane_config: LaneConfig,
    phase: Phase,
    pacers: Pacers,
    /// Scratch for the wheels' due entries.
    fired: Vec<(u32, u32)>,
    /// The second of the run being recorded.
    second: u32,
    next_progress: Nanos,
    /// Subscribers this worker simulates.
    subscribers: u32,
    poll_ms: u32,
}

impl Driver {
    fn new(
        ctx: Rc<Ctx>,
        tx: Sender<Interval>,
        wires: Vec<Rc<grpc::lane::Wire>>,
        lane_config: LaneConfig,
    ) -> Driver {
        let shared = &ctx.shared;
        let profile = &shared.profile;
        Driver {
            second: (shared.clock.now() / SECOND) as u32,
            subscribers: share(
                u64::from(profile.fleet.subscribers),
                ctx.index,
                shared.workers,
            ) as u32,
            poll_ms: profile.subscribers.poll_interval.0.as_millis() as u32,
            ctx,
            tx,
            wires,
            lane_config,
            phase: Phase::Init,
            pacers: Pacers::default(),
            fired: Vec::new(),
            next_progress: 0,
        }
    }

    /// Takes up the runner's phase when it changed: new pacers, and says it has.
    fn follow_phase(&mut self) {
        let shared = &self.ctx.shared;
        let (phase, start) = shared.phase();
        if phase == self.phase {
            return;
        }
        self.phase = phase;
        self.ctx.state.borrow_mut().recorder.set_phase(phase);
        self.pacers = Pacers::for_phase(shared, phase, start, self.ctx.index);
        if phase == Phase::Load && !self.ctx.batches.is_empty() {
            // The worker's share of the registration rate, in batches.
            let batches = self.ctx.batches.len();
            let instances = self.ctx.state.borrow().instances.slots.len();
            let per_batch = instances as f64 / batches as f64;
            let rate = shared.plan.rates(phase).register / f64::from(shared.workers) / per_batch;
            self.pacers.load = Some(Pacer::new(start + PHASE_LEAD, rate, Some(batches as u64)));
        }
        if phase == Phase::Drain {
            self.ctx.state.borrow_mut().drain_cursor = 0;
        }
        shared.progress[self.ctx.index as usize]
            .phase_seen
            .store(u64::from(phase.as_u8()), Ordering::Relaxed);
    }

    /// Writes what this tick made due from here, on every lane whose connection
    /// has room: a due request does not wait for its lane's task to be scheduled
    /// behind the other lanes' reads and writes. An HTTP lane writes it to its
    /// socket ([`Lane::write_through`]); a 2.x lane's call starts here
    /// ([`grpc::lane::write_through`]) and its connection's `h2` task writes it.
    fn write_through(&self) {
        if self.ctx.grpc {
            for (lane, wire) in self.ctx.lanes.iter().zip(&self.wires) {
                grpc::lane::write_through(
                    &self.ctx,
                    lane,
                    wire,
                    self.lane_config,
                    self.ctx.shared.clock,
                );
            }
            return;
        }
        for lane in &self.ctx.lanes {
            lane.write_through(&*self.ctx, &self.ctx.shared.clock);
        }
    }

    /// Dispatches every operation whose intended time is at or before `now`.
    fn send_due(&mut self, now: Nanos) {
        let ctx = self.ctx.clone();
        let mut guard = ctx.state.borrow_mut();
        let state = &mut *guard;
        let tick = (now / MILLI) as u32;
        ctx.send_beats(state, tick, now, &mut self.fired);
        ctx.send_polls(state, tick, now, self.poll_ms, &mut self.fired);
        let pacers = &mut self.pacers;
        if let Some(pacer) = pacers.load.as_mut() {
            ctx.send_load(state, pacer, now);
        }
        if let Some(pacer) = pacers.join.as_mut() {
            ctx.start_subscribers(state, pacer, self.subscribers, now);
        }
        if let Some(pacer) = pacers.register.as_mut() {
            ctx.send_registrations(state, pacer, now);
        }
        if let Some(pacer) = pacers.deregister.as_mut() {
            ctx.send_deregistrations(state, pacer, now);
        }
        if let Some(pacer) = pacers.query.as_mut() {
            ctx.send_queries(state, pacer, now);
        }
        if let Some(pacer) = pacers.churn.as_mut() {
            ctx.replace_subscribers(state, pacer, now);
        }
        if let Some(pacer) = pacers.drain.as_mut() {
            ctx.send_drain(state, pacer, now);
        }
    }

    /// Every 100 ms: fails requests that waited too long, and publishes the counters
    /// the runner reads.
    fn publish_progress(&mut self, now: Nanos, timeout: Duration) {
        if now < self.next_progress {
            return;
        }
        self.next_progress = now + 100 * MILLI;
        let ctx = &*self.ctx;
        for lane in &ctx.lanes {
            lane.check_timeout(now, timeout);
        }
        let progress = &ctx.shared.progress[ctx.index as usize];
        let state = ctx.state.borrow();
        progress.publish(&state.recorder);
        progress.outstanding.store(
            ctx.lanes.iter().map(|l| l.outstanding() as u64).sum(),
            Ordering::Relaxed,
        );
        progress
            .present
            .store(state.instances.present, Ordering::Relaxed);
        progress.load_left.store(state.load_left, Ordering::Relaxed);
        progress.drain_left.store(state.live, Ordering::Relaxed);
        progress
            .changes_outstanding
            .store(state.changes_outstanding, Ordering::Relaxed);
        if matches!(self.phase, Phase::Settle | Phase::Final) {
            let unconverged = ctx.unconverged(&state);
            progress.unconverged.store(unconverged, Ordering::Relaxed);
        }
    }

    /// At each second boundary: hands the second's recording to the runner.
    fn roll_second(&mut self, now: Nanos) {
        let second = (now / SECOND) as u32;
        if second <= self.second {
            return;
        }
        let stats = self.ctx.state.borrow_mut().recorder.roll();
        let _ = self.tx.send(Interval {
            worker: self.ctx.index,
            second: self.second,
            stats,
        });
        self.second = second;
        if self.ctx.index == 0 {
            // Changes older than a minute that a subscriber has still not seen
            // will not be: it is not converging, which the end of the run reports.
            self.ctx.shared.watch.trim(now.saturating_sub(60 * SECOND));
        }
    }

    /// Lets the connections finish what is queued for as long as a request may take
    /// (timeouts still apply), then fails whatever is left, so every operation the
    /// worker dispatched is in its record; then hands the record back.
    async fn stop(
        self,
        lane_tasks: Vec<JoinHandle<()>>,
        timeout: Duration,
    ) -> anyhow::Result<Outcome> {
        let ctx = &*self.ctx;
        let clock = ctx.shared.clock;
        for lane in &ctx.lanes {
            lane.close();
        }
        let deadline = clock.now() + (timeout + Duration::from_secs(1)).as_nanos() as Nanos;
        while !lane_tasks.iter().all(JoinHandle::is_finished) {
            let now = clock.now();
            if now >= deadline {
                for lane in &ctx.lanes {
                    lane.give_up();
                }
                break;
            }
            for lane in &ctx.lanes {
                lane.check_timeout(now, timeout);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // After give_up a lane ends without waiting on its socket: bounded anyway.
        let _ = tokio::time::timeout(Duration::from_secs(3), async {
            for task in lane_tasks {
                let _ = task.await;
            }
        })
        .await;
        let mut state = ctx.state.borrow_mut();
        for task in state.subscriber_tasks.iter_mut().filter_map(Option::take) {
            task.abort();
        }
        for subscriber in state.subscribers.iter_mut() {
            subscriber.active = false;
        }
        let last = state.recorder.roll();
        let _ = self.tx.send(Interval {
            worker: ctx.index,
            second: self.second,
            stats: last,
        });
        Ok(Outcome {
            instance_slots: state.instances.slots.len(),
            subscriber_slots: state.subscribers.len(),
            stats: std::mem::take(&mut state.recorder).finish(),
        })
    }
}

/// The scheduled operations, one step per kind. Each takes every item its pacer says
/// is due and sends it stamped with its own intended time; an item the generator has
/// nothing to send for is recorded as skipped, never dropped silently.
impl Ctx {
    /// Beats of instances whose time came on the beat wheel.
    /// For the 2.x fleet, whose instances do not beat, the wheel holds the
    /// redo task's retries instead ([`redo_later`]): each fires once.
    fn send_beats(&self, state: &mut State, tick: u32, now: Nanos, fired: &mut Vec<(u32, u32)>) {
        fired.clear();
        state.wheel.advance(tick, fired);
        for &(local, due) in fired.iter() {
            let slot = &mut state.instances.slots[local as usize];
            if slot.life != Life::Registered {
                // Deregistered since: leaves the wheel (removal is lazy).
                slot.in_wheel = false;
                continue;
            }
            let op = if self.grpc {
                // A redo fires once.
                slot.in_wheel = false;
                Op::Reregister
            } else {
                state.wheel.insert(local, due + slot.interval_ms);
                Op::Beat
            };
            let req = Request {
                op,
                id: local,
                generation: 0,
                intended: u64::from(due) * MILLI,
            };
            self.dispatch(state, req, now);
        }
    }

    /// Re-polls of subscribers whose time came on the poll wheel.
    fn send_polls(
        &self,
        state: &mut State,
        tick: u32,
        now: Nanos,
        poll_ms: u32,
        fired: &mut Vec<(u32, u32)>,
    ) {
        fired.clear();
        state.polls.advance(tick, fired);
        for &(index, due) in fired.iter() {
            let subscriber = state.subscribers[index as usize];
            if !subscriber.active {
                continue;
            }
            state.polls.insert(index, due + poll_ms);
            let req = Request {
                op: Op::Subscribe,
                id: index,
                generation: subscriber.generation,
                intended: u64::from(due) * MILLI,
            };
            self.dispatch(state, req, now);
        }
    }

    /// The load phase: registers the fleet in index order.
    fn send_load(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        if !self.batches.is_empty() {
            return self.send_load_batches(state, pacer, now);
        }
        while let Some(intended) = pacer.next_due(now) {
            if (state.next_load as usize) < state.instances.slots.len() {
                self.register(state, state.next_load, intended, now, true);
                state.next_load += 1;
            } else {
                state.recorder.skip(Op::Register);
            }
        }
    }

    /// The 2.x load phase in batches: one `batchRegisterInstance` per (client,
    /// service), each registering its instances (the pacer's slots are batches).
    fn send_load_batches(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        while let Some(intended) = pacer.next_due(now) {
            let k = state.next_load as usize;
            let Some(batch) = self.batches.get(k) else {
                state.recorder.skip(Op::Register);
                continue;
            };
            for &local in &batch.locals {
                let slot = &mut state.instances.slots[local as usize];
                if slot.life == Life::Absent {
                    state.live += 1;
                }
                slot.life = Life::Registered;
            }
            state.next_load += 1;
            let req = Request {
                op: Op::Register,
                id: k as u32,
                generation: LOAD_BATCH,
                intended,
            };
            self.dispatch(state, req, now);
        }
    }

    /// Subscribers joining at the start of the steady phase, in index order.
    fn start_subscribers(
        self: &Rc<Self>,
        state: &mut State,
        pacer: &mut Pacer,
        total: u32,
        now: Nanos,
    ) {
        while state.joined < total {
            let Some(intended) = pacer.next_due(now) else {
                break;
            };
            self.start_subscriber(state, state.joined, intended, now);
            state.joined += 1;
        }
    }

    /// Steady-phase registrations of new instances.
    fn send_registrations(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        let interval = self.shared.profile.fleet.beat_interval.0.as_millis() as u32;
        while let Some(intended) = pacer.next_due(now) {
            match state.instances.take_free(interval) {
                Some(local) => self.register(state, local, intended, now, false),
                None => state.recorder.skip(Op::Register),
            }
        }
    }

    /// Steady-phase deregistrations of random registered instances.
    fn send_deregistrations(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        while let Some(intended) = pacer.next_due(now) {
            let start = state.below(state.instances.slots.len() as u64) as usize;
            // A 2.x deregistration travels on its own HTTP/2 stream and could overtake
            // the registration still in flight: only confirmed instances leave.
            let found = if self.grpc {
                state.instances.confirmed_from(start)
            } else {
                state.instances.registered_from(start)
            };
            match found {
                Some(local) => self.deregister(state, local, intended, now),
                None => state.recorder.skip(Op::Deregister),
            }
        }
    }

    /// Queries of random services.
    fn send_queries(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        while let Some(intended) = pacer.next_due(now) {
            let k = state.below(u64::from(self.naming().own_services())) as u32;
            let service = self.naming().own_service(k);
            let req = Request {
                op: Op::Query,
                id: service,
                generation: 0,
                intended,
            };
            self.dispatch(state, req, now);
        }
    }

    /// Subscriber churn: a random joined subscriber is replaced by a new socket.
    fn replace_subscribers(self: &Rc<Self>, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        while let Some(intended) = pacer.next_due(now) {
            if state.joined == 0 {
                state.recorder.skip(Op::Subscribe);
                continue;
            }
            let index = state.below(u64::from(state.joined)) as u32;
            self.start_subscriber(state, index, intended, now);
        }
    }

    /// The drain: deregisters every registered instance in index order, retrying
    /// those whose deregistration failed once a pass is complete.
    fn send_drain(&self, state: &mut State, pacer: &mut Pacer, now: Nanos) {
        while pacer.peek().is_some_and(|t| t <= now) {
            let slots = state.instances.slots.len();
            let mut found = None;
            while state.drain_cursor < slots {
                let local = state.drain_cursor;
                state.drain_cursor += 1;
                if state.instances.slots[local].life == Life::Registered {
                    found = Some(local as u32);
                    break;
                }
            }
            let Some(local) = found else {
                // A full pass: start over for any whose deregistration failed (they
                // are Registered again). The pacer's slot is not used: the drain
                // ends when nothing is left, which is not a missed slot.
                if state.live > 0 && state.changes_outstanding == 0 {
                    state.drain_cursor = 0;
                }
                break;
            };
            let intended = pacer.next_due(now).unwrap_or(now);
            self.deregister(state, local, intended, now);
        }
    }

    /// Active subscribers whose view differs from the expected list of their service.
    fn unconverged(&self, state: &State) -> u64 {
        let expected = self.shared.watch.expected();
        state
            .subscribers
            .iter()
            .filter(|s| s.active)
            .filter(|s| {
                !s.has_view
                    || expected
                        .get(s.service as usize)
                        .is_none_or(|e| *e != s.view)
            })
            .count() as u64
    }
}

/// The 2.x fleet: a lane is one simulated client's gRPC connection
/// ([`grpc::lane`]), and these are its requests and what their answers mean.
impl grpc::lane::Exchange for Ctx {
    fn payload(&self, req: &Request) -> Payload {
        let n = self.naming();
        let state = self.state.borrow();
        let service_of = |local: u32| n.service_of(state.instances.global(local));
        let instance = |local: u32| {
            let global = state.instances.global(local);
            request::instance(n.instance_ip(global).to_string(), n.port, &n.cluster)
        };
        match req.op {
            Op::Register if req.generation == LOAD_BATCH => {
                let batch = &self.batches[req.id as usize];
                let instances: Vec<Host> = batch.locals.iter().map(|l| instance(*l)).collect();
                request::batch_register(&self.grpc_naming(batch.service), &instances)
            }
            Op::Register | Op::Reregister => {
                request::register(&self.grpc_naming(service_of(req.id)), &instance(req.id))
            }
            Op::Deregister => {
                request::deregister(&self.grpc_naming(service_of(req.id)), &instance(req.id))
            }
            Op::Query => request::query(&self.grpc_naming(req.id)),
            Op::Subscribe => {
                let service = state.subscribers[req.id as usize].service;
                request::subscribe(&self.grpc_naming(service))
            }
            // 2.x instances do not beat: their connection keeps them.
            Op::Beat => request::health_check(),
        }
    }

    fn started(&self, req: &Request, at: Nanos) {
        self.log_change(&self.state.borrow(), req, at);
    }

    fn sent(&self, req: &Request, ready: Nanos, started: Nanos, sent: Nanos, stamped: bool) {
        let recorder = &mut self.state.borrow_mut().recorder;
        recorder.sent(req.op, req.intended, ready, sent);
        recorder.client_queue(req.op, started, sent, stamped);
    }

    fn answered(
        &self,
        req: &Request,
        sent: Option<Nanos>,
        done: Nanos,
        result: Result<&Payload, &Failure>,
    ) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let answer = result.map(|p| self.on_grpc_ok(state, req, p));
        self.record(state, req, sent, done, answer);
    }

    fn abandon(&self, req: &Request, failure: &Failure, declared: Nanos) {
        self.on_abandon(req, failure, declared);
    }

    fn pushed(&self, lane: usize, push: &NotifySubscriberRequest, at: Nanos) {
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        state.recorder.current.pushes += 1;
        let Some(info) = &push.service_info else {
            state.recorder.current.push_errors += 1;
            return;
        };
        let list = grpc_list(info);
        let n = self.naming();
        // The client's subscriptions are the subscribers on its lane.
        for i in (lane..state.subscribers.len()).step_by(self.lanes.len()) {
            let sub = state.subscribers[i];
            if !sub.active || n.grouped(sub.service) != list.name {
                continue;
            }
            if self
                .observe(state, i as u32, sub.generation, &list, Some(at))
                .is_err()
            {
                state.recorder.current.push_errors += 1;
            }
        }
    }

    fn acked(&self) {
        self.state.borrow_mut().recorder.current.acks += 1;
    }

    fn reconnected(&self, lane: usize) {
        // The redo of the clients: every registration and subscription the client
        // held, on its new connection.
        let now = self.shared.clock.now();
        let mut state = self.state.borrow_mut();
        let state = &mut *state;
        let lanes = self.lanes.len();
        for local in (lane..state.instances.slots.len()).step_by(lanes) {
            if state.instances.slots[local].life == Life::Registered {
                let redo = Request {
                    op: Op::Reregister,
                    id: local as u32,
                    generation: 0,
                    intended: now,
                };
                self.dispatch(state, redo, now);
            }
        }
        for i in (lane..state.subscribers.len()).step_by(lanes) {
            let sub = state.subscribers[i];
            if sub.active {
                let redo = Request {
                    op: Op::Subscribe,
                    id: i as u32,
                    generation: sub.generation,
                    intended: now,
                };
                self.dispatch(state, redo, now);
            }
        }
    }
}

impl Ctx {
    /// Namespace, group and name of service `s` in a 2.x request.
    fn grpc_naming(&self, s: u32) -> request::Naming {
        let n = self.naming();
        let mut service_name = String::new();
        n.service_name(s, &mut service_name);
        request::Naming {
            namespace: n.namespace.clone(),
            service_name,
            group_name: n.group.clone(),
        }
    }

    /// What a 2.x answer means for the fleet (an `ErrorResponse` never gets here).
    fn on_grpc_ok(&self, state: &mut State, req: &Request, p: &Payload) -> Result<(), Failure> {
        match req.op {
            Op::Register if req.generation == LOAD_BATCH => {
                for &local in &self.batches[req.id as usize].locals {
                    self.set_present(state, local, true);
                }
            }
            Op::Register | Op::Reregister => self.set_present(state, req.id, true),
            Op::Deregister => self.deregistered(state, req.id),
            Op::Query | Op::Beat => {}
            Op::Subscribe => {
                let info = serde_json::from_slice::<SubscribeServiceResponse>(p.json())
                    .ok()
                    .and_then(|r| r.service_info)
                    .ok_or(Failure::new(
                        ErrorClass::Protocol,
                        "a subscribe answer without a service info",
                    ))?;
                self.observe(state, req.id, req.generation, &grpc_list(&info), None)?;
            }
        }
        Ok(())
    }
}

/// A write's 2xx answer that does not say `ok`: a protocol failure quoting it.
fn not_ok(body: &[u8]) -> Failure {
    let body = String::from_utf8_lossy(&body[..body.len().min(120)]);
    Failure::because(
        ErrorClass::Protocol,
        format_args!("answered {:?}, not ok", body.trim()),
    )
}

/// A 2.x service info as a host list (its name grouped, which clients accept
/// either way).
fn grpc_list(info: &GrpcServiceInfo) -> HostList {
    let name = if info.name.contains("@@") {
        info.name.clone()
    } else {
        ServiceName::new(&info.group_name, &info.name).grouped()
    };
    let endpoints = info
        .hosts
        .iter()
        .map(|h| {
            u16::try_from(h.port)
                .ok()
                .and_then(|port| Endpoint::parse(&h.ip, port))
                .unwrap_or(Endpoint(u64::MAX))
        })
        .collect();
    HostList::new(name, endpoints)
}
