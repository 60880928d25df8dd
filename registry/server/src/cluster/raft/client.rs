//! Client writes of persistent data in a Raft cluster: which requests are
//! Raft commands, and where each goes (proposed here on the leader, relayed
//! to the leader from a follower, refused when there is no leader).
//!
//! Runs from the cluster's request filter ([`crate::cluster::relay`])
//! before Distro's owner relay: persistent data has one writer, the leader,
//! whatever service it belongs to.

use std::sync::Arc;

use registry_proto::distro::{self, Relayed};
use registry_proto::http1::{ContentType, Request};
use registry_proto::naming::route::Route;
use registry_proto::naming::ServiceName;
use registry_proto::params::{parse_bool, Params};
use registry_proto::raft::{Command, WriteOp};

use super::Consensus;
use crate::cluster::{relay, Cluster};
use crate::http::{error::Failure, Done, Reply};
use crate::state::App;

/// The command a request is, when it writes persistent data.
fn write_op(app: &App, route: Route, params: &Params<'_>) -> Option<(WriteOp, bool)> {
    let ephemeral = || params.optional("ephemeral").map(parse_bool);
    match route {
        Route::InstanceRegister if ephemeral() == Some(false) => Some((WriteOp::Register, false)),
        Route::InstanceUpdate if ephemeral() == Some(false) => Some((WriteOp::Update, false)),
        Route::InstanceDeregister if ephemeral() == Some(false) => {
            Some((WriteOp::Deregister, false))
        }
        Route::InstancePatch => match ephemeral() {
            Some(false) => Some((WriteOp::Patch, false)),
            Some(true) => None,
            // Without `ephemeral` the handler patches the ephemeral
            // instance at the address if there is one, else the persistent
            // one: decide that here, once, and pin it in the command so
            // every node applies the same choice.
            None => {
                let persistent = persistent_patch(app, params)?;
                persistent.then_some((WriteOp::Patch, true))
            }
        },
        Route::ServiceCreate => Some((WriteOp::ServiceCreate, false)),
        Route::ServiceUpdate => Some((WriteOp::ServiceUpdate, false)),
        Route::ServiceDelete => Some((WriteOp::ServiceDelete, false)),
        _ => None,
    }
}

/// Whether a patch without `ephemeral` targets a persistent instance.
fn persistent_patch(app: &App, params: &Params<'_>) -> Option<bool> {
    let key =
        registry_proto::naming::instance::InstanceKey::parse(params, &app.parse_limits).ok()?;
    let ip = crate::convert::ip(key.ip).ok()?;
    let name = key.service.grouped();
    let addr = registry_core::InstanceAddr {
        cluster: key.cluster,
        ip,
        port: key.port,
    };
    let svc = registry_core::ServiceRef::new(key.namespace_id, &name);
    app.store.read(svc, |s| {
        s.find(addr, true).is_none() && s.find(addr, false).is_some()
    })
}

/// A request's parameters as one form string: the query, then a form body.
fn params_text(request: &Request<'_>, pin_persistent: bool) -> Result<String, Failure> {
    let mut text = String::with_capacity(request.query.len() + request.body.len() + 16);
    text.push_str(request.query);
    if request.is_form() && !request.body.is_empty() {
        let body = std::str::from_utf8(&request.body)
            .map_err(|_| Failure::new(400, "the form body is not UTF-8"))?;
        if !text.is_empty() {
            text.push('&');
        }
        text.push_str(body);
    }
    if pin_persistent {
        if !text.is_empty() {
            text.push('&');
        }
        text.push_str("ephemeral=false");
    }
    Ok(text)
}

/// Handles a persistent write; `None` when the request is not one.
pub(crate) fn intercept(
    app: &App,
    cluster: &Arc<Cluster>,
    consensus: &Arc<Consensus>,
    route: Route,
    request: &Request<'_>,
    params: &Params<'_>,
    relayed: bool,
) -> Option<Result<Reply, Failure>> {
    let (op, pin) = write_op(app, route, params)?;
    let stats = &consensus.shared.stats;
    let position = consensus.position();
    let refuse = |text: String| {
        stats.refused.inc();
        Some(Err(Failure::new(503, text)))
    };
    if position.leader != Some(consensus.id) {
        if relayed {
            // Forwarded once already: never bounce a write between nodes.
            return refuse(
                "this node is no longer the Raft leader; the write was not applied, please retry"
                    .into(),
            );
        }
        let Some(leader) = position.leader.and_then(|id| consensus.address(id)) else {
            return refuse(
                "no Raft leader: this node cannot reach a majority of the cluster, so it accepts \
                 no persistent writes; the write was not applied"
                    .into(),
            );
        };
        return Some(Ok(forward(cluster, consensus, request, leader.to_owned())));
    }
    let text = match params_text(request, pin) {
        Ok(t) => t,
        Err(f) => return Some(Err(f)),
    };
    // A request whose service cannot be named is refused here, not logged.
    if ServiceName::from_params(params, &app.parse_limits).is_err() {
        return None;
    }
    let command = Command::Write {
        op,
        params: text,
        agent: request.user_agent().map(str::to_owned),
    };
    let weight = serde_json::to_vec(&command).map_or(usize::MAX, |v| v.len());
    if weight > consensus.max_command {
        stats.refused.inc();
        return Some(Err(Failure::new(
            413,
            format!(
                "a persistent write of {weight} bytes exceeds the cluster log's limit of {} bytes per write",
                consensus.max_command
            ),
        )));
    }
    let outcome = consensus.propose(command, weight);
    Some(Ok(Reply::Later(Box::pin(async move {
        match outcome.await {
            Ok(Ok(o)) => {
                let ct = if o.json {
                    ContentType::Json
                } else {
                    ContentType::Text
                };
                Ok(Done::Relayed(o.status, ct, o.body.into_bytes()))
            }
            Ok(Err(text)) => Err(Failure::new(503, text)),
            Err(_) => Err(Failure::new(503, "the server is shutting down")),
        }
    }))))
}

/// Relays a persistent write to the leader and returns its answer as it came.
fn forward(
    cluster: &Arc<Cluster>,
    consensus: &Arc<Consensus>,
    request: &Request<'_>,
    leader: String,
) -> Reply {
    let bytes = relay::envelope(cluster, request, &leader);
    let cluster = cluster.clone();
    let consensus = consensus.clone();
    Reply::Later(Box::pin(async move {
        match relay::send(&cluster, &leader, bytes).await? {
            Ok(a) => {
                consensus.shared.stats.forwarded.inc();
                Ok(relay::answered(a))
            }
            Err(e) if e.starts_with("connecting to") => {
                // Never sent: the leader cannot have applied it.
                consensus.shared.stats.refused.inc();
                Err(Failure::new(
                    503,
                    format!("the Raft leader {leader} is unreachable ({e}); the write was not applied, please retry"),
                ))
            }
            Err(e) => {
                consensus.shared.stats.refused.inc();
                Err(Failure::new(
                    503,
                    format!(
                        "no answer from the Raft leader {leader}: {e}; the write was not acknowledged, please retry"
                    ),
                ))
            }
        }
    }))
}

/// A persistent instance written over the gRPC API (Nacos 2.x) in a Raft
/// cluster: the same command an HTTP register or deregister would be,
/// proposed here on the leader or relayed to it as an HTTP request.
///
/// # Errors
/// The refusal text (no leader, not committed, refused by the store).
pub(crate) async fn grpc_write(
    cluster: &Arc<Cluster>,
    consensus: &Arc<Consensus>,
    register: bool,
    svc: registry_core::ServiceRef<'_>,
    spec: &registry_core::InstanceSpec<'_>,
) -> Result<(), String> {
    use registry_proto::params::percent_encode_into;
    let mut q = String::with_capacity(256);
    let mut push = |k: &str, v: &str| {
        if !q.is_empty() {
            q.push('&');
        }
        q.push_str(k);
        q.push('=');
        percent_encode_into(&mut q, v);
    };
    push("namespaceId", svc.namespace);
    push("serviceName", svc.name);
    push("clusterName", spec.addr.cluster);
    push("ip", &spec.addr.ip.to_string());
    push("port", &spec.addr.port.to_string());
    push("ephemeral", "false");
    if register {
        push("weight", &spec.weight.to_string());
        push("healthy", if spec.healthy { "true" } else { "false" });
        push("enabled", if spec.enabled { "true" } else { "false" });
        let metadata: std::collections::BTreeMap<&str, &str> = spec.metadata.iter().collect();
        if !metadata.is_empty() {
            push(
                "metadata",
                &serde_json::to_string(&metadata).unwrap_or_default(),
            );
        }
    }
    let op = if register {
        WriteOp::Register
    } else {
        WriteOp::Deregister
    };
    let position = consensus.position();
    let answer = if position.leader == Some(consensus.id) {
        let command = Command::Write {
            op,
            params: q,
            agent: None,
        };
        let weight = serde_json::to_vec(&command).map_or(usize::MAX, |v| v.len());
        if weight > consensus.max_command {
            return Err(format!(
                "a persistent write of {weight} bytes exceeds the cluster log's limit of {} bytes",
                consensus.max_command
            ));
        }
        match consensus.propose(command, weight).await {
            Ok(Ok(o)) => (o.status, o.body),
            Ok(Err(text)) => return Err(text),
            Err(_) => return Err("the server is shutting down".into()),
        }
    } else {
        let Some(leader) = position.leader.and_then(|id| consensus.address(id)) else {
            consensus.shared.stats.refused.inc();
            return Err(
                "no Raft leader: this node cannot reach a majority of the cluster; \
                        the write was not applied"
                    .into(),
            );
        };
        let mut bytes = Vec::with_capacity(256 + q.len());
        distro::write_relayed(
            &mut bytes,
            &Relayed {
                method: if register { "POST" } else { "DELETE" },
                path: "/nacos/v1/ns/instance",
                query: &q,
                user_agent: None,
                content_type: None,
                body: b"",
            },
            leader,
            &cluster.config.me,
        );
        let Some(peer) = cluster.peer(leader) else {
            return Err(format!("{leader} is not a member"));
        };
        match peer.relay_link().call(bytes).await {
            Ok(a) => {
                consensus.shared.stats.forwarded.inc();
                (a.status, String::from_utf8_lossy(&a.body).into_owned())
            }
            Err(e) => {
                consensus.shared.stats.refused.inc();
                return Err(format!(
                    "no answer from the Raft leader {leader}: {e}; the write was not acknowledged"
                ));
            }
        }
    };
    match answer {
        (200, _) => Ok(()),
        (status, body) => Err(format!("{status}: {body}")),
    }
}
