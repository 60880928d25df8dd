//! The single-writer notifier: the one task that owns push state.
//!
//! Everyone else only sends it [`ChangeEvent`]s. It owns:
//! - the [`Coalescer`]: changes to one service within the push window
//!   become one push of the latest state;
//! - the fan-out: for each due service, the packet is encoded once per
//!   subscriber view and sent to every subscriber of that view in batches
//!   with `sendmmsg`;
//! - the fan-out to gRPC connections: per due service and view, one
//!   `NotifySubscriberRequest` payload (its body shared, not copied) queued
//!   on each subscribed connection's stream;
//! - the ack table of both protocols, keyed by (subscriber, sequence),
//!   bounded; UDP acks are read in batches with `recvmmsg`, gRPC acks arrive
//!   from the stream tasks through a bounded queue;
//! - the timeout table: one entry per pending ack, dropped when the ack
//!   comes, so it never holds more than the ack table;
//! - the resend: one resend after the ack timeout, then a counted failure
//!   (Nacos's two sends in total).
//!
//! Acks are read before new change events: under a flood of events, acks
//! waiting in the socket or queue would otherwise time out and be resent
//! needlessly.
//!
//! The sequence (UDP `lastRefTime`, gRPC `requestId`) is a counter, not a
//! clock: it stays below 2^53 so a JavaScript client echoes it back exactly.
//!
//! # What it needs
//! [`Pushes`] holds exactly what the notifier touches: the store, the clock,
//! the subscriptions, the list cache, the change feed, the gRPC connections
//! (their push queues and acks), the counters and its settings. It does not
//! see the server state ([`crate::state::App`], which makes it), nor the
//! doors: the 2.x `ServiceInfo` it pushes is [`crate::service_info`]'s.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use registry_core::{
    ChangeEvent, Coalescer, Due, Millis, ServiceKey, ServiceSnapshot, Store, Subscriber,
    SubscriberView, Subscribers, Subscription,
};
use registry_proto::grpc::message::{NotifySubscriberRequest, RequestHead};
use registry_proto::grpc::Payload;
use registry_proto::naming::ServiceName;
use registry_proto::udp::ack::{parse_ack, AckKind};
use registry_proto::udp::push::encode_push;
use registry_proto::udp::MAX_DATAGRAM;
use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::convert::{encode_list, ListView};
use crate::events::ChangeFeed;
use crate::hub::Grpc;
use crate::list_cache::{CachedList, ListCache};
use crate::metrics::Metrics;
use crate::pusher::{send_batch, RecvBatch, BATCH};

/// `cacheMillis` for a push subscriber (Nacos `defaultPushCacheMillis`): in
/// every pushed list, and in a list answer to a client that subscribed.
pub const PUSH_CACHE_MILLIS: u64 = 10_000;

/// What the notifier touches, and nothing else.
pub struct Pushes {
    /// The registry whose snapshots are pushed.
    pub store: Arc<Store>,
    /// Time.
    pub clock: Clock,
    /// Who is subscribed to what.
    pub subscribers: Arc<Subscribers>,
    /// Encoded lists, shared with the list answers.
    pub lists: Arc<ListCache>,
    /// The change events it alone receives.
    pub changes: Arc<ChangeFeed>,
    /// The 2.x connections (their push queues) and their ack queue.
    pub grpc: Arc<Grpc>,
    /// Its counters.
    pub metrics: Arc<Metrics>,
    /// `--push-window-ms`.
    pub window_ms: u64,
    /// `--push-ack-timeout-ms`.
    pub ack_timeout: Duration,
    /// `--max-pending-acks`.
    pub max_pending: usize,
}

/// What was sent, kept for the one resend.
#[derive(Clone)]
enum Packet {
    Udp(Arc<[u8]>),
    Grpc(Arc<Payload>),
}

struct Pending {
    packet: Packet,
    sent_at: Instant,
    deadline: Instant,
    resent: bool,
}

/// The notifier's state. Not shared: owned by its task.
struct Notifier {
    pushes: Pushes,
    udp: UdpSocket,
    coalescer: Coalescer,
    acks: HashMap<(Subscriber, u64), Pending, foldhash::fast::FixedState>,
    /// (deadline, key) of every pending ack, in deadline order; an ack
    /// removes its entry, so this holds exactly the pending acks.
    timeouts: BTreeSet<(Instant, Subscriber, u64)>,
    next_ref: u64,
    ack_timeout: Duration,
    max_pending: usize,
    inbox: RecvBatch,
}

/// Runs until `cancel` fires, then sends what is pending and returns.
pub async fn run(pushes: Pushes, udp: UdpSocket, cancel: CancellationToken) {
    let Some(mut events) = pushes.changes.take_receiver() else {
        tracing::error!("notifier started twice");
        return;
    };
    let Some(mut grpc_acks) = pushes.grpc.take_acks() else {
        tracing::error!("notifier started twice");
        return;
    };
    let mut n = Notifier {
        coalescer: Coalescer::new(pushes.window_ms),
        acks: HashMap::default(),
        timeouts: BTreeSet::new(),
        next_ref: 1,
        ack_timeout: pushes.ack_timeout,
        max_pending: pushes.max_pending,
        inbox: RecvBatch::default(),
        udp,
        pushes,
    };
    let mut batch: Vec<ChangeEvent> = Vec::with_capacity(1024);
    let mut acked: Vec<(u64, u64)> = Vec::with_capacity(1024);
    loop {
        let wake = n.next_wake();
        let mut received = false;
        tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                // Last batch: everything pending is due now.
                n.push_due(Millis(u64::MAX)).await;
                return;
            }
            // Acks before events (see the module header).
            ready = n.udp.readable() => {
                if ready.is_ok() {
                    n.receive_acks();
                }
            }
            got = grpc_acks.recv_many(&mut acked, 1024) => {
                if got > 0 {
                    n.receive_grpc_acks(&mut acked);
                }
            }
            got = events.recv_many(&mut batch, 1024) => {
                if got == 0 {
                    return;
                }
                let now = n.pushes.clock.now();
                for e in batch.drain(..) {
                    n.coalescer.offer(e, now);
                }
                received = true;
            }
            _ = n.pushes.changes.overflowed() => {
                let now = n.pushes.clock.now();
                for service in n.pushes.changes.take_overflow() {
                    n.coalescer.offer(ChangeEvent { service, revision: 0 }, now);
                }
            }
            _ = sleep_until(wake) => {}
        }
        let now = n.pushes.clock.now();
        n.push_due(now).await;
        n.resend_expired().await;
        // Both tables hold exactly the pending acks (see `settle`).
        debug_assert_eq!(n.timeouts.len(), n.acks.len());
        n.pushes.metrics.push.pending.set(n.timeouts.len() as u64);
        if received {
            // Let the writers that are ready run first, so that their
            // events arrive as one batch rather than one wake apiece: the
            // runtime runs a task woken by the running one next, so every
            // register used to wake this task and turn this loop once
            // (a timer, three clock reads, six futures set up and dropped).
            // The delay is one scheduler turn, inside the push window.
            tokio::task::yield_now().await;
        }
    }
}

async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

impl Notifier {
    fn next_wake(&self) -> Option<Instant> {
        let due = self
            .coalescer
            .next_due()
            .map(|t| self.pushes.clock.instant_at(t));
        let ack = self.timeouts.first().map(|(t, _, _)| *t);
        match (due, ack) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn next_ref(&mut self) -> u64 {
        let r = self.next_ref;
        // Wraps long before 2^53: at a million pushes a second, in 285 years.
        self.next_ref = (self.next_ref + 1) & ((1 << 53) - 1);
        r
    }

    async fn push_due(&mut self, now: Millis) {
        let mut due: Vec<Due> = Vec::new();
        self.coalescer.drain_due(now, &mut due);
        if due.is_empty() {
            return;
        }
        let mut targets: Vec<Subscription> = Vec::new();
        let wall_now = self.pushes.clock.now();
        for d in due {
            targets.clear();
            self.pushes
                .subscribers
                .targets(&d.service, wall_now, &mut targets);
            if targets.is_empty() {
                continue;
            }
            let snapshot = self.pushes.store.snapshot(d.service.as_ref());
            let mut start = 0;
            while start < targets.len() {
                let view = targets[start].view.clone();
                let end = start
                    + targets[start..]
                        .iter()
                        .take_while(|t| t.view == view)
                        .count();
                let (mut addrs, mut conns) = (Vec::new(), Vec::new());
                for t in &targets[start..end] {
                    match t.subscriber {
                        Subscriber::Udp(a) => addrs.push(a),
                        Subscriber::Connection(c) => conns.push(c),
                    }
                }
                if !addrs.is_empty() {
                    self.push_view(&d.service, snapshot.as_deref(), &view, &addrs)
                        .await;
                }
                if !conns.is_empty() {
                    self.push_connections(&d.service, snapshot.as_deref(), &view, &conns);
                }
                start = end;
            }
            let delay = wall_now.0.saturating_sub(d.first_change.0);
            self.pushes.metrics.push.change_to_send.record(delay * 1000);
        }
    }

    async fn push_view(
        &mut self,
        service: &ServiceKey,
        snapshot: Option<&ServiceSnapshot>,
        view: &SubscriberView,
        addrs: &[SocketAddr],
    ) {
        let metrics = self.pushes.metrics.clone();
        let metrics = &metrics.push;
        let body = list_body(&self.pushes.lists, service, snapshot, view);
        let seq = self.next_ref();
        let mut packet = Vec::with_capacity(body.body.len() / 2 + 64);
        encode_push(&body.body, seq, &mut packet);
        if packet.len() > MAX_DATAGRAM {
            // Too large even gzipped: the client still polls.
            metrics.skipped.add(addrs.len() as u64);
            return;
        }
        let packet: Arc<[u8]> = packet.into();
        let sent_at = Instant::now();
        let mut to: Vec<SocketAddr> = Vec::with_capacity(addrs.len());
        for a in addrs {
            if self.expect_ack(
                Subscriber::Udp(*a),
                seq,
                Packet::Udp(packet.clone()),
                sent_at,
            ) {
                to.push(*a);
            }
        }
        self.send_all(&packet, &to).await;
    }

    /// Records a pending ack; false (counted) when the table is full.
    fn expect_ack(&mut self, to: Subscriber, seq: u64, packet: Packet, sent_at: Instant) -> bool {
        if self.acks.len() >= self.max_pending {
            self.pushes.metrics.push.skipped.inc();
            return false;
        }
        let deadline = sent_at + self.ack_timeout;
        self.acks.insert(
            (to, seq),
            Pending {
                packet,
                sent_at,
                deadline,
                resent: false,
            },
        );
        self.timeouts.insert((deadline, to, seq));
        true
    }

    /// Takes a pending ack off both tables; `None` if it was not pending.
    fn settle(&mut self, from: Subscriber, seq: u64) -> Option<Pending> {
        let p = self.acks.remove(&(from, seq))?;
        self.timeouts.remove(&(p.deadline, from, seq));
        Some(p)
    }

    /// Queues one `NotifySubscriberRequest`, encoded once, on every connection.
    fn push_connections(
        &mut self,
        service: &ServiceKey,
        snapshot: Option<&ServiceSnapshot>,
        view: &SubscriberView,
        conns: &[u64],
    ) {
        let seq = self.next_ref();
        let info =
            crate::service_info::service_info(service, snapshot, &view.clusters, view.healthy_only);
        let payload = Arc::new(Payload::of(&NotifySubscriberRequest {
            head: RequestHead {
                request_id: Some(seq.to_string()),
                ..RequestHead::default()
            },
            namespace: Some(service.namespace().to_owned()),
            service_name: Some(service.service_name().to_owned()),
            group_name: Some(service.group().to_owned()),
            service_info: Some(info),
        }));
        let sent_at = Instant::now();
        for c in conns {
            if self.expect_ack(
                Subscriber::Connection(*c),
                seq,
                Packet::Grpc(payload.clone()),
                sent_at,
            ) {
                self.send_grpc(*c, &payload);
            }
        }
    }

    /// Queues `payload` on connection `number`'s stream. A closed connection or a
    /// full queue loses it; the pending ack then brings the one resend.
    fn send_grpc(&self, number: u64, payload: &Arc<Payload>) {
        let Some(conn) = self.pushes.grpc.hub.by_number(number) else {
            return;
        };
        if conn.outbound.try_send(payload.clone()).is_ok() {
            self.pushes.metrics.push.sent.inc();
        }
    }

    fn receive_grpc_acks(&mut self, acked: &mut Vec<(u64, u64)>) {
        let now = Instant::now();
        for (number, seq) in acked.drain(..) {
            match self.settle(Subscriber::Connection(number), seq) {
                Some(p) => {
                    self.pushes.metrics.push.acked.inc();
                    self.pushes
                        .metrics
                        .push
                        .round_trip
                        .record_duration(now.duration_since(p.sent_at));
                }
                None => self.pushes.metrics.push.bad_acks.inc(),
            }
        }
    }

    /// Sends `packet` to every address, `BATCH` datagrams per syscall.
    async fn send_all(&self, packet: &[u8], addrs: &[SocketAddr]) {
        let metrics = &self.pushes.metrics.push;
        let mut rest = addrs;
        while !rest.is_empty() {
            let n = rest.len().min(BATCH);
            let sent = self
                .udp
                .async_io(Interest::WRITABLE, || {
                    send_batch(&self.udp, packet, &rest[..n])
                })
                .await;
            match sent {
                Ok(k) if k > 0 => {
                    metrics.sent.add(k as u64);
                    metrics.batch_size.record(k as u64);
                    rest = &rest[k..];
                }
                Ok(_) | Err(_) => {
                    // An unreachable or refused address fails the whole call;
                    // skip it so the others still get their push.
                    rest = &rest[1..];
                }
            }
        }
    }

    fn receive_acks(&mut self) {
        // Parsed acks of one batch: (sender, sequence), `None` for a bad one.
        let mut parsed: Vec<Option<(SocketAddr, u64)>> = Vec::with_capacity(BATCH);
        loop {
            let inbox = &mut self.inbox;
            match self
                .udp
                .try_io(Interest::READABLE, || inbox.recv(&self.udp))
            {
                Ok(n) if n > 0 => {}
                _ => return,
            }
            let now = Instant::now();
            parsed.clear();
            parsed.extend(
                self.inbox
                    .datagrams()
                    .map(|(from, data)| match data.map(parse_ack) {
                        Some(Ok(ack)) if ack.kind == AckKind::PushAck => {
                            Some((from, ack.last_ref_time))
                        }
                        _ => None,
                    }),
            );
            for ack in parsed.drain(..) {
                let settled = ack.and_then(|(from, seq)| self.settle(Subscriber::Udp(from), seq));
                let metrics = &self.pushes.metrics.push;
                match settled {
                    Some(p) => {
                        metrics.acked.inc();
                        metrics
                            .round_trip
                            .record_duration(now.duration_since(p.sent_at));
                    }
                    // Malformed, unknown, late after the failure, or a duplicate.
                    None => metrics.bad_acks.inc(),
                }
            }
        }
    }

    async fn resend_expired(&mut self) {
        let now = Instant::now();
        let mut resend: Vec<(Subscriber, Packet)> = Vec::new();
        while let Some((deadline, to, seq)) = self.timeouts.first().copied() {
            if deadline > now {
                break;
            }
            self.timeouts.pop_first();
            let Some(p) = self.acks.get_mut(&(to, seq)) else {
                continue;
            };
            if p.resent {
                self.acks.remove(&(to, seq));
                self.pushes.metrics.push.failed.inc();
                tracing::debug!(?to, seq, "push failed after one resend");
            } else {
                p.resent = true;
                p.sent_at = now;
                p.deadline = now + self.ack_timeout;
                self.timeouts.insert((p.deadline, to, seq));
                resend.push((to, p.packet.clone()));
            }
        }
        for (to, packet) in resend {
            self.pushes.metrics.push.retried.inc();
            match (to, packet) {
                (Subscriber::Udp(addr), Packet::Udp(p)) => self.send_all(&p, &[addr]).await,
                (Subscriber::Connection(c), Packet::Grpc(p)) => self.send_grpc(c, &p),
                // A key and its packet always share a protocol.
                _ => {}
            }
        }
    }
}

/// The encoded list a subscriber view receives, from the shared cache.
fn list_body(
    lists: &ListCache,
    service: &ServiceKey,
    snapshot: Option<&ServiceSnapshot>,
    view: &SubscriberView,
) -> Arc<CachedList> {
    let revision = snapshot.map_or(0, |s| s.revision());
    let mut key = String::new();
    ListCache::key(
        &mut key,
        service.namespace(),
        service.grouped_name(),
        &view.clusters,
        view.healthy_only,
        true,
    );
    if let Some(hit) = lists.get(&key, revision) {
        return hit;
    }
    let clusters: Vec<&str> = view
        .clusters
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let list = ListView {
        service: ServiceName::new(service.group(), service.service_name()),
        clusters: &view.clusters,
        cluster_list: &clusters,
        healthy_only: view.healthy_only,
        cache_millis: PUSH_CACHE_MILLIS,
        last_ref_time: crate::clock::Clock::wall_ms(),
    };
    let mut body = Vec::with_capacity(512);
    encode_list(snapshot, &list, &mut body);
    lists.put(&key, revision, body)
}
