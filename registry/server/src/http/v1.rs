//! The v1 endpoints past the 1.x core that real tools call: metadata
//! batches, health updates, switch updates, the server list, the Raft
//! leader, the console's liveness and namespace writes, a service's
//! subscribers on every member. Plain-text errors, as the rest of v1. (The
//! catalog and the namespace list, which the 1.x/2.x console and ops
//! scripts read, are served by [`crate::console`].)

use registry_proto::http1::Method;
use registry_proto::naming::route::Route;
use serde_json::json;

use super::error::Failure;
use super::writes::{self, Door};
use super::{Exchange, Reply, Scratch};

/// Answers a v1 route of this module.
pub(crate) fn handle(
    ex: &Exchange<'_>,
    route: Route,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    match route {
        Route::OperatorSwitchesUpdate => switch(ex),
        Route::OperatorServers => servers(ex, scratch),
        Route::RaftLeader => raft_leader(ex, scratch),
        Route::Liveness => Ok(Reply::Text("OK")),
        Route::NamespacesCreate => super::namespace::v1(ex, Method::Post, scratch),
        Route::NamespacesUpdate => super::namespace::v1(ex, Method::Put, scratch),
        Route::NamespacesDelete => super::namespace::v1(ex, Method::Delete, scratch),
        Route::MetadataBatchUpdate => writes::metadata_batch(ex, scratch, false, Door::Text),
        Route::MetadataBatchDelete => writes::metadata_batch(ex, scratch, true, Door::Text),
        Route::HealthUpdate => writes::health(ex, scratch, Door::Text),
        Route::ServiceSubscribers => subscribers(ex),
        other => Err(Failure::new(404, format!("no such api: {}", other.name()))),
    }
}

/// `PUT /operator/switches` (`OperatorController.updateSwitch`).
fn switch(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let entry = ex.params.required("entry")?;
    let value = ex.params.required("value")?;
    super::operator::update_switch(ex.app, entry, value)
        .map_err(|e| Failure::new(400, e.text()))?;
    Ok(Reply::Text("ok"))
}

fn write_json(scratch: &mut Scratch, v: &serde_json::Value) -> Result<Reply, Failure> {
    // A `Value` always serialises.
    let _ = serde_json::to_writer(&mut scratch.body, v);
    Ok(Reply::Json)
}

/// This node's address as members name it.
fn me(ex: &Exchange<'_>) -> String {
    match &ex.app.cluster {
        Some(c) => c.me().to_owned(),
        None => ex.app.config.listen.to_string(),
    }
}

/// `GET /operator/servers` (`OperatorController.getHealthyServerList`):
/// `{"servers":[Member]}`, only the UP ones with `healthy=true`.
fn servers(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let healthy_only = ex.params.bool_or("healthy", false);
    let members: Vec<(String, &'static str)> = match &ex.app.cluster {
        Some(c) => c.members(),
        None => vec![(me(ex), "UP")],
    };
    let servers: Vec<serde_json::Value> = members
        .iter()
        .filter(|(_, state)| !healthy_only || *state == "UP")
        .map(|(addr, state)| {
            let (ip, port) = addr.rsplit_once(':').unwrap_or((addr, "8848"));
            json!({
                "ip": ip,
                "port": port.parse::<u16>().unwrap_or(8848),
                "state": state,
                "extendInfo": {},
                "address": addr,
                "failAccessCnt": 0,
            })
        })
        .collect();
    write_json(scratch, &json!({ "servers": servers }))
}

/// `GET /raft/leader` (1.x `RaftController.getLeader`): `{"leader":"<RaftPeer
/// JSON>"}`, answered from our Raft status; a node without Raft is its own
/// leader (as a standalone Nacos is), a Raft node that knows no leader
/// answers `null`.
fn raft_leader(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let raft = ex.app.cluster.as_ref().and_then(|c| c.raft_leader());
    let peer = match raft {
        None => Some(json!({
            "ip": me(ex), "voteFor": me(ex), "term": 0,
            "leaderDueMs": 0, "heartbeatDueMs": 0, "state": "LEADER",
        })),
        Some(leader) => leader.map(|(addr, term)| {
            json!({
                "ip": addr, "voteFor": addr, "term": term,
                "leaderDueMs": 0, "heartbeatDueMs": 0, "state": "LEADER",
            })
        }),
    };
    let leader = peer.map(|p| serde_json::Value::String(p.to_string()));
    write_json(scratch, &json!({ "leader": leader }))
}

/// The cluster's routes on a registry without `--members` (with them the
/// cluster answers them before any handler, see `state::ClusterHook`): it
/// is its own only member and always ready; peer endpoints do not exist
/// for it.
pub(super) fn single_node(
    ex: &Exchange<'_>,
    route: Route,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    use registry_proto::distro::{self, MemberView};
    match route {
        Route::ClusterNodes => {
            let me = ex.app.config.listen.to_string();
            distro::encode_members(
                &mut scratch.body,
                &[MemberView {
                    address: &me,
                    state: "UP",
                    last_refresh_ms: crate::clock::Clock::wall_ms(),
                    fail_count: 0,
                    raft: None,
                    clients: Some(registry_proto::distro::ClientCounts {
                        connections: ex.app.grpc.hub.len() as u64,
                        native_clients: 0,
                        synced_clients: 0,
                    }),
                }],
            );
            Ok(Reply::Json)
        }
        Route::Readiness => Ok(Reply::Text("OK")),
        Route::ClusterMemberAdd | Route::ClusterMemberRemove => Err(Failure::new(
            400,
            "this registry runs as a single node (no --members): it has no members to change",
        )),
        _ => Err(Failure::new(
            403,
            "this registry runs as a single node (no --members): peer requests are refused",
        )),
    }
}

/// Most subscribers on one page.
const MAX_SUBSCRIBERS_PAGE: usize = 1_000;

/// `GET /service/subscribers` (`ServiceController.subscribers`, the
/// console's list): a page of the service's push subscribers, with
/// `aggregation` (default true, as Nacos) every member's, each row naming
/// its `node`; members that did not answer in time are listed in
/// `unreachable` (`crate::subscriber_list`).
fn subscribers(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let wire =
        registry_proto::naming::service::ServiceKey::parse(&ex.params, &ex.app.parse_limits)?;
    let key = registry_core::ServiceKey::new(wire.namespace_id, &wire.service.grouped());
    let page_no = crate::console::bounded(&ex.params, "pageNo", 1, 100_000)?;
    let page_size = crate::console::bounded(&ex.params, "pageSize", 100, MAX_SUBSCRIBERS_PAGE)?;
    let everywhere = ex.params.bool_or("aggregation", true);
    let offset = (page_no - 1).saturating_mul(page_size);
    let gathering =
        crate::subscriber_list::gather(ex.app, &key, offset.saturating_add(page_size), everywhere);
    Ok(Reply::Later(Box::pin(async move {
        let g = gathering.await;
        let page: Vec<_> = g.rows.iter().skip(offset).take(page_size).collect();
        let unreachable: Vec<_> = g
            .unreachable
            .iter()
            .map(|(node, why)| json!({"node": node, "error": why}))
            .collect();
        let body = json!({
            "count": g.count,
            "subscribers": page,
            "unreachable": unreachable,
        });
        Ok(super::Done::Json(
            serde_json::to_vec(&body).unwrap_or_default(),
        ))
    })))
}
