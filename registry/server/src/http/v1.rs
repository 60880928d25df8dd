//! The v1 endpoints past the 1.x core that real tools call: metadata
//! batches, health updates, switch updates, the server list, the Raft
//! leader, the catalog the 1.x/2.x console and ops scripts read, the
//! console's liveness and namespaces. Plain-text errors, as the rest of v1.

use registry_core::ServiceRef;
use registry_proto::http1::Method;
use registry_proto::naming::route::Route;
use registry_proto::naming::ServiceName;
use registry_proto::openapi::service::ServiceView;
use serde_json::json;

use super::error::Failure;
use super::query::{self, Selection};
use super::{Exchange, Reply, Scratch};

/// Answers a v1 route of this module.
pub(crate) fn handle(ex: &Exchange<'_>, route: Route, scratch: &mut Scratch) -> Result<Reply, Failure> {
    match route {
        Route::OperatorSwitchesUpdate => switch(ex),
        Route::OperatorServers => servers(ex, scratch),
        Route::RaftLeader => raft_leader(ex, scratch),
        Route::CatalogServices => catalog_services(ex, scratch),
        Route::CatalogInstances => catalog_instances(ex, scratch),
        Route::CatalogService => catalog_service(ex, scratch),
        Route::Liveness => Ok(Reply::Text("OK")),
        Route::NamespacesList => super::namespace::v1(ex, Method::Get, scratch),
        Route::NamespacesCreate => super::namespace::v1(ex, Method::Post, scratch),
        Route::NamespacesUpdate => super::namespace::v1(ex, Method::Put, scratch),
        Route::NamespacesDelete => super::namespace::v1(ex, Method::Delete, scratch),
        other => Err(Failure::new(
            501,
            format!("{} is not served yet", other.name()),
        )),
    }
}

/// `PUT /operator/switches` (`OperatorController.updateSwitch`).
fn switch(ex: &Exchange<'_>) -> Result<Reply, Failure> {
    let entry = ex.params.required("entry")?;
    let value = ex.params.required("value")?;
    super::operator::update_switch(ex.app, entry, value).map_err(|e| Failure::new(400, e))?;
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
        Some(c) => c.config.me.clone(),
        None => ex.app.config.listen.to_string(),
    }
}

/// `GET /operator/servers` (`OperatorController.getHealthyServerList`):
/// `{"servers":[Member]}`, only the UP ones with `healthy=true`.
fn servers(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let healthy_only = ex.params.bool_or("healthy", false);
    let members: Vec<(String, &'static str)> = match &ex.app.cluster {
        Some(c) => c
            .member_states()
            .into_iter()
            .map(|(addr, state, _, _)| (addr, state.name()))
            .collect(),
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
    let consensus = ex.app.cluster.as_ref().and_then(|c| c.consensus());
    let peer = match consensus {
        None => Some(json!({
            "ip": me(ex), "voteFor": me(ex), "term": 0,
            "leaderDueMs": 0, "heartbeatDueMs": 0, "state": "LEADER",
        })),
        Some(raft) => {
            let p = raft.position();
            p.leader.and_then(|id| raft.address(id)).map(|addr| {
                json!({
                    "ip": addr, "voteFor": addr, "term": p.term,
                    "leaderDueMs": 0, "heartbeatDueMs": 0, "state": "LEADER",
                })
            })
        }
    };
    let leader = peer.map(|p| serde_json::Value::String(p.to_string()));
    write_json(scratch, &json!({ "leader": leader }))
}

fn page(ex: &Exchange<'_>, name: &'static str, default: usize) -> Result<usize, Failure> {
    match ex.params.optional(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| Failure::new(400, format!("Param '{name}' is illegal, current: {v}"))),
    }
}

/// `GET /catalog/services` (`CatalogController.listDetail`, the console's
/// service list): `{"count":N,"serviceList":[ServiceView]}` of the
/// services whose group and name contain `groupNameParam` and
/// `serviceNameParam`. (`withInstances=true`, the instances of each
/// service, is not served: the 1.x/2.x console and scripts read this form.)
fn catalog_services(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let ns = registry_proto::naming::namespace_id(&ex.params, &ex.app.parse_limits)?;
    let ns = registry_core::namespace::canonical(ns);
    let page_no = page(ex, "pageNo", 1)?;
    let page_size = page(ex, "pageSize", 10)?;
    let group = ex.params.optional_or("groupNameParam", "");
    let name = ex.params.optional_or("serviceNameParam", "");
    let ignore_empty = ex.params.bool_or("hasIpCount", false);
    let found = query::search(ex.app, ns, group, name, ignore_empty);
    let list: Vec<_> = found
        .iter()
        .skip((page_no - 1).saturating_mul(page_size))
        .take(page_size)
        .map(|k| {
            let c = query::counts(ex.app, k);
            let (group, name) = query::split_grouped(k.grouped_name());
            serde_json::to_value(ServiceView {
                name,
                group_name: group,
                cluster_count: c.clusters,
                ip_count: c.instances,
                healthy_instance_count: c.healthy,
                trigger_flag: if c.trigger { "true" } else { "false" },
            })
            .unwrap_or_default()
        })
        .collect();
    write_json(scratch, &json!({ "count": found.len(), "serviceList": list }))
}

/// `GET /catalog/instances` (`CatalogController.instanceList`):
/// `serviceName`*, `clusterName`*, `pageNo`*, `pageSize`* →
/// `{"list":[Instance],"count":N}`, every instance of the cluster.
fn catalog_instances(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let ns = registry_proto::naming::namespace_id(&ex.params, &ex.app.parse_limits)?;
    let service = ServiceName::from_params(&ex.params, &ex.app.parse_limits)?;
    let cluster = ex.params.required("clusterName")?;
    ex.params.required("pageNo")?;
    ex.params.required("pageSize")?;
    let (page_no, page_size) = (page(ex, "pageNo", 1)?, page(ex, "pageSize", 10)?);
    let grouped = service.grouped();
    let rows = query::service(ex.app, ns, &grouped);
    if rows.snapshot.is_none() {
        return Err(Failure::new(400, format!("no service {grouped} found!")));
    }
    let all = rows.each(&[cluster], false, Selection::Admin);
    let shown: Vec<_> = all
        .iter()
        .skip((page_no - 1).saturating_mul(page_size))
        .take(page_size)
        .copied()
        .collect();
    let mut list = Vec::new();
    query::encode_rows(&shown, service, &mut list);
    scratch.body.extend_from_slice(b"{\"list\":");
    scratch.body.extend_from_slice(&list);
    scratch.body.extend_from_slice(format!(",\"count\":{}}}", all.len()).as_bytes());
    Ok(Reply::Json)
}

/// `GET /catalog/service` (`CatalogController.serviceDetail`):
/// `{"service":{name, groupName, protectThreshold, selector, metadata},
/// "clusters":[{name, healthChecker, metadata}]}`.
fn catalog_service(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let ns = registry_proto::naming::namespace_id(&ex.params, &ex.app.parse_limits)?;
    let service = ServiceName::from_params(&ex.params, &ex.app.parse_limits)?;
    let grouped = service.grouped();
    let Some(s) = ex.app.store.snapshot(ServiceRef::new(ns, &grouped)) else {
        return Err(Failure::new(400, format!("service {grouped} is not found!")));
    };
    let metadata: serde_json::Map<String, serde_json::Value> = s
        .metadata()
        .iter()
        .map(|(k, v)| (k.to_owned(), serde_json::Value::from(v)))
        .collect();
    let selector: serde_json::Value = s
        .selector()
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| json!({"type": "none"}));
    let clusters: Vec<_> = s
        .cluster_names()
        .into_iter()
        .map(|c| json!({"name": c, "healthChecker": {"type": "TCP"}, "metadata": {}}))
        .collect();
    write_json(
        scratch,
        &json!({
            "service": {
                "name": service.name,
                "groupName": service.group,
                "protectThreshold": s.protect_threshold(),
                "selector": selector,
                "metadata": metadata,
            },
            "clusters": clusters,
        }),
    )
}
