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
use registry_proto::http1::{write_request, Method, Response};
use registry_proto::naming::beat::BeatResponse;
use registry_proto::naming::client::{self, InstanceSpec, ListSpec, FORM_CONTENT_TYPE};
use registry_proto::naming::list::ServiceInfo;
use registry_proto::naming::ServiceName;
use tokio::net::UdpSocket;
use tokio::task::{AbortHandle, JoinHandle};

use crate::conn::{self, Exchange, Lane, LaneConfig, Request};
use crate::fleet::{Change, Instances, Life, Naming, SetHash, Subscriber, Watch};
use crate::plan::{Phase, Plan};
use crate::profile::{BeatStyle, Profile};
use crate::recorder::{ErrorClass, Op, Progress, Recorder, Stats};
use crate::schedule::{share, Clock, Nanos, Pacer, MILLI, SECOND};
use crate::subscriber::{self, HostList, Inbox};

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
    /// The server's HTTP address.
    pub target: SocketAddr,
    /// The `Host` header value.
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
    /// Shared state for a run.
    pub fn new(
        profile: Profile,
        clock: Clock,
        target: SocketAddr,
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
            host: target.to_string(),
            target,
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
    std::thread::Builder::new()
        .name(format!("loadgen-w{index}"))
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("building a worker runtime")?;
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, drive(shared, index, tx))
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
    inst: Instances,
    /// Instances whose life is not `Absent`.
    live: u64,
    wheel: crate::wheel::Wheel,
    polls: crate::wheel::Wheel,
    subs: Vec<Subscriber>,
    sub_tasks: Vec<Option<AbortHandle>>,
    rec: Recorder,
    rng: u64,
    /// The last beat reply body that meant "OK, same interval", to skip parsing it.
    beat_ok: Vec<u8>,
    /// Register/deregister requests not yet answered.
    changes_outstanding: u64,
    load_left: u64,
    drain_cursor: usize,
    rr: usize,
    batch_left: u32,
    rr_group: Vec<usize>,
}

struct Ctx {
    shared: Arc<Shared>,
    index: u32,
    st: RefCell<State>,
    lanes: Vec<Rc<Lane>>,
    /// Lane indexes per source-address group.
    groups: Vec<Vec<usize>>,
    group_ips: Vec<IpAddr>,
    scratch: RefCell<Scratch>,
    udp_buf: RefCell<Vec<u8>>,
    ack_buf: RefCell<Vec<u8>>,
    beat_style: BeatStyle,
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
    fn lane_for_instance(&self, st: &mut State) -> usize {
        if st.batch_left == 0 {
            st.rr = (st.rr + 1) % self.lanes.len();
            st.batch_left = self.batch;
        }
        st.batch_left -= 1;
        st.rr
    }

    fn lane_for_group(&self, st: &mut State, g: usize) -> usize {
        let lanes = &self.groups[g];
        st.rr_group[g] = (st.rr_group[g] + 1) % lanes.len();
        lanes[st.rr_group[g]]
    }

    fn dispatch(&self, st: &mut State, req: Request, now: Nanos) {
        let lane = match req.op {
            Op::Subscribe => {
                let g = usize::from(st.subs[req.id as usize].ip_group);
                self.lane_for_group(st, g)
            }
            _ => self.lane_for_instance(st),
        };
        if matches!(req.op, Op::Register | Op::Deregister | Op::Reregister) {
            st.changes_outstanding += 1;
        }
        st.rec.dispatched(req.op, req.intended, now);
        self.lanes[lane].push(req);
    }

    /// Registers local instance `l` at `intended` (the beat schedule starts with it,
    /// as the Java client adds its beat task when it registers).
    fn register(&self, st: &mut State, l: u32, intended: Nanos, now: Nanos, load: bool) {
        let slot = &mut st.inst.slots[l as usize];
        if slot.life == Life::Absent {
            st.live += 1;
        }
        slot.life = Life::Registered;
        if !slot.in_wheel {
            slot.in_wheel = true;
            let due = (intended / MILLI) as u32 + slot.interval_ms;
            st.wheel.insert(l, due);
        }
        let req = Request {
            op: Op::Register,
            id: l,
            generation: u32::from(load),
            intended,
        };
        self.dispatch(st, req, now);
    }

    fn deregister(&self, st: &mut State, l: u32, intended: Nanos, now: Nanos) {
        st.inst.slots[l as usize].life = Life::Leaving;
        let req = Request {
            op: Op::Deregister,
            id: l,
            generation: 0,
            intended,
        };
        self.dispatch(st, req, now);
    }

    fn start_subscriber(self: &Rc<Self>, st: &mut State, i: u32, intended: Nanos, now: Nanos) {
        let w = self.shared.workers;
        let global = i * w + self.index;
        let group = (i as usize) % self.groups.len();
        let ip = self.group_ips[group];
        let socket = match subscriber::bind(ip) {
            Ok(s) => s,
            Err(_) => {
                // Out of file descriptors or ports: counted as a failed poll.
                st.rec.failed(Op::Subscribe, ErrorClass::Connection);
                return;
            }
        };
        let port = socket.local_addr().map(|a| a.port()).unwrap_or(0);
        let idx = i as usize;
        // A replaced subscriber keeps its place on the poll wheel.
        let fresh = !st.subs.get(idx).is_some_and(|s| s.active);
        if st.subs.len() <= idx {
            st.subs.resize(idx + 1, Subscriber::default());
            st.sub_tasks.resize_with(idx + 1, || None);
        }
        let generation = st.subs[idx].generation.wrapping_add(1);
        st.subs[idx] = Subscriber {
            service: global % self.naming().watched.max(1),
            ip_group: group as u8,
            active: true,
            has_view: false,
            port,
            generation,
            view: SetHash::default(),
            seen: 0,
        };
        let task =
            tokio::task::spawn_local(subscriber::receive(self.clone(), socket, i, generation));
        if let Some(old) = st.sub_tasks[idx].replace(task.abort_handle()) {
            old.abort();
        }
        if fresh {
            let poll_ms = self.shared.profile.subscribers.poll_interval.0.as_millis() as u32;
            st.polls.insert(i, (intended / MILLI) as u32 + poll_ms);
        }
        let req = Request {
            op: Op::Subscribe,
            id: i,
            generation,
            intended,
        };
        self.dispatch(st, req, now);
    }

    fn encode_instance(&self, req: &Request, out: &mut Vec<u8>) {
        let n = self.naming();
        let mut scratch = self.scratch.borrow_mut();
        let Scratch {
            name,
            ip,
            path,
            body,
        } = &mut *scratch;
        let g = {
            let st = self.st.borrow();
            st.inst.global(req.id)
        };
        n.service_name(n.service_of(g), name);
        ip.clear();
        use std::fmt::Write as _;
        let _ = write!(ip, "{}", n.instance_ip(g));
        let spec = InstanceSpec {
            namespace_id: &n.namespace,
            cluster: &n.cluster,
            ..InstanceSpec::new(ServiceName::new(&n.group, name), ip, n.port)
        };
        path.clear();
        match req.op {
            Op::Register | Op::Reregister => {
                client::register(path, &spec);
                write_request(out, Method::Post, path, &self.shared.host, None);
            }
            Op::Deregister => {
                client::deregister(path, &spec);
                write_request(out, Method::Delete, path, &self.shared.host, None);
            }
            _ => match self.beat_style {
                BeatStyle::Light => {
                    client::beat_light(path, &spec);
                    write_request(out, Method::Put, path, &self.shared.host, None);
                }
                BeatStyle::Full => {
                    body.clear();
                    client::beat_full(path, &spec, Some(body));
                    write_request(
                        out,
                        Method::Put,
                        path,
                        &self.shared.host,
                        Some((FORM_CONTENT_TYPE, body.as_bytes())),
                    );
                }
            },
        }
    }

    fn encode_list(&self, req: &Request, out: &mut Vec<u8>) {
        let n = self.naming();
        let mut scratch = self.scratch.borrow_mut();
        let Scratch { name, ip, path, .. } = &mut *scratch;
        let (service, udp_port, client_ip) = if req.op == Op::Query {
            (req.id, 0, None)
        } else {
            let st = self.st.borrow();
            let sub = st.subs[req.id as usize];
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
        client::list(
            path,
            &ListSpec {
                namespace_id: &n.namespace,
                service: ServiceName::new(&n.group, name),
                clusters: "",
                healthy_only: false,
                udp_port,
                client_ip: client_ip.map(|_| ip.as_str()),
            },
        );
        write_request(out, Method::Get, path, &self.shared.host, None);
    }

    /// Applies a register/deregister outcome to the instance and the expected set.
    fn set_present(&self, st: &mut State, l: u32, present: bool) {
        if st.inst.set_present(l, present) {
            let g = st.inst.global(l);
            let n = self.naming();
            let s = n.service_of(g);
            if n.is_watched(s) {
                let e = n.endpoint(g);
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

    fn change_done(st: &mut State, req: &Request) {
        st.changes_outstanding = st.changes_outstanding.saturating_sub(1);
        if req.op == Op::Register && req.generation == 1 {
            st.load_left = st.load_left.saturating_sub(1);
        }
    }

    /// A change failed: the instance's state on the server is unknown. A failed
    /// deregistration keeps the instance (it beats again, and a drain retries it);
    /// a failed registration is left to the beats (a 20404 re-registers it).
    fn change_failed(&self, st: &mut State, req: &Request, now: Nanos) {
        if req.op == Op::Deregister {
            let slot = &mut st.inst.slots[req.id as usize];
            if slot.life == Life::Leaving {
                slot.life = Life::Registered;
                if !slot.in_wheel {
                    slot.in_wheel = true;
                    let due = (now / MILLI) as u32 + slot.interval_ms;
                    st.wheel.insert(req.id, due);
                }
            }
        }
    }

    fn on_ok(
        &self,
        st: &mut State,
        req: &Request,
        resp: &Response<'_>,
        done: Nanos,
    ) -> Result<(), ErrorClass> {
        match req.op {
            Op::Register | Op::Reregister => {
                if resp.body.trim_ascii() != b"ok" {
                    return Err(ErrorClass::Protocol);
                }
                self.set_present(st, req.id, true);
            }
            Op::Deregister => {
                if resp.body.trim_ascii() != b"ok" {
                    return Err(ErrorClass::Protocol);
                }
                self.set_present(st, req.id, false);
                let slot = &mut st.inst.slots[req.id as usize];
                if slot.life == Life::Leaving {
                    slot.life = Life::Absent;
                    st.live = st.live.saturating_sub(1);
                    st.inst.free.push(req.id);
                }
            }
            Op::Beat => self.on_beat(st, req, resp, done)?,
            Op::Query => {
                if ServiceInfo::parse(&resp.body).is_err() {
                    return Err(ErrorClass::Protocol);
                }
            }
            Op::Subscribe => {
                let info = ServiceInfo::parse(&resp.body).map_err(|_| ErrorClass::Protocol)?;
                let list = HostList::from_info(&info);
                self.observe(st, req.id, req.generation, &list, None)?;
            }
        }
        Ok(())
    }

    fn on_beat(
        &self,
        st: &mut State,
        req: &Request,
        resp: &Response<'_>,
        done: Nanos,
    ) -> Result<(), ErrorClass> {
        let l = req.id;
        if !st.beat_ok.is_empty() && *resp.body == st.beat_ok[..] {
            self.set_present(st, l, true);
            return Ok(());
        }
        let beat = BeatResponse::parse(&resp.body).map_err(|_| ErrorClass::Protocol)?;
        if beat.is_not_found() {
            self.set_present(st, l, false);
            // Re-register, as the Java client's BeatTask does; only if the instance
            // is still meant to exist (a beat racing its deregistration gets 20404 too).
            if st.inst.slots[l as usize].life == Life::Registered {
                let r = Request {
                    op: Op::Reregister,
                    id: l,
                    generation: 0,
                    intended: done,
                };
                self.dispatch(st, r, done);
            }
            return Ok(());
        }
        if beat.code != registry_proto::naming::beat::CODE_OK {
            return Err(ErrorClass::Protocol);
        }
        self.set_present(st, l, true);
        let interval = beat.client_beat_interval.clamp(100, 3_600_000) as u32;
        let slot = &mut st.inst.slots[l as usize];
        if slot.interval_ms == interval {
            st.beat_ok = resp.body.to_vec();
        } else {
            // Takes effect from the next scheduling of this instance.
            slot.interval_ms = interval;
        }
        Ok(())
    }

    /// A subscriber received a list (a push when `received` is set, else a poll).
    fn observe(
        &self,
        st: &mut State,
        i: u32,
        generation: u32,
        list: &HostList,
        received: Option<Nanos>,
    ) -> Result<(), ErrorClass> {
        let Some(sub) = st.subs.get(i as usize).copied() else {
            return Ok(());
        };
        if !sub.active || sub.generation != generation {
            return Ok(()); // a replaced subscriber's late answer
        }
        let n = self.naming();
        let mut want = String::new();
        n.service_name(sub.service, &mut want);
        if list.name != ServiceName::new(&n.group, &want).grouped() {
            return Err(ErrorClass::Protocol);
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
            st.rec.push_latency(oldest, at);
        }
        let s = &mut st.subs[i as usize];
        s.seen = seen.upto;
        s.view = list.hash;
        s.has_view = true;
        Ok(())
    }
}

impl Exchange for Ctx {
    fn encode(&self, req: &Request, out: &mut Vec<u8>) {
        match req.op {
            Op::Query | Op::Subscribe => self.encode_list(req, out),
            _ => self.encode_instance(req, out),
        }
    }

    fn sent(&self, req: &Request, sent: Nanos) {
        let mut st = self.st.borrow_mut();
        st.rec.sent(req.intended, sent);
        if matches!(req.op, Op::Register | Op::Reregister | Op::Deregister) {
            let n = self.naming();
            let g = st.inst.global(req.id);
            let s = n.service_of(g);
            if n.is_watched(s) && !self.shared.watch.is_empty() {
                let change = Change {
                    sent,
                    endpoint: n.endpoint(g),
                    add: req.op != Op::Deregister,
                };
                self.shared.watch.with(s, |log| log.sent(change));
            }
        }
    }

    fn complete(
        &self,
        req: &Request,
        sent: Nanos,
        done: Nanos,
        result: Result<&Response<'_>, ErrorClass>,
    ) {
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let is_change = matches!(req.op, Op::Register | Op::Deregister | Op::Reregister);
        match result {
            Err(class) => {
                st.rec.failed(req.op, class);
                if is_change {
                    self.change_failed(st, req, done);
                }
            }
            Ok(resp) => {
                let outcome = if (200..300).contains(&resp.status) {
                    self.on_ok(st, req, resp, done)
                } else {
                    Err(ErrorClass::of_status(resp.status))
                };
                if outcome.is_err() && is_change {
                    self.change_failed(st, req, done);
                }
                st.rec.completed(req.op, req.intended, sent, done, outcome);
            }
        }
        if is_change {
            Ctx::change_done(st, req);
        }
    }

    fn abandon(&self, req: &Request, class: ErrorClass) {
        let now = self.shared.clock.now();
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        st.rec.failed(req.op, class);
        if matches!(req.op, Op::Register | Op::Deregister | Op::Reregister) {
            self.change_failed(st, req, now);
            Ctx::change_done(st, req);
        }
    }
}

impl Inbox for Ctx {
    fn receive(&self, index: u32, generation: u32, socket: &UdpSocket) -> io::Result<bool> {
        let mut buf = self.udp_buf.borrow_mut();
        let (n, from) = socket.try_recv_from(&mut buf)?;
        let at = self.shared.clock.now();
        let mut st = self.st.borrow_mut();
        let st = &mut *st;
        let current = st
            .subs
            .get(index as usize)
            .is_some_and(|s| s.active && s.generation == generation);
        if !current {
            return Ok(false);
        }
        st.rec.current.pushes += 1;
        match subscriber::read_push(&buf[..n]) {
            Ok(r) => {
                let mut ack = self.ack_buf.borrow_mut();
                ack.clear();
                subscriber::encode_ack(&r, &mut ack);
                if socket.try_send_to(&ack, from).is_ok() {
                    st.rec.current.acks += 1;
                }
                if let Some(list) = &r.list {
                    if self.observe(st, index, generation, list, Some(at)).is_err() {
                        st.rec.current.push_errors += 1;
                    }
                }
            }
            Err(_) => st.rec.current.push_errors += 1,
        }
        Ok(true)
    }
}

/// The pacers of the current phase.
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

fn build(shared: &Arc<Shared>, index: u32) -> anyhow::Result<Rc<Ctx>> {
    let p = &shared.profile;
    let w = shared.workers;
    let per_worker = (p.connections.count as usize).div_ceil(w as usize).max(1);
    let ips: Vec<Option<IpAddr>> = if shared.source_ips.is_empty() {
        vec![None]
    } else {
        shared.source_ips.iter().copied().map(Some).collect()
    };
    // Lane k of worker w uses source address (w * per_worker + k) mod |ips|. Its
    // subscribers use the addresses its lanes use, so their polls and the pushes
    // they cause share an address.
    let lanes_n = per_worker;
    let mut lanes = Vec::with_capacity(lanes_n);
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_ips: Vec<IpAddr> = Vec::new();
    for k in 0..lanes_n {
        let ip = ips[(index as usize * per_worker + k) % ips.len()];
        lanes.push(Rc::new(Lane::new(ip)));
        let addr = ip.unwrap_or(shared.subscriber_ip);
        match group_ips.iter().position(|a| *a == addr) {
            Some(g) => groups[g].push(k),
            None => {
                group_ips.push(addr);
                groups.push(vec![k]);
            }
        }
    }
    let interval = p.fleet.beat_interval.0.as_millis() as u32;
    let inst = Instances::new(p.fleet.instances, index, w, interval);
    let mut wheel = crate::wheel::Wheel::new(8192, 0);
    wheel.reserve_ids(inst.slots.len());
    let subs_n = share(u64::from(p.fleet.subscribers), index, w) as usize;
    let mut polls = crate::wheel::Wheel::new(16384, 0);
    polls.reserve_ids(subs_n);
    let st = State {
        load_left: inst.slots.len() as u64,
        inst,
        live: 0,
        wheel,
        polls,
        subs: Vec::with_capacity(subs_n),
        sub_tasks: Vec::with_capacity(subs_n),
        rec: Recorder::new(),
        rng: 0x9e37_79b9_7f4a_7c15 ^ (u64::from(index) + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9),
        beat_ok: Vec::new(),
        changes_outstanding: 0,
        drain_cursor: 0,
        rr: 0,
        batch_left: 0,
        rr_group: vec![0; groups.len()],
    };
    Ok(Rc::new(Ctx {
        shared: shared.clone(),
        index,
        st: RefCell::new(st),
        lanes,
        groups,
        group_ips,
        scratch: RefCell::new(Scratch::default()),
        udp_buf: RefCell::new(vec![0; 64 * 1024]),
        ack_buf: RefCell::new(Vec::with_capacity(128)),
        beat_style: p.fleet.beat,
        batch: p.connections.pipeline.max(1),
    }))
}

/// The worker's driver: runs until the runner sets [`Phase::Stop`].
pub async fn drive(
    shared: Arc<Shared>,
    index: u32,
    tx: Sender<Interval>,
) -> anyhow::Result<Outcome> {
    let ctx = build(&shared, index)?;
    let clock = shared.clock;
    let p = &shared.profile;
    let cfg = LaneConfig {
        target: shared.target,
        depth: p.connections.pipeline as usize,
        timeout: p.connections.timeout.0,
    };
    let lane_tasks: Vec<JoinHandle<()>> = ctx
        .lanes
        .iter()
        .map(|lane| tokio::task::spawn_local(conn::drive(ctx.clone(), lane.clone(), cfg, clock)))
        .collect();
    let progress = &shared.progress[index as usize];
    let w = shared.workers;
    let poll_ms = p.subscribers.poll_interval.0.as_millis() as u32;
    let subs_n = share(u64::from(p.fleet.subscribers), index, w) as u32;

    let mut phase = Phase::Init;
    let mut pacers = Pacers::default();
    let mut fired: Vec<(u32, u32)> = Vec::new();
    let mut second = (clock.now() / SECOND) as u32;
    let mut next_check: Nanos = 0;
    let mut next_load: u32 = 0;
    let mut joined: u32 = 0;
    let sleep = tokio::time::sleep(Duration::ZERO);
    tokio::pin!(sleep);
    loop {
        let now = clock.now();
        let (ph, start) = shared.phase();
        if ph != phase {
            phase = ph;
            pacers = Pacers::default();
            let rates = shared.plan.rates(ph);
            let pace = |rate: f64, limit: Option<u64>| {
                Some(Pacer::for_worker(start, rate, limit, index, w))
            };
            match ph {
                Phase::Load => {
                    pacers.load = pace(rates.register, Some(u64::from(p.fleet.instances)));
                }
                Phase::Steady => {
                    pacers.register = pace(rates.register, None);
                    pacers.deregister = pace(rates.deregister, None);
                    pacers.query = pace(rates.query, None);
                    pacers.churn = pace(rates.subscriber_churn, None);
                    pacers.join = pace(shared.plan.join_rate, Some(shared.plan.subscribers));
                }
                Phase::Drain => {
                    pacers.drain = pace(rates.deregister, None);
                    ctx.st.borrow_mut().drain_cursor = 0;
                }
                _ => {}
            }
            progress
                .phase_seen
                .store(u64::from(ph.as_u8()), Ordering::Relaxed);
        }
        if phase == Phase::Stop {
            break;
        }
        {
            let mut guard = ctx.st.borrow_mut();
            let st = &mut *guard;
            let tick = (now / MILLI) as u32;
            // Beats.
            fired.clear();
            st.wheel.advance(tick, &mut fired);
            for &(l, due) in &fired {
                let slot = &mut st.inst.slots[l as usize];
                if slot.life != Life::Registered {
                    slot.in_wheel = false;
                    continue;
                }
                let next = due + slot.interval_ms;
                st.wheel.insert(l, next);
                let req = Request {
                    op: Op::Beat,
                    id: l,
                    generation: 0,
                    intended: u64::from(due) * MILLI,
                };
                ctx.dispatch(st, req, now);
            }
            // Subscriber re-polls.
            fired.clear();
            st.polls.advance(tick, &mut fired);
            for &(i, due) in &fired {
                let sub = st.subs[i as usize];
                if !sub.active {
                    continue;
                }
                st.polls.insert(i, due + poll_ms);
                let req = Request {
                    op: Op::Subscribe,
                    id: i,
                    generation: sub.generation,
                    intended: u64::from(due) * MILLI,
                };
                ctx.dispatch(st, req, now);
            }
            // Scheduled operations of the phase.
            if let Some(pc) = pacers.load.as_mut() {
                while let Some(t) = pc.next_due(now) {
                    if (next_load as usize) < st.inst.slots.len() {
                        ctx.register(st, next_load, t, now, true);
                        next_load += 1;
                    }
                }
            }
            if let Some(pc) = pacers.join.as_mut() {
                while joined < subs_n {
                    let Some(t) = pc.next_due(now) else { break };
                    ctx.start_subscriber(st, joined, t, now);
                    joined += 1;
                }
            }
            if let Some(pc) = pacers.register.as_mut() {
                while let Some(t) = pc.next_due(now) {
                    let interval = p.fleet.beat_interval.0.as_millis() as u32;
                    if let Some(l) = st.inst.take_free(interval) {
                        ctx.register(st, l, t, now, false);
                    }
                }
            }
            if let Some(pc) = pacers.deregister.as_mut() {
                while let Some(t) = pc.next_due(now) {
                    let n = st.inst.slots.len() as u64;
                    for _ in 0..32 {
                        let l = st.below(n) as u32;
                        if st
                            .inst
                            .slots
                            .get(l as usize)
                            .is_some_and(|s| s.life == Life::Registered)
                        {
                            ctx.deregister(st, l, t, now);
                            break;
                        }
                    }
                }
            }
            if let Some(pc) = pacers.query.as_mut() {
                while let Some(t) = pc.next_due(now) {
                    let s = st.below(u64::from(ctx.naming().services)) as u32;
                    let req = Request {
                        op: Op::Query,
                        id: s,
                        generation: 0,
                        intended: t,
                    };
                    ctx.dispatch(st, req, now);
                }
            }
            if let Some(pc) = pacers.churn.as_mut() {
                while let Some(t) = pc.next_due(now) {
                    if joined > 0 {
                        let i = st.below(u64::from(joined)) as u32;
                        ctx.start_subscriber(st, i, t, now);
                    }
                }
            }
            if let Some(pc) = pacers.drain.as_mut() {
                while pc.peek().is_some_and(|t| t <= now) {
                    let n = st.inst.slots.len();
                    let mut found = None;
                    while st.drain_cursor < n {
                        let l = st.drain_cursor;
                        st.drain_cursor += 1;
                        if st.inst.slots[l].life == Life::Registered {
                            found = Some(l as u32);
                            break;
                        }
                    }
                    match found {
                        Some(l) => {
                            let t = pc.next_due(now).unwrap_or(now);
                            ctx.deregister(st, l, t, now);
                        }
                        None => {
                            // A full pass: start over for any whose deregistration
                            // failed (they are Registered again).
                            if st.live > 0 && st.changes_outstanding == 0 {
                                st.drain_cursor = 0;
                            }
                            break;
                        }
                    }
                }
            }
        }
        if now >= next_check {
            next_check = now + 100 * MILLI;
            for lane in &ctx.lanes {
                lane.check_timeout(now, cfg.timeout);
            }
            let st = ctx.st.borrow();
            progress.publish(&st.rec);
            progress.outstanding.store(
                ctx.lanes.iter().map(|l| l.outstanding() as u64).sum(),
                Ordering::Relaxed,
            );
            progress.present.store(st.inst.present, Ordering::Relaxed);
            progress.load_left.store(st.load_left, Ordering::Relaxed);
            progress.drain_left.store(st.live, Ordering::Relaxed);
            progress
                .changes_outstanding
                .store(st.changes_outstanding, Ordering::Relaxed);
            if matches!(phase, Phase::Settle | Phase::Final) {
                let expected = shared.watch.expected();
                let bad = st
                    .subs
                    .iter()
                    .filter(|s| s.active)
                    .filter(|s| {
                        !s.has_view
                            || expected
                                .get(s.service as usize)
                                .is_none_or(|e| *e != s.view)
                    })
                    .count();
                progress.unconverged.store(bad as u64, Ordering::Relaxed);
            }
        }
        let s = (now / SECOND) as u32;
        if s > second {
            let stats = ctx.st.borrow_mut().rec.roll();
            let _ = tx.send(Interval {
                worker: index,
                second,
                stats,
            });
            second = s;
            if index == 0 {
                // Changes older than a minute that a subscriber has still not seen
                // will not be: it is not converging, which the end of the run reports.
                shared.watch.trim(now.saturating_sub(60 * SECOND));
            }
        }
        let next = (now / MILLI + 1) * MILLI;
        sleep.as_mut().reset(clock.instant(next));
        sleep.as_mut().await;
    }

    // Stop: let the connections finish what is queued (bounded), then close.
    for lane in &ctx.lanes {
        lane.close();
    }
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        for t in lane_tasks {
            let _ = t.await;
        }
    })
    .await;
    let (instance_slots, subscriber_slots) = {
        let mut st = ctx.st.borrow_mut();
        for t in st.sub_tasks.iter_mut().filter_map(Option::take) {
            t.abort();
        }
        for s in st.subs.iter_mut() {
            s.active = false;
        }
        (st.inst.slots.len(), st.subs.len())
    };
    let stats = {
        let mut st = ctx.st.borrow_mut();
        let last = st.rec.roll();
        let _ = tx.send(Interval {
            worker: index,
            second,
            stats: last,
        });
        std::mem::take(&mut st.rec).finish()
    };
    Ok(Outcome {
        stats,
        instance_slots,
        subscriber_slots,
    })
}
