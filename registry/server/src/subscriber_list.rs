//! A service's push subscribers as the doors list them: this node's own
//! table, and with `aggregation` every other member's too (what Nacos's
//! `NamingSubscriberServiceAggregationImpl` does). The asking of the other
//! members is the cluster's (`cluster::subscribers`, through
//! `state::ClusterHook::peer_subscribers`); this module knows no door and
//! no cluster type.

use registry_core::{ServiceKey, Subscriber, Subscription};
use registry_proto::distro::{LocalSubscribers, SubscriberRow, SubscribersQuery};

use crate::state::App;

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
        .map_or_else(|| app.config.listen.to_string(), |c| c.me().to_owned());
    for r in &mut mine.rows {
        r.node.clone_from(&me);
    }
    let query = SubscribersQuery {
        ns: key.namespace().to_owned(),
        service: key.grouped_name().to_owned(),
        limit,
    };
    let asking = cluster.map(|c| c.peer_subscribers(query));
    async move {
        let mut gathered = Gathered {
            count: mine.count,
            rows: mine.rows,
            unreachable: Vec::new(),
        };
        for (addr, result) in match asking {
            Some(asking) => asking.await,
            None => Vec::new(),
        } {
            match result {
                Ok(theirs) => {
                    gathered.count += theirs.count;
                    gathered.rows.extend(theirs.rows.into_iter().map(|mut r| {
                        r.node.clone_from(&addr);
                        r
                    }));
                }
                Err(why) => gathered.unreachable.push((addr, why)),
            }
        }
        gathered
    }
}
