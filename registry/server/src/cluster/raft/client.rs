//! Client writes of persistent data over 1.x HTTP in a Raft cluster: which
//! requests are Raft commands, and where each goes (served here on the
//! leader, where the write path proposes its typed command; relayed
//! unchanged to the leader from a follower; refused when there is none).
//!
//! Runs from the cluster's request filter ([`crate::cluster::relay`])
//! before Distro's owner relay: persistent data has one writer, the leader,
//! whatever service it belongs to.

use std::sync::Arc;

use registry_proto::http1::Request;
use registry_proto::naming::route::Route;
use registry_proto::params::{parse_bool, Params};

use super::Consensus;
use crate::cluster::{relay, Cluster};
use crate::reply::{Failure, Reply, Verdict};
use crate::state::App;

/// Whether a request writes persistent data (a Raft command).
fn is_persistent_write(app: &App, route: Route, params: &Params<'_>) -> bool {
    let ephemeral = || params.optional("ephemeral").map(parse_bool);
    match route {
        Route::InstanceRegister | Route::InstanceUpdate | Route::InstanceDeregister => {
            ephemeral() == Some(false)
        }
        Route::InstancePatch => match ephemeral() {
            Some(e) => !e,
            // Without `ephemeral` the write path patches the ephemeral
            // instance at the address if there is one, else the
            // persistent one; the leader decides again and pins it in
            // the command, so every node applies the same choice.
            None => persistent_patch(app, params).unwrap_or(false),
        },
        Route::ServiceCreate | Route::ServiceUpdate | Route::ServiceDelete => true,
        _ => false,
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

/// Handles a persistent write; `None` when the request is not one. On the
/// leader it is served here: the handler builds the typed command and the
/// write path proposes it (see [`crate::write`]).
pub(crate) fn intercept(
    app: &App,
    cluster: &Arc<Cluster>,
    consensus: &Arc<Consensus>,
    route: Route,
    request: &Request<'_>,
    params: &Params<'_>,
    relayed: bool,
) -> Option<Result<Verdict, Failure>> {
    if !is_persistent_write(app, route, params) {
        return None;
    }
    let stats = &consensus.shared.stats;
    let position = consensus.position();
    let refuse = |text: String| {
        stats.refused.inc();
        Some(Err(Failure::new(503, text)))
    };
    if position.leader == Some(consensus.id) {
        return Some(Ok(Verdict::Local));
    }
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
    Some(Ok(Verdict::Answer(forward(
        cluster,
        consensus,
        request,
        leader.to_owned(),
    ))))
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
