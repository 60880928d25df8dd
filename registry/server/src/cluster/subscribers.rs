//! A service's push subscribers over the whole cluster (what Nacos's
//! `aggregation=true` does: `NamingSubscriberServiceAggregationImpl` asks
//! every other member for its local subscribers and merges the answers).
//!
//! Subscribers live on the node they subscribed to (a 1.x client polls one
//! node, a 2.x connection is held by one node), so a list read on one node
//! misses the others' unless it asks them. `subscriber_list::gather` reads
//! this node's own table and asks every other member at once ([`ask_peers`]) over the peer route
//! (`PUT /nacos/v1/ns/distro/subscribers`, [`answer`]), each bounded by
//! [`PEER_WAIT`]; a member that does not answer in time is named in the
//! list's `unreachable` rather than failing it.

use std::sync::Arc;
use std::time::Duration;

use registry_core::ServiceKey;
use registry_proto::distro::{self, LocalSubscribers, SubscribersQuery};
use registry_proto::http1::{Method, RESPONSE_MAX_BODY};

use super::Cluster;
use crate::state::App;
use crate::subscriber_list::PEER_ROWS;

/// Longest wait for one member's answer.
pub const PEER_WAIT: Duration = Duration::from_secs(2);

/// The peer route: this node's own subscribers for the asking member.
pub(crate) fn answer(app: &App, query: &SubscribersQuery) -> LocalSubscribers {
    let key = ServiceKey::new(&query.ns, &query.service);
    crate::subscriber_list::local(app, &key, query.limit.min(PEER_ROWS))
}

/// Asks every other member for its own subscribers of `query`'s service,
/// at once, each bounded by [`PEER_WAIT`]; the answers in member order.
pub(crate) async fn ask_peers(
    cluster: Arc<Cluster>,
    query: SubscribersQuery,
) -> Vec<(String, Result<LocalSubscribers, String>)> {
    let body = Arc::new(distro::encode(&cluster.envelope(query)));
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
    answers
        .into_iter()
        .map(|(_, addr, result)| (addr, result))
        .collect()
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
