//! The server under test: an embedded registry or any Nacos-1.x-compatible URL, and a
//! small blocking HTTP client for the runner's own calls (metrics, final lists).
//!
//! `--target` takes one URL or a comma-separated list (every member of a cluster):
//! the workers spread their connections over the list and fail over to the next
//! member when one stops answering, and the runner's own client does the same.
//!
//! Without `--target`, [`Server::start`] starts `registry_server::Embedded` on
//! loopback port 0, on its own runtime and threads (named `registry-*`), so a first
//! run needs no setup and the registry's CPU time can be told apart from the
//! generator's. With `--target`, only loopback addresses are loaded by default:
//! this tool makes a lot of traffic, and pointing it elsewhere must be deliberate
//! (`--allow-remote`).

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{bail, Context as _};
use registry_proto::http1::{parse_response, write_request, Method};
use registry_proto::naming::client::{self, ListSpec};
use registry_proto::naming::list::ServiceInfo;
use registry_proto::naming::operator::Metrics;
use registry_proto::naming::ServiceName;
use registry_proto::openapi::envelope::Envelope;

use crate::dialect::Dialect;
use crate::fleet::Naming;
use crate::host;
use crate::subscriber::HostList;

/// The v3 admin metrics with their counts: Nacos 3 answers only the status
/// unless `onlyStatus=false` (`OperatorControllerV3.metrics`).
const V3_METRICS: &str = "/nacos/v3/admin/ns/ops/metrics?onlyStatus=false";

/// How to reach or start the server.
#[derive(Debug, Clone, Default)]
pub struct TargetConfig {
    /// `http://host:port` of a running server, or a comma-separated list of cluster
    /// members; `None` starts an embedded registry.
    pub url: Option<String>,
    /// Process id of the server, for its RSS and CPU time (external servers).
    pub pid: Option<u32>,
    /// Worker threads of an embedded registry.
    pub registry_workers: usize,
    /// Allow a target outside 127.0.0.0/8.
    pub allow_remote: bool,
    /// The members' gRPC addresses, in the order of `url` (`None`: each member's
    /// HTTP port + 1000, where every Nacos 2.x client looks).
    pub grpc_url: Option<String>,
}

/// A server being loaded.
pub struct Server {
    /// Its HTTP address (the first member's, for a cluster).
    pub addr: SocketAddr,
    /// Every member's HTTP address (just `addr` for one server).
    pub addrs: Vec<SocketAddr>,
    /// Every member's gRPC address, in the same order.
    pub grpc: Vec<SocketAddr>,
    /// Its base URL (comma-separated for a cluster).
    pub url: String,
    /// Whether it runs inside this process.
    pub embedded: bool,
    pid: Option<u32>,
    cpu_start: Option<f64>,
    #[cfg(feature = "embedded")]
    inner: Option<registry_server::Embedded>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("url", &self.url)
            .field("embedded", &self.embedded)
            .finish()
    }
}

/// Parses `http://host:port`, `host:port` (port 8848 when absent) into an address.
pub fn parse_url(url: &str) -> anyhow::Result<SocketAddr> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    if url.starts_with("https://") {
        bail!("https is not supported: {url}");
    }
    let hostport = rest.split('/').next().unwrap_or(rest);
    let with_port = if hostport
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        hostport.to_owned()
    } else {
        format!("{hostport}:8848")
    };
    with_port
        .to_socket_addrs()
        .with_context(|| format!("resolving {url}"))?
        .next()
        .with_context(|| format!("{url} resolves to no address"))
}

/// Parses a comma-separated list of server URLs (see [`parse_url`]); at least one,
/// each at most once.
pub fn parse_urls(urls: &str) -> anyhow::Result<Vec<SocketAddr>> {
    let mut addrs = Vec::new();
    for url in urls.split(',').map(str::trim) {
        if url.is_empty() {
            bail!("empty server in the target list {urls:?}");
        }
        let addr = parse_url(url)?;
        if addrs.contains(&addr) {
            bail!("{url} is listed twice in the target list");
        }
        addrs.push(addr);
    }
    Ok(addrs)
}

impl Server {
    /// Starts (embedded) or checks (external) the server.
    pub fn start(cfg: &TargetConfig) -> anyhow::Result<Server> {
        match &cfg.url {
            Some(urls) => {
                let addrs = parse_urls(urls)?;
                if let Some(remote) = addrs.iter().find(|a| !a.ip().is_loopback()) {
                    if !cfg.allow_remote {
                        bail!("{remote} is not a loopback address; pass --allow-remote to load it anyway");
                    }
                }
                let url = addrs
                    .iter()
                    .map(|a| format!("http://{a}"))
                    .collect::<Vec<_>>()
                    .join(",");
                let grpc = match &cfg.grpc_url {
                    Some(g) => {
                        let grpc = parse_urls(g)?;
                        if grpc.len() != addrs.len() {
                            bail!(
                                "--grpc-target lists {} servers, --target {}",
                                grpc.len(),
                                addrs.len()
                            );
                        }
                        grpc
                    }
                    None => addrs
                        .iter()
                        .map(|a| {
                            let port = a.port().saturating_add(registry_proto::grpc::PORT_OFFSET);
                            SocketAddr::new(a.ip(), port)
                        })
                        .collect(),
                };
                let server = Server {
                    addr: addrs[0],
                    grpc,
                    addrs,
                    url,
                    embedded: false,
                    pid: cfg.pid,
                    cpu_start: cfg.pid.and_then(host::process_cpu_seconds),
                    #[cfg(feature = "embedded")]
                    inner: None,
                };
                Ok(server)
            }
            None => Server::embedded(cfg),
        }
    }

    #[cfg(feature = "embedded")]
    fn embedded(cfg: &TargetConfig) -> anyhow::Result<Server> {
        use clap::Parser as _;
        let mut config = registry_server::Config::parse_from(["registry"]);
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.workers = cfg.registry_workers.max(1);
        let e =
            registry_server::Embedded::start(config).context("starting the embedded registry")?;
        let prefix = registry_server::embed::THREAD_PREFIX;
        Ok(Server {
            addr: e.http_addr,
            addrs: vec![e.http_addr],
            grpc: vec![e.grpc_addr],
            url: format!("http://{}", e.http_addr),
            embedded: true,
            pid: None,
            cpu_start: host::threads_cpu_seconds(prefix).or(Some(0.0)),
            inner: Some(e),
        })
    }

    #[cfg(not(feature = "embedded"))]
    fn embedded(_: &TargetConfig) -> anyhow::Result<Server> {
        bail!("this loadgen was built without the `embedded` feature: pass --target URL")
    }

    /// Its gRPC (Nacos 2.x) address: the embedded registry's, else the HTTP port +
    /// 1000 as every Nacos client assumes.
    pub fn grpc_addr(&self) -> SocketAddr {
        #[cfg(feature = "embedded")]
        if let Some(e) = &self.inner {
            return e.grpc_addr;
        }
        let port = self
            .addr
            .port()
            .saturating_add(registry_proto::grpc::PORT_OFFSET);
        SocketAddr::new(self.addr.ip(), port)
    }

    /// CPU seconds the server used since it was started or first seen.
    pub fn cpu_seconds(&self) -> Option<f64> {
        let now = if self.embedded {
            #[cfg(feature = "embedded")]
            {
                host::threads_cpu_seconds(registry_server::embed::THREAD_PREFIX)
            }
            #[cfg(not(feature = "embedded"))]
            {
                None
            }
        } else {
            self.pid.and_then(host::process_cpu_seconds)
        };
        Some(now? - self.cpu_start?)
    }

    /// Resource use for the report: the embedded registry's figures are the whole
    /// process's RSS (it shares the address space with the generator) and its own
    /// threads' CPU time.
    pub fn stats(&self) -> Option<reports::ServerStats> {
        let (rss, peak) = if self.embedded {
            host::memory(None)
        } else if let Some(pid) = self.pid {
            host::memory(Some(pid))
        } else {
            return None;
        };
        Some(reports::ServerStats {
            rss_bytes: rss,
            peak_rss_bytes: peak,
            cpu_seconds: self.cpu_seconds(),
        })
    }

    /// The source address subscribers bind to for a non-loopback target: the local
    /// address a datagram to the server would leave from.
    pub fn local_ip(&self) -> IpAddr {
        if self.addr.ip().is_loopback() {
            return IpAddr::V4(Ipv4Addr::LOCALHOST);
        }
        std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
            .and_then(|s| {
                s.connect(self.addr)?;
                s.local_addr()
            })
            .map(|a| a.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
    }

    /// Stops an embedded registry (no-op for external servers).
    pub fn stop(self) -> anyhow::Result<()> {
        #[cfg(feature = "embedded")]
        if let Some(e) = self.inner {
            e.stop()?;
        }
        Ok(())
    }
}

/// A blocking keep-alive HTTP client for the runner's few calls. Given several
/// servers, it uses the first that answers and moves on when one fails.
#[derive(Debug)]
pub struct ControlClient {
    addrs: Vec<SocketAddr>,
    current: usize,
    host: String,
    stream: Option<TcpStream>,
    buf: Vec<u8>,
    path: String,
    /// The API its counts and lists are read through.
    dialect: Dialect,
    /// Count instances by listing these services instead of reading metrics.
    count_by_lists: Option<Naming>,
    /// The members' gRPC ports (parallel to `addrs`): lists are then read over
    /// gRPC, the 2.x fleet's protocol ([`crate::grpc::check`]).
    grpc: Vec<SocketAddr>,
    /// The gRPC lister of the member asked now.
    lister: Option<crate::grpc::check::Lister>,
}

impl ControlClient {
    /// A client for `addr` (connects on first use).
    pub fn new(addr: SocketAddr) -> ControlClient {
        ControlClient::for_members(vec![addr])
    }

    /// A client for a list of servers (at least one).
    pub fn for_members(addrs: Vec<SocketAddr>) -> ControlClient {
        ControlClient {
            host: addrs.first().map(|a| a.to_string()).unwrap_or_default(),
            addrs,
            current: 0,
            stream: None,
            buf: Vec::with_capacity(64 * 1024),
            path: String::new(),
            dialect: Dialect::V1,
            count_by_lists: None,
            grpc: Vec::new(),
            lister: None,
        }
    }

    /// Counts instances by listing every service of `naming` (this process's
    /// segment): for the 2.x fleet, whose instances another server need not count
    /// in its metrics (r-nacos reports `instanceCount` 0 with every 2.x
    /// registration answered), so a check that trusted them would fail a correct
    /// server.
    pub fn counting_by_lists(mut self, naming: Naming) -> ControlClient {
        self.count_by_lists = Some(naming);
        self
    }

    /// Reads every list over gRPC from `grpc` (the members' gRPC ports, in the
    /// order of the HTTP addresses): the 2.x fleet is verified through the
    /// protocol under test.
    pub fn listing_over_grpc(mut self, grpc: Vec<SocketAddr>) -> ControlClient {
        self.grpc = grpc;
        self.lister = None;
        self
    }

    /// Whether lists are read over gRPC.
    pub fn lists_over_grpc(&self) -> bool {
        !self.grpc.is_empty()
    }

    /// One client per member, reading as this one does (for checks that every
    /// member of a cluster holds the same).
    pub fn each_member(&self) -> Vec<ControlClient> {
        self.addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut c = ControlClient::new(*a).with_dialect(self.dialect);
                c.count_by_lists = self.count_by_lists.clone();
                c.grpc = self.grpc.get(i).copied().into_iter().collect();
                c
            })
            .collect()
    }

    /// The server this client asks now.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addrs.get(self.current).copied()
    }

    /// The server's instance count: its metrics, or the sum of its lists.
    pub fn instance_count(&mut self) -> anyhow::Result<u64> {
        let Some(naming) = self.count_by_lists.clone() else {
            return Ok(self.metrics()?.instance_count);
        };
        let mut total = 0;
        for s in (0..naming.services).filter(|s| naming.owns_service(*s)) {
            total += self.hosts(&naming, s)?.endpoints.len() as u64;
        }
        Ok(total)
    }

    /// Reads counts and lists through `dialect`'s API (v1 by default; a v3 fleet
    /// is verified through the v3 APIs, which a 3.2+ server serves without the
    /// legacy adapter).
    pub fn with_dialect(mut self, dialect: Dialect) -> ControlClient {
        self.dialect = dialect;
        self
    }

    fn connect(&self) -> std::io::Result<TcpStream> {
        let addr = self
            .addrs
            .get(self.current)
            .ok_or(std::io::ErrorKind::NotFound)?;
        let s = TcpStream::connect_timeout(addr, Duration::from_secs(5))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(s)
    }

    /// `GET path`: status and body. Retries once on a fresh connection when a reused
    /// one fails, then on each other server in turn.
    pub fn get(&mut self, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut last = None;
        for _ in 0..self.addrs.len() {
            match self.try_get(path) {
                Ok(r) => return Ok(r),
                Err(_) => {
                    self.stream = None;
                    match self.try_get(path) {
                        Ok(r) => return Ok(r),
                        Err(e) => last = Some(e),
                    }
                }
            }
            self.stream = None;
            self.current = (self.current + 1) % self.addrs.len();
        }
        let addr = self.addrs.get(self.current).copied();
        Err(last.unwrap_or_else(|| anyhow::anyhow!("no server")))
            .with_context(|| format!("GET {path} from {addr:?}"))
    }

    fn try_get(&mut self, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        if self.stream.is_none() {
            self.stream = Some(self.connect()?);
        }
        let Some(stream) = self.stream.as_mut() else {
            bail!("not connected");
        };
        let mut req = Vec::new();
        write_request(&mut req, Method::Get, path, &self.host, None);
        stream.write_all(&req)?;
        self.buf.clear();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Some((resp, _)) = parse_response(&self.buf)? {
                let out = (resp.status, resp.body.to_vec());
                if !resp.keep_alive {
                    self.stream = None;
                }
                return Ok(out);
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                let (resp, _) = registry_proto::http1::finish_response_at_eof(&self.buf)?;
                let out = (resp.status, resp.body.to_vec());
                self.stream = None;
                return Ok(out);
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// The server's metrics (`instanceCount` is what verification compares).
    pub fn metrics(&mut self) -> anyhow::Result<Metrics> {
        self.path.clear();
        match self.dialect {
            Dialect::V1 => client::metrics(&mut self.path),
            Dialect::V3 => self.path.push_str(V3_METRICS),
        }
        let path = std::mem::take(&mut self.path);
        let (status, body) = self.get(&path)?;
        self.path = path;
        if status != 200 {
            bail!(
                "metrics answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        match self.dialect {
            Dialect::V1 => Metrics::parse(&body).context("parsing metrics"),
            Dialect::V3 => {
                let envelope = Envelope::parse(&body).context("parsing the metrics envelope")?;
                serde_json::from_value(envelope.data).context("parsing metrics")
            }
        }
    }

    /// The hosts of service `s`, through the client's dialect.
    pub fn hosts(&mut self, naming: &Naming, s: u32) -> anyhow::Result<HostList> {
        if let Some(&grpc) = self.grpc.get(self.current).or(self.grpc.first()) {
            let lister = match self.lister.take() {
                Some(l) if l.addr() == grpc => l,
                _ => crate::grpc::check::Lister::new(grpc)?,
            };
            return self.lister.insert(lister).hosts(naming, s);
        }
        if self.dialect == Dialect::V1 {
            return Ok(HostList::from_info(&self.list(naming, s)?));
        }
        let mut name = String::new();
        naming.service_name(s, &mut name);
        let service = ServiceName::new(&naming.group, &name);
        self.path.clear();
        let spec = ListSpec {
            namespace_id: &naming.namespace,
            service,
            clusters: "",
            healthy_only: false,
            udp_port: 0,
            client_ip: None,
        };
        self.dialect.list(&mut self.path, &spec, &naming.cluster);
        let path = std::mem::take(&mut self.path);
        let (status, body) = self.get(&path)?;
        self.path = path;
        if status != 200 {
            bail!("list of {name} answered {status}");
        }
        let endpoints = crate::dialect::v3_endpoints(&body)
            .with_context(|| format!("parsing the list of {name}"))?;
        Ok(HostList::new(service.grouped(), endpoints))
    }

    /// The full instance list of service `s`.
    pub fn list(&mut self, naming: &Naming, s: u32) -> anyhow::Result<ServiceInfo> {
        let mut name = String::new();
        naming.service_name(s, &mut name);
        self.path.clear();
        client::list(
            &mut self.path,
            &ListSpec {
                namespace_id: &naming.namespace,
                service: ServiceName::new(&naming.group, &name),
                clusters: "",
                healthy_only: false,
                udp_port: 0,
                client_ip: None,
            },
        );
        let path = std::mem::take(&mut self.path);
        let (status, body) = self.get(&path)?;
        self.path = path;
        if status != 200 {
            bail!("list of {name} answered {status}");
        }
        ServiceInfo::parse(&body).context("parsing a list")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(
            parse_url("127.0.0.2").unwrap(),
            "127.0.0.2:8848".parse().unwrap()
        );
        assert_eq!(
            parse_url("http://127.0.0.1:1/nacos").unwrap(),
            "127.0.0.1:1".parse().unwrap()
        );
        assert!(parse_url("https://x").is_err());
        assert_eq!(
            parse_urls("http://127.0.0.1:1, 127.0.0.1:2").unwrap(),
            vec![
                "127.0.0.1:1".parse().unwrap(),
                "127.0.0.1:2".parse().unwrap()
            ]
        );
        for bad in ["", "http://127.0.0.1:1,", "127.0.0.1:1,127.0.0.1:1"] {
            assert!(parse_urls(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn refuses_remote_targets_unless_allowed() {
        let cfg = TargetConfig {
            url: Some("http://192.0.2.1:8848".into()),
            ..TargetConfig::default()
        };
        let e = Server::start(&cfg).unwrap_err();
        assert!(e.to_string().contains("--allow-remote"), "{e}");
    }
}
