//! The DNS door (`--dns-listen`, off by default): service discovery for
//! whatever can resolve a name, answered from the store's snapshots.
//!
//! The protocol (names, the escape for characters a label cannot carry,
//! record types, NXDOMAIN versus NODATA, truncation) is
//! [`registry_proto::dns`]; this module is the door around it: the store
//! seen as a [`Zone`] ([`StoreZone`]), one UDP task and a TCP acceptor on
//! the same address and port, and the door's metrics. A query reads the
//! service's current snapshot without a lock, as every other read does,
//! and selects its instances with the store's own [`View`]: the healthy,
//! enabled ones, or every enabled one once the healthy share is at or
//! below the service's protect threshold, as Nacos's list
//! (`ServiceUtil.selectInstancesWithHealthyProtection`). Answers built from
//! one service's snapshot are kept per service revision ([`cache`]), as the
//! HTTP list's are: a repeated query is a copy with its id patched, and the
//! next query after a change still sees it (the TTL, `--dns-ttl`, 5 s, only
//! bounds how long resolvers keep an answer). In a cluster every node
//! answers from its own replica.
//!
//! Auth does not apply: DNS has no credentials to check, so anyone who
//! can reach the port can read every service's addresses. Bind it to
//! loopback or a private interface (the default is off), or firewall it.
//!
//! UDP: each wake-up reads what has arrived, up to [`UDP_BATCH`]
//! datagrams in one `recvmmsg`, and sends their answers in one `sendmmsg`,
//! a run of answers to one peer as one segmented send ([`udp`]), so a busy
//! door pays a few system calls per batch, not two per query.
//!
//! TCP (RFC 7766): several queries may share a connection, each framed by
//! its two-byte length; a connection idle for [`TCP_IDLE`] is closed, and
//! at most [`MAX_TCP_CONNECTIONS`] are served at once (a connection past
//! that is closed at once, which a client reads as "try later").

mod cache;
mod udp;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use registry_core::{ServiceRef, Store, View};
use registry_proto::dns::name::{Parent, ServiceName};
use registry_proto::dns::{Host, Rcode, Responder, Transport, Zone};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use cache::{AnswerCache, Source};
pub use udp::UDP_BATCH;

use crate::config::Config;
use crate::door::{Bound, Door, Running};
use crate::metrics::{Counter, Histogram, Render};
use registry_proto::prometheus::{Exposition, Kind};

/// How long a TCP connection may wait for its next query.
pub const TCP_IDLE: Duration = Duration::from_secs(10);
/// TCP connections served at once.
pub const MAX_TCP_CONNECTIONS: usize = 512;
/// The largest datagram read: a query is far smaller, and one past this
/// arrives cut and gets FORMERR.
const UDP_READ: usize = 4096;
/// Bytes of answers the cache keeps (see [`cache`]).
const CACHE_BUDGET: usize = 8 << 20;

/// The store, as the responder asks it, noting which service snapshots
/// the answer was built from (what [`cache`] may key it by).
pub struct StoreZone<'a> {
    store: &'a Store,
    read: RefCell<Reads>,
}

/// The snapshots one answer read.
enum Reads {
    /// None yet.
    Nothing,
    /// Exactly one service's, at one revision.
    One(Source),
    /// Something besides: a service that does not exist, which other
    /// services exist, or two snapshots.
    More,
}

impl<'a> StoreZone<'a> {
    /// The zone of `store`, having read nothing.
    pub fn new(store: &'a Store) -> StoreZone<'a> {
        StoreZone {
            store,
            read: RefCell::new(Reads::Nothing),
        }
    }

    /// The one service snapshot everything answered came from, if so.
    fn source(self) -> Option<Source> {
        match self.read.into_inner() {
            Reads::One(s) => Some(s),
            Reads::Nothing | Reads::More => None,
        }
    }

    fn saw(&self, namespace: &str, grouped: &str, revision: u64) {
        let mut read = self.read.borrow_mut();
        match &*read {
            Reads::Nothing => {
                *read = Reads::One(Source {
                    namespace: namespace.into(),
                    grouped: grouped.into(),
                    revision,
                });
            }
            Reads::One(s)
                if s.revision == revision
                    && &*s.namespace == namespace
                    && &*s.grouped == grouped => {}
            Reads::One(_) | Reads::More => *read = Reads::More,
        }
    }

    fn saw_more(&self) {
        *self.read.borrow_mut() = Reads::More;
    }
}

fn grouped(name: &ServiceName) -> String {
    let mut g = String::with_capacity(name.group.len() + 2 + name.service.len());
    g.push_str(&name.group);
    g.push_str(registry_core::model::GROUP_SEPARATOR);
    g.push_str(&name.service);
    g
}

impl Zone for StoreZone<'_> {
    fn hosts(&self, name: &ServiceName, visit: &mut dyn FnMut(Host<'_>)) -> bool {
        let grouped = grouped(name);
        let cluster: Vec<&str> = name.cluster.iter().map(String::as_str).collect();
        let found = self
            .store
            .read(ServiceRef::new(&name.namespace, &grouped), |snap| {
                self.saw(&name.namespace, &grouped, snap.revision());
                // A cluster no instance is in is not a name (NXDOMAIN);
                // one whose instances are all down is (NODATA).
                if let Some(c) = &name.cluster {
                    if !snap.instances().iter().any(|i| &*i.cluster == c) {
                        return false;
                    }
                }
                let view = View {
                    clusters: &cluster,
                    healthy_only: true,
                };
                for (i, _) in snap.select(&view).hosts {
                    visit(Host {
                        ip: i.ip,
                        port: i.port,
                        weight: i.weight,
                        cluster: &i.cluster,
                    });
                }
                true
            });
        // A missing service's answer depends on its namespace's others.
        found.unwrap_or_else(|| {
            self.saw_more();
            false
        })
    }

    fn instance(
        &self,
        name: &ServiceName,
        ip: std::net::IpAddr,
        port: u16,
        meta: &mut dyn FnMut(&str, &str),
    ) -> bool {
        let grouped = grouped(name);
        let cluster = name.cluster.as_deref().unwrap_or_default();
        let found = self
            .store
            .read(ServiceRef::new(&name.namespace, &grouped), |snap| {
                self.saw(&name.namespace, &grouped, snap.revision());
                let addr = registry_core::InstanceAddr { cluster, ip, port };
                match snap.find_any(addr) {
                    Some(i) if i.enabled => {
                        for (k, v) in i.metadata.iter() {
                            meta(k, v);
                        }
                        true
                    }
                    _ => false,
                }
            });
        found.unwrap_or_else(|| {
            self.saw_more();
            false
        })
    }

    fn has_services(&self, parent: &Parent) -> bool {
        self.saw_more();
        self.store
            .list_services(&parent.namespace, parent.group.as_deref(), 1, 1)
            .count
            > 0
    }
}

/// The door's counters (`Relaxed`: each is independent and read only to
/// render `/metrics`).
pub struct DnsStats {
    /// Queries received, by transport (UDP, TCP).
    queries: [Counter; 2],
    /// Answers sent, by [`Rcode::index`].
    answers: [Counter; Rcode::ALL.len()],
    /// Answers sent with the TC bit.
    truncated: Counter,
    /// Answers copied from the cache.
    cached: Counter,
    /// Time from a query's arrival to its answer being encoded.
    latency: Histogram,
}

impl Default for DnsStats {
    fn default() -> DnsStats {
        DnsStats {
            queries: Default::default(),
            answers: Default::default(),
            truncated: Counter::default(),
            cached: Counter::default(),
            latency: Histogram::latency(),
        }
    }
}

impl DnsStats {
    /// Answers sent with `rcode`.
    pub fn answers(&self, rcode: Rcode) -> u64 {
        self.answers[rcode.index()].get()
    }

    /// Writes the door's families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        e.family(
            "registry_dns_queries_total",
            Kind::Counter,
            "DNS queries received, by transport.",
        );
        for (i, t) in ["udp", "tcp"].iter().enumerate() {
            e.sample(
                "registry_dns_queries_total",
                &[("transport", t)],
                self.queries[i].get(),
            );
        }
        e.family(
            "registry_dns_answers_total",
            Kind::Counter,
            "DNS answers sent, by response code (NODATA: NOERROR without records).",
        );
        for r in Rcode::ALL {
            e.sample(
                "registry_dns_answers_total",
                &[("rcode", r.label())],
                self.answers(r),
            );
        }
        e.family(
            "registry_dns_truncated_total",
            Kind::Counter,
            "DNS answers sent with the TC bit (the rest did not fit).",
        );
        e.sample("registry_dns_truncated_total", &[], self.truncated.get());
        e.family(
            "registry_dns_cached_total",
            Kind::Counter,
            "DNS answers copied from the answer cache (of the answers above).",
        );
        e.sample("registry_dns_cached_total", &[], self.cached.get());
        e.family(
            "registry_dns_latency_seconds",
            Kind::Histogram,
            "Time from a DNS query's arrival to its answer, in seconds.",
        );
        self.latency
            .render(e, "registry_dns_latency_seconds", &[], 1_000_000.0);
    }
}

/// What the door's tasks share: the responder, the store, the answer
/// cache and the counters.
pub struct Dns {
    responder: Responder,
    store: Arc<Store>,
    stats: Arc<DnsStats>,
    cache: AnswerCache,
    /// Where the next answer's records start (round robin).
    rotate: AtomicUsize,
}

impl Dns {
    /// A door for `domain` with records of `ttl` seconds over `store`.
    ///
    /// # Errors
    /// When `domain` is not a DNS name.
    pub fn new(
        domain: &str,
        ttl: u32,
        store: Arc<Store>,
        stats: Arc<DnsStats>,
    ) -> anyhow::Result<Dns> {
        Ok(Dns {
            responder: Responder::new(domain, ttl)?,
            store,
            stats,
            cache: AnswerCache::new(CACHE_BUDGET),
            rotate: AtomicUsize::new(0),
        })
    }

    /// The answer to one query, counted; `None`: send nothing.
    pub fn answer(&self, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.answer_into(query, transport, &mut out).then_some(out)
    }

    /// Writes the answer to one query into `out`, counted; `false`: send
    /// nothing. A hit is counted as the answer it copies.
    pub fn answer_into(&self, query: &[u8], transport: Transport, out: &mut Vec<u8>) -> bool {
        let started = Instant::now();
        self.stats.queries[usize::from(transport == Transport::Tcp)].inc();
        let rotate = self.rotate.fetch_add(1, Ordering::Relaxed);
        let current = |namespace: &str, grouped: &str| {
            self.store
                .read(ServiceRef::new(namespace, grouped), |s| s.revision())
        };
        if let Some(hit) = self.cache.get(query, transport, rotate, current, out) {
            self.stats.cached.inc();
            self.count(hit.rcode, hit.truncated, started);
            return true;
        }
        let zone = StoreZone::new(&self.store);
        let Some(response) = self.responder.respond(query, transport, &zone, rotate) else {
            return false;
        };
        if let Some(source) = zone.source() {
            self.cache.put(query, transport, rotate, source, &response);
        }
        self.count(response.rcode, response.truncated, started);
        *out = response.bytes;
        true
    }

    fn count(&self, rcode: Rcode, truncated: bool, started: Instant) {
        self.stats.answers[rcode.index()].inc();
        if truncated {
            self.stats.truncated.inc();
        }
        self.stats.latency.record_duration(started.elapsed());
    }
}

/// Binds the UDP socket and a TCP listener on the same address and port
/// (port 0: the UDP socket's free port, then TCP on it).
///
/// # Errors
/// When either cannot be bound.
pub fn bind(addr: SocketAddr) -> anyhow::Result<(std::net::UdpSocket, std::net::TcpListener)> {
    use anyhow::Context as _;
    // With port 0 the kernel picks a free UDP port in the ephemeral range,
    // where an outgoing TCP connection may already hold the same TCP port:
    // then another pick is tried, a few times (a test run here failed so).
    let tries = if addr.port() == 0 { 16 } else { 1 };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let udp = std::net::UdpSocket::bind(addr)
            .with_context(|| format!("binding DNS UDP {addr} (--dns-listen)"))?;
        let tcp_addr = SocketAddr::new(addr.ip(), udp.local_addr()?.port());
        match std::net::TcpListener::bind(tcp_addr) {
            Ok(tcp) => {
                udp.set_nonblocking(true)?;
                tcp.set_nonblocking(true)?;
                return Ok((udp, tcp));
            }
            Err(e) if attempt < tries && e.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(e) => {
                return Err(e).with_context(|| format!("binding DNS TCP {tcp_addr} (--dns-listen)"))
            }
        }
    }
}

/// Answers datagrams until `stop`, a batch per wake-up ([`udp`]).
pub async fn serve_udp(dns: Arc<Dns>, socket: UdpSocket, stop: CancellationToken) {
    use std::io::ErrorKind::WouldBlock;
    use tokio::io::Interest;
    let mut batch = udp::Batch::default();
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            r = socket.readable() => if r.is_err() { continue },
        }
        match socket.try_io(Interest::READABLE, || batch.recv(&socket)) {
            Ok(_) => {}
            // Nothing after all (the readiness was stale), or an ICMP
            // error of an earlier send: keep serving.
            Err(_) => continue,
        }
        let ready = batch.answer(&dns);
        let mut sent = 0;
        // Each pass sends at least one answer or skips one, so this ends.
        while sent < ready {
            match socket.try_io(Interest::WRITABLE, || batch.send(&socket, sent)) {
                Ok(n) => sent += n.max(1),
                Err(e) if e.kind() == WouldBlock => tokio::select! {
                    _ = stop.cancelled() => return,
                    r = socket.writable() => if r.is_err() { return },
                },
                // A lost answer is the client's retry to make, as in all UDP.
                Err(_) => sent += 1,
            }
        }
    }
}

/// Accepts TCP connections until `stop`, then waits for the open ones
/// (each ends at its next read once `stop` fires).
pub async fn serve_tcp(dns: Arc<Dns>, listener: TcpListener, stop: CancellationToken) {
    let connections = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => continue,
            },
        };
        if connections.len() >= MAX_TCP_CONNECTIONS {
            continue; // dropped: closed at once
        }
        connections.spawn(serve_connection(dns.clone(), stream, stop.clone()));
    }
    connections.close();
    connections.wait().await;
}

/// One TCP connection: length-prefixed queries, answered in order. Reads
/// are buffered and answers gathered while the next query is already in
/// the buffer, so a client that pipelines (RFC 7766 §6.2.1.1) costs one
/// read and one write per batch, not two reads and a write per query.
async fn serve_connection(dns: Arc<Dns>, stream: TcpStream, stop: CancellationToken) {
    let _ = stream.set_nodelay(true);
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::with_capacity(TCP_BUFFER, read);
    let (mut query, mut answer, mut out) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        let next = async {
            let len = read.read_u16().await?;
            query.resize(usize::from(len), 0);
            read.read_exact(&mut query).await
        };
        tokio::select! {
            _ = stop.cancelled() => return,
            r = tokio::time::timeout(TCP_IDLE, next) => match r {
                Ok(Ok(_)) => {}
                _ => return,
            },
        }
        if !dns.answer_into(&query, Transport::Tcp, &mut answer) {
            // Unanswerable: the answers gathered so far still go out.
            let _ = write.write_all(&out).await;
            return;
        }
        // The responder keeps a TCP answer within 65,535 bytes.
        out.extend_from_slice(&(answer.len() as u16).to_be_bytes());
        out.extend_from_slice(&answer);
        if holds_a_query(read.buffer()) && out.len() < TCP_BUFFER {
            continue; // answered with the next one
        }
        if write.write_all(&out).await.is_err() {
            return;
        }
        out.clear();
    }
}

/// How much of a TCP connection's input is read, and of its answers
/// gathered, at once.
const TCP_BUFFER: usize = 64 * 1024;

/// Whether `buffered` holds a whole length-prefixed query.
fn holds_a_query(buffered: &[u8]) -> bool {
    buffered.len() >= 2
        && buffered.len() - 2 >= usize::from(u16::from_be_bytes([buffered[0], buffered[1]]))
}

/// The DNS door as the server registers it (`lib.rs`'s `DOORS`): off
/// without `--dns-listen`; its socket pair bound by [`bind`], served by
/// [`serve_udp`] and [`serve_tcp`] over the store's snapshots, with its
/// [`DnsStats`] on `/metrics`. It takes the store and its settings, nothing
/// of the other doors' state.
pub struct DnsDoor;

impl Door for DnsDoor {
    fn name(&self) -> &'static str {
        "dns"
    }

    fn bind(&self, config: &Config) -> anyhow::Result<Option<Bound>> {
        let Some(addr) = config.dns_listen else {
            return Ok(None);
        };
        let (udp, tcp) = bind(addr)?;
        Ok(Some(Bound::new(udp.local_addr()?, move |views| {
            let (c, stats) = (views.config(), Arc::<DnsStats>::default());
            let dns = Dns::new(&c.dns_domain, c.dns_ttl, views.store(), stats.clone())?;
            let dns = Arc::new(dns);
            let (udp, tcp) = (UdpSocket::from_std(udp)?, TcpListener::from_std(tcp)?);
            let tasks = TaskTracker::new();
            tasks.spawn(serve_udp(dns.clone(), udp, views.stop()));
            tasks.spawn(serve_tcp(dns, tcp, views.stop()));
            tasks.close();
            Ok(Running::spawn(async move { tasks.wait().await }).with_metrics(stats))
        })))
    }
}

impl Render for DnsStats {
    fn render(&self, e: &mut Exposition<'_>) {
        DnsStats::render(self, e);
    }
}
