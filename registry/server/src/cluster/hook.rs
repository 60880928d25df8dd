//! The cluster as the doors see it: [`Hook`] implements
//! `state::ClusterHook`, and the server installs it in `App::cluster` at
//! start. The HTTP door asks it before every handler (readiness, relaying,
//! Raft's leader, the cluster's own endpoints), the gRPC door reports
//! connection changes to it, the sweeper and the operator endpoints ask
//! what it knows. No door names this module; it is the one way in.

use std::sync::Arc;

use registry_core::{Millis, ServiceKey};
use registry_proto::distro::SubscribersQuery;
use registry_proto::naming::route::Route;
use tokio_util::sync::CancellationToken;

use super::members::{MemberState, Owner};
use super::Cluster;
use crate::health::Verdicts;
use crate::hub::Connection;
use crate::reply::{Failure, Verdict};
use crate::state::{App, ClusterHook, Exchange, PeerSubscribers};
use registry_proto::prometheus::Exposition;

/// The cluster, plugged into the doors.
pub struct Hook(pub Arc<Cluster>);

impl ClusterHook for Hook {
    fn intercept(
        &self,
        ex: &Exchange<'_>,
        route: Route,
        body: &mut Vec<u8>,
    ) -> Result<Verdict, Failure> {
        let verdict =
            super::relay::intercept(ex.app, &self.0, route, ex.request, ex.peer, &ex.params)?;
        match verdict {
            Verdict::Local if route.is_cluster() => {
                super::api::handle(ex, &self.0, route, body).map(Verdict::Answer)
            }
            v => Ok(v),
        }
    }

    fn connection_changed(&self, app: &App, conn: &Connection) {
        super::clients::native_changed(app, &self.0, conn);
    }

    fn connection_closed(&self, app: &App, conn: &Connection) {
        super::clients::native_closed(app, &self.0, conn);
    }

    fn may_act_as_owner(&self, now: Millis) -> bool {
        self.0.may_act_as_owner(now)
    }

    fn owns(&self, key: &ServiceKey) -> bool {
        self.0.owns(key)
    }

    fn is_ready(&self) -> bool {
        self.0.is_ready()
    }

    fn me(&self) -> &str {
        &self.0.config.me
    }

    fn members(&self) -> Vec<(String, &'static str)> {
        self.0
            .member_states()
            .into_iter()
            .map(|(addr, state, _, _)| (addr, MemberState::name(state)))
            .collect()
    }

    fn raft_leader(&self) -> Option<Option<(String, u64)>> {
        let raft = self.0.consensus()?;
        let p = raft.position();
        Some(
            p.leader
                .and_then(|id| raft.address(id))
                .map(|addr| (addr.to_owned(), p.term)),
        )
    }

    fn render(&self, e: &mut Exposition<'_>) {
        self.0.render(e);
    }

    fn health_verdicts(&self) -> Option<Arc<dyn Verdicts>> {
        self.0
            .raft_enabled()
            .then(|| Arc::new(super::raft::LeaderChecks(self.0.clone())) as Arc<dyn Verdicts>)
    }

    fn responsible_for(&self, tag: &str) -> String {
        match self.0.owner(tag) {
            Owner::Peer(addr) => addr.to_string(),
            _ => self.0.config.me.clone(),
        }
    }

    fn peer_subscribers(&self, query: SubscribersQuery) -> PeerSubscribers {
        Box::pin(super::subscribers::ask_peers(self.0.clone(), query))
    }

    fn connection_places(&self) -> std::collections::HashSet<registry_core::Place> {
        self.0.clients.places()
    }

    fn connection_counts(&self) -> (usize, usize) {
        self.0.clients.counts()
    }

    fn start(
        &self,
        app: &Arc<App>,
        cancel: &CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        super::start(app, self.0.clone(), cancel)
    }
}
