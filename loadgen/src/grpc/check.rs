//! The 2.x fleet's verification lists, through the protocol under test: each
//! checked service is queried over gRPC (`ServiceQueryRequest`, as a client would),
//! so a server is judged by what its 2.x clients see, not by an HTTP view or a
//! counter it need not keep (r-nacos reports `instanceCount` 0 with every 2.x
//! registration answered).
//!
//! [`Lister`] is the runner's blocking handle on one member's gRPC port (a
//! current-thread runtime of its own: the runner thread is not async).
//! [`chosen`] picks which watched services are compared: every one up to
//! [`LIST_ALL_UP_TO`], beyond that a seeded random sample of that many, which
//! keeps a million-instance run's check to seconds.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use super::client::{self, Client};
use super::request;
use crate::fleet::{Endpoint, Naming};
use crate::subscriber::HostList;
use anyhow::Context as _;
use registry_proto::grpc::message::RequestHead;
use registry_proto::grpc::Payload;
use serde::Deserialize;

/// Services listed one by one before a sample is taken instead.
pub const LIST_ALL_UP_TO: u32 = 1000;

/// How long one connect or query may take before the member counts as silent.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Which of `services` services to list: all of them, or a sample of
/// [`LIST_ALL_UP_TO`] reproducible from `seed`.
pub fn chosen(services: u32, seed: u64) -> Vec<u32> {
    if services <= LIST_ALL_UP_TO {
        return (0..services).collect();
    }
    let mut picked = HashSet::new();
    // Never zero (xorshift's fixed point), and every seed its own sequence.
    let mut x = (seed ^ 0x9e37_79b9_7f4a_7c15).max(1);
    while picked.len() < LIST_ALL_UP_TO as usize {
        // xorshift64*: a spread of services, reproducible from the seed.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        picked.insert((x.wrapping_mul(0x2545_f491_4f6c_dd1d) % u64::from(services)) as u32);
    }
    let mut v: Vec<u32> = picked.into_iter().collect();
    v.sort_unstable();
    v
}

/// The items to query of `items` (one per service): all of them up to
/// [`LIST_ALL_UP_TO`], else the sample [`chosen`] picks with `seed`.
pub fn sample<T: Copy>(items: Vec<T>, seed: u64) -> Vec<T> {
    if items.len() <= LIST_ALL_UP_TO as usize {
        return items;
    }
    let len = u32::try_from(items.len()).unwrap_or(u32::MAX);
    chosen(len, seed)
        .into_iter()
        .map(|k| items[k as usize])
        .collect()
}

/// A seed for [`chosen`] (the clock's nanoseconds: each check its own sample).
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}

/// Lists services of one member over its gRPC port, blocking.
pub struct Lister {
    addr: SocketAddr,
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
}

impl std::fmt::Debug for Lister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lister").field("addr", &self.addr).finish()
    }
}

impl Lister {
    /// A lister for the gRPC port `addr` (connects on first use).
    pub fn new(addr: SocketAddr) -> anyhow::Result<Lister> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the gRPC verification runtime")?;
        Ok(Lister {
            addr,
            runtime,
            client: None,
        })
    }

    /// The gRPC port it asks.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The member's list of service `s`, as its 2.x clients would get it.
    pub fn hosts(&mut self, naming: &Naming, s: u32) -> anyhow::Result<HostList> {
        let mut service_name = String::new();
        naming.service_name(s, &mut service_name);
        let payload = request::query(&request::Naming {
            namespace: naming.namespace.clone(),
            service_name,
            group_name: naming.group.clone(),
        });
        let name = naming.grouped(s);
        // A connection kept from an earlier check may have been closed by the
        // server meanwhile (nobody answered its detection requests while the
        // runner was not asking): one retry on a fresh connection, as the HTTP
        // control client does, before the member counts as silent.
        let reused = self.client.is_some();
        let mut answer = match self.query(&naming.namespace, payload.clone()) {
            Err(_) if reused => self.query(&naming.namespace, payload.clone()),
            first => first,
        }
        .with_context(|| format!("gRPC query of {name} on {}", self.addr))?;
        // The server may also have unregistered the kept connection while
        // leaving it open: it answers `UN_REGISTER`, on which Nacos's
        // `RpcClient.request` reconnects (`switchServerAsync`). So does the
        // check, once, before it takes the answer.
        if reused && unregistered(answer.json()) {
            self.client = None;
            answer = self
                .query(&naming.namespace, payload)
                .with_context(|| format!("gRPC query of {name} on {}", self.addr))?;
        }
        let endpoints = listed(answer.json())
            .with_context(|| format!("gRPC query of {name} on {}", self.addr))?;
        Ok(HostList::new(name, endpoints))
    }

    /// One unary call on the member's connection (opened first if there is none;
    /// dropped when the call fails, so the next one opens another).
    fn query(&mut self, namespace: &str, payload: Payload) -> anyhow::Result<Payload> {
        let addr = self.addr;
        let client = match self.client.clone() {
            Some(c) => c,
            None => {
                let c = self
                    .runtime
                    .block_on(async {
                        tokio::time::timeout(CALL_TIMEOUT, connect(addr, namespace)).await
                    })
                    .unwrap_or_else(|_| {
                        Err(anyhow::anyhow!("connecting to gRPC {addr} timed out"))
                    })?;
                self.client = Some(c.clone());
                c
            }
        };
        let answer = self.runtime.block_on(async {
            let stream = std::cell::Cell::new(None);
            tokio::time::timeout(CALL_TIMEOUT, client.unary(&payload, &stream)).await
        });
        match answer {
            Ok(Ok(a)) => Ok(a),
            failed => {
                self.client = None;
                Err(failed.map_or_else(
                    |_| anyhow::anyhow!("timed out"),
                    |r| anyhow::anyhow!(r.unwrap_err()),
                ))
            }
        }
    }
}

/// A `QueryServiceResponse` as the check reads it: every field may be absent or
/// `null`. A server with no such service (drained: nothing left) may answer
/// `serviceInfo: null` or `hosts: null` (r-nacos's optional fields), and that is
/// a list of zero hosts, not a member that could not be asked: a failed answer
/// says so in its `resultCode`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    result_code: Option<i32>,
    message: Option<String>,
    service_info: Option<Info>,
}

#[derive(Deserialize)]
struct Info {
    hosts: Option<Vec<Listed>>,
}

#[derive(Deserialize)]
struct Listed {
    ip: Option<String>,
    port: Option<i64>,
}

/// Whether an answer is the server's "this connection is not registered"
/// (`ErrorResponse` with `errorCode` `UN_REGISTER`, 301).
fn unregistered(json: &[u8]) -> bool {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Error {
        error_code: Option<i32>,
    }
    serde_json::from_slice::<Error>(json)
        .is_ok_and(|e| e.error_code == Some(registry_proto::grpc::code::UN_REGISTER))
}

/// The endpoints of one `QueryServiceResponse` body; an error when the server
/// said the query failed or the body is not an answer.
fn listed(json: &[u8]) -> anyhow::Result<Vec<Endpoint>> {
    let answer: Answer = serde_json::from_slice(json)
        .with_context(|| format!("answered {}", String::from_utf8_lossy(json)))?;
    if let Some(code) = answer.result_code.filter(|c| *c != 200) {
        anyhow::bail!(
            "answered resultCode {code}: {}",
            answer.message.unwrap_or_default()
        );
    }
    let hosts = answer
        .service_info
        .and_then(|i| i.hosts)
        .unwrap_or_default();
    Ok(hosts
        .iter()
        .map(|h| {
            h.port
                .and_then(|p| u16::try_from(p).ok())
                .zip(h.ip.as_deref())
                .and_then(|(p, ip)| Endpoint::parse(ip, p))
                .unwrap_or(Endpoint(u64::MAX))
        })
        .collect())
}

/// Opens a connection as a client does (server check, the stream with the
/// connection setup, a health check until the server has seen the setup): a
/// server answers queries only on a registered connection. The stream is read by
/// a task of the lister's runtime (it answers the server's detection requests),
/// which runs while the lister's calls do.
async fn connect(addr: SocketAddr, namespace: &str) -> anyhow::Result<Client> {
    let tcp = client::dial(addr, CALL_TIMEOUT).await?;
    let (client, io) = client::handshake(tcp, addr).await?;
    tokio::spawn(async move {
        let _ = io.await;
    });
    let (mut tx, mut inbound) = client::open(&client, namespace).await?;
    tokio::spawn(async move {
        while let Ok(Some(p)) = inbound.message().await {
            if p.type_name() != "ClientDetectionRequest" {
                continue; // no subscriptions here: nothing else to answer
            }
            let id = serde_json::from_slice::<RequestHead>(p.json())
                .ok()
                .and_then(|h| h.request_id)
                .unwrap_or_default();
            if client::send(&mut tx, &request::ack("ClientDetectionResponse", &id)).is_err() {
                break;
            }
        }
    });
    client::registered(&client, 200).await?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unregistered_connection_is_told_from_other_answers() {
        // registry_proto's ErrorResponse for a request on a connection the
        // server does not know, as Nacos's GrpcRequestAcceptor writes it.
        let unknown = br#"{"resultCode":500,"errorCode":301,"message":"Connection is unregistered.","requestId":"7"}"#;
        assert!(unregistered(unknown));
        let starting = br#"{"resultCode":500,"errorCode":300,"message":"Server is starting,please try later."}"#;
        assert!(!unregistered(starting));
        let listed = br#"{"resultCode":200,"errorCode":0,"serviceInfo":{"hosts":[]}}"#;
        assert!(!unregistered(listed));
        assert!(!unregistered(b"not json"));
    }

    #[test]
    fn small_fleets_list_every_service_and_large_ones_a_stable_sample() {
        assert_eq!(chosen(3, 7), vec![0, 1, 2]);
        assert_eq!(chosen(LIST_ALL_UP_TO, 7).len(), LIST_ALL_UP_TO as usize);
        let a = chosen(50_000, 42);
        assert_eq!(a.len(), LIST_ALL_UP_TO as usize);
        assert!(a.iter().all(|s| *s < 50_000));
        assert!(a.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        assert_eq!(a, chosen(50_000, 42), "the seed reproduces the sample");
        assert_ne!(a, chosen(50_000, 43));
    }

    #[test]
    fn every_watched_service_is_compared_up_to_the_limit_then_a_sample_of_them() {
        let few: Vec<u32> = (100..400).collect();
        assert_eq!(
            sample(few.clone(), 9),
            few,
            "under the limit: all, in order"
        );
        // A segment's services: every third of 9,000.
        let many: Vec<u32> = (0..9_000).step_by(3).collect();
        let picked = sample(many.clone(), 9);
        assert_eq!(picked.len(), LIST_ALL_UP_TO as usize);
        assert!(picked.iter().all(|s| s % 3 == 0), "only the segment's own");
        let distinct: HashSet<u32> = picked.iter().copied().collect();
        assert_eq!(distinct.len(), picked.len(), "no service twice");
        assert_eq!(picked, sample(many.clone(), 9));
        assert_ne!(picked, sample(many, 10));
    }

    #[test]
    fn a_service_the_server_no_longer_holds_lists_zero_hosts() {
        // After a drain the server may hold no service at all: its answer, with
        // `null` for what it does not have, is an empty list (the drain check
        // then reads 0 instances, not "unknown").
        for body in [
            r#"{"resultCode":200,"success":true,"serviceInfo":null}"#,
            r#"{"resultCode":200,"serviceInfo":{"name":"s","hosts":null,"checksum":null,"clusters":null}}"#,
            r#"{"resultCode":200,"serviceInfo":{"name":"s","hosts":[]}}"#,
        ] {
            assert_eq!(listed(body.as_bytes()).unwrap(), Vec::new(), "{body}");
        }
        let one = r#"{"resultCode":200,"serviceInfo":{"hosts":[{"ip":"10.0.0.1","port":8080,"weight":null}]}}"#;
        assert_eq!(
            listed(one.as_bytes()).unwrap(),
            vec![Endpoint::parse("10.0.0.1", 8080).unwrap()]
        );
        // A failed query is still an error, not zero hosts.
        let failed = r#"{"resultCode":500,"errorCode":500,"message":"boom"}"#;
        assert!(listed(failed.as_bytes()).is_err());
        assert!(listed(b"not json").is_err());
    }

    #[test]
    fn a_silent_member_is_an_error_not_an_empty_list() {
        // A port nothing listens on: the check must not read it as "0 hosts".
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = free.local_addr().unwrap();
        drop(free);
        let mut lister = Lister::new(addr).unwrap();
        let profile = crate::profile::Profile::from_toml("x", "name = \"x\"\n").unwrap();
        let naming = Naming::new(&profile.fleet);
        assert!(lister.hosts(&naming, 0).is_err());
    }
}
