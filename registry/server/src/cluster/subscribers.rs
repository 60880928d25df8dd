//! A service's push subscribers over the whole cluster (what Nacos's
//! `aggregation=true` does: `NamingSubscriberServiceAggregationImpl` asks
//! every other member for its local subscribers and merges the answers).
//!
//! Subscribers live on the node they subscribed to (a 1.x client polls one
//! node, a 2.x connection is held by one node), so a list read on one node
//! misses the others' unless it asks them. [`gather`] reads this node's own
//! table and asks every other member at once over the peer route
//! (`PUT /nacos/v1/ns/distro/subscribers`, [`answer`]), each bounded by
//! [`PEER_WAIT`]; a member that does not answer in time is named in
//! [`Gathered::unreachable`] rather than failing the list.

use std::sync::Arc;
use std::time::Duration;

use registry_core::{ServiceKey, Subscriber, Subscription};
use registry_proto::distro::{self, LocalSubscribers, SubscriberRow, SubscribersQuery};
use registry_proto::http1::{Method, RESPONSE_MAX_BODY};

use super::Cluster;
use crate::state::App;

/// Longest wait for one member's answer.
pub const PEER_WAIT: Duration = Duration::from_secs(2);

/// Most rows one member sends (its count still covers every subscriber).
pub const PEER_ROWS: usize = 5_000;

/// This node's live subscribers of `key`, sorted, the first `limit` of them.
pub(crate) fn local(app: &App, key: &ServiceKey, limit: usize) -> LocalSubscribers {
    let now = app.clock.now();
    let mut all: Vec<Subscription> = Vec::new();
    app.subscribers.targets(key, now, &mut all);
    all.sort_by_key(|s| s.subscriber);
    let rows = all
        .iter()
        .filter_map(|s| {
            let (addr, protocol, agent) = match s.subscriber {
                Subscriber::Udp(addr) => (addr, "udp", None),
                // A connection that closed since the table was read has no
                // row: its subscriptions are on their way out.
                Subscriber::Connection(number) => {
                    let conn = app.grpc.hub.by_number(number)?;
                    (conn.peer, "grpc", Some(conn.client_version.clone()))
                }
            };
            Some(SubscriberRow {
                addr_str: addr.to_string(),
                ip: addr.ip().to_string(),
                port: addr.port(),
                protocol: protocol.to_owned(),
                agent,
                clusters: s.view.clusters.to_string(),
                healthy_only: s.view.healthy_only,
                expires_in_ms: s.expires_at.0.saturating_sub(now.0),
                node: String::new(),
            })
        })
        .take(limit)
        .collect();
    LocalSubscribers {
        count: all.len(),
        rows,
    }
}

/// The peer route: this node's own subscribers for the asking member.
pub(crate) fn answer(app: &App, query: &SubscribersQuery) -> LocalSubscribers {
    let key = ServiceKey::new(&query.ns, &query.service);
    local(app, &key, query.limit.min(PEER_ROWS))
}

/// Every member's subscribers of one service.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// Subscribers counted over the members that answered.
    pub count: usize,
    /// This node's rows first, then each member's in member order, each
    /// row naming its member.
    pub rows: Vec<SubscriberRow>,
    /// Members that did not answer in time, with why.
    pub unreachable: Vec<(String, String)>,
}

/// This node's subscribers of `key` now, then (when `everywhere` and in a
/// cluster) every other member's, asked at once. At most `limit` rows per
/// member; the future owns what it needs.
pub(crate) fn gather(
    app: &App,
    key: &ServiceKey,
    limit: usize,
    everywhere: bool,
) -> impl std::future::Future<Output = Gathered> + Send + 'static {
    let limit = limit.min(PEER_ROWS);
    let mut mine = local(app, key, limit);
    let cluster = app.cluster.clone().filter(|_| everywhere);
    let me = cluster
        .as_ref()
        .map_or_else(|| app.config.listen.to_string(), |c| c.config.me.clone());
    for r in &mut mine.rows {
        r.node.clone_from(&me);
    }
    let query = SubscribersQuery {
        ns: key.namespace().to_owned(),
        service: key.grouped_name().to_owned(),
        limit,
    };
    async move {
        let mut gathered = Gathered {
            count: mine.count,
            rows: mine.rows,
            unreachable: Vec::new(),
        };
        if let Some(cluster) = cluster {
            ask_peers(&cluster, &query, &mut gathered).await;
        }
        gathered
    }
}

async fn ask_peers(cluster: &Arc<Cluster>, query: &SubscribersQuery, into: &mut Gathered) {
    let body = Arc::new(distro::encode(&cluster.envelope(query.clone())));
    let mut asks = tokio::task::JoinSet::new();
    for (i, peer) in cluster.peers().iter().enumerate() {
        let (cluster, body, addr) = (cluster.clone(), body.clone(), peer.addr.clone());
        asks.spawn(async move {
            let asked = tokio::time::timeout(PEER_WAIT, ask(&cluster, &addr, &body)).await;
            let result = asked.unwrap_or_else(|_| Err(format!("no answer in {PEER_WAIT:?}")));
            (i, addr, result)
        });
    }
    let mut answers = Vec::new();
    while let Some(done) = asks.join_next().await {
        if let Ok(a) = done {
            answers.push(a);
        }
    }
    answers.sort_by_key(|(i, _, _)| *i);
    for (_, addr, result) in answers {
        match result {
            Ok(theirs) => {
                into.count += theirs.count;
                into.rows.extend(theirs.rows.into_iter().map(|mut r| {
                    r.node.clone_from(&addr);
                    r
                }));
            }
            Err(why) => into.unreachable.push((addr, why)),
        }
    }
}

async fn ask(cluster: &Cluster, addr: &str, body: &[u8]) -> Result<LocalSubscribers, String> {
    let Some(peer) = cluster.peer(addr) else {
        return Err(format!("{addr} is no longer a member"));
    };
    let mut request = Vec::with_capacity(body.len() + 160);
    distro::write_peer_request(
        &mut request,
        Method::Put,
        distro::SUBSCRIBERS_PATH,
        addr,
        body,
    );
    let a = peer.relay_link().call(request).await?;
    if a.status != 200 {
        return Err(format!(
            "answered {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ));
    }
    distro::decode_answer::<LocalSubscribers>(&a.body, RESPONSE_MAX_BODY).map_err(|e| e.to_string())
}
