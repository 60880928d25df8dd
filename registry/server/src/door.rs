//! The door seam: what a door (HTTP, UDP push, gRPC, DNS) is to the server,
//! in the spirit of pingora's `Service`.
//!
//! A door is one [`Door`] value in the list `lib.rs` registers (`DOORS`),
//! and nothing else names it: the server binds every door in list order
//! from the configuration ([`Door::bind`]: its sockets, or `None` when it is
//! off), starts every bound one with the [`Views`] it may use
//! ([`Bound::start`] → [`Running`]), renders its metrics on `/metrics`
//! ([`Running::with_metrics`]) and stops it in its [`Phase`] of the ordered
//! shutdown (`crate::shutdown`): each door watches [`Views::stop`], the token
//! of its phase, and its [`Running`] task ends once it has drained.
//!
//! Binding is apart from starting so that a caller learns the bound
//! addresses (port 0) before the server state is loaded, and connections
//! arriving meanwhile wait in the listen backlog.
//!
//! [`Views`] hands a door narrow parts (the store, the write path, the
//! notifier's view, the configuration, its stop token). The HTTP and gRPC
//! doors' handlers are written against the whole state and take it through
//! [`Views::state`]; a new door takes only the narrow parts, as the DNS
//! door does (`tests/module_graph.rs` holds that `dns` names no `state`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use registry_core::Store;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::metrics::Render;
use crate::notifier::Pushes;
use crate::state::App;
use crate::write::Writer;

/// When a door stops in the ordered shutdown (see `crate::run_app`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// First: stop accepting, finish what is in flight, while the write
    /// path, the sweeper and the notifier still run (HTTP, gRPC, DNS).
    Accept,
    /// After the sweeper: the notifier's last pushes (UDP push).
    Push,
}

/// A door of the server: one value in `lib.rs`'s `DOORS`.
pub trait Door: Sync {
    /// Its name in logs and errors, and how [`crate::Listeners`] finds its
    /// address (`http`, `udp`, `grpc`, `dns`).
    fn name(&self) -> &'static str;

    /// When it stops in the shutdown.
    fn phase(&self) -> Phase {
        Phase::Accept
    }

    /// Binds its sockets from `config` (port 0 picks a free port), or
    /// `None` when the configuration leaves it off.
    ///
    /// # Errors
    /// When an address cannot be bound.
    fn bind(&self, config: &Config) -> anyhow::Result<Option<Bound>>;
}

/// What starts a bound door: registers its sockets with the runtime and
/// spawns its tasks.
type Start = Box<dyn FnOnce(&Views<'_>) -> anyhow::Result<Running> + Send>;

/// A door's sockets, bound and not yet served.
pub struct Bound {
    addr: SocketAddr,
    start: Start,
}

impl Bound {
    /// Sockets bound at `addr` (the door's address: clients, tests and the
    /// start line name it), served by `start`.
    pub fn new(
        addr: SocketAddr,
        start: impl FnOnce(&Views<'_>) -> anyhow::Result<Running> + Send + 'static,
    ) -> Bound {
        Bound {
            addr,
            start: Box::new(start),
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts serving. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// When the sockets cannot be registered with the runtime or the
    /// door's settings are refused.
    pub fn start(self, views: &Views<'_>) -> anyhow::Result<Running> {
        (self.start)(views)
    }
}

/// A started door: the task that ends once it has drained after its stop
/// token fired, and the metric families it adds to `/metrics`.
pub struct Running {
    drained: JoinHandle<()>,
    metrics: Option<Arc<dyn Render>>,
}

impl Running {
    /// A door whose drain is `drained`: spawned now, so that every door of
    /// a phase drains at once when the phase's token fires (it should wait
    /// for that token, then for the door's tasks).
    pub fn spawn(drained: impl Future<Output = ()> + Send + 'static) -> Running {
        Running {
            drained: tokio::spawn(drained),
            metrics: None,
        }
    }

    /// With `metrics` rendered on `/metrics` while the server runs.
    pub fn with_metrics(mut self, metrics: Arc<dyn Render>) -> Running {
        self.metrics = Some(metrics);
        self
    }

    /// Its metric families, if any.
    pub fn metrics(&self) -> Option<Arc<dyn Render>> {
        self.metrics.clone()
    }

    /// Waits until it has drained.
    pub async fn drained(self) {
        let _ = self.drained.await;
    }
}

/// What a door may use of the server, handed to [`Bound::start`].
pub struct Views<'a> {
    app: &'a Arc<App>,
    stop: &'a CancellationToken,
}

impl<'a> Views<'a> {
    /// The views of `app` for a door that stops when `stop` fires.
    pub fn new(app: &'a Arc<App>, stop: &'a CancellationToken) -> Views<'a> {
        Views { app, stop }
    }

    /// The token of the door's [`Phase`]: stop accepting when it fires.
    pub fn stop(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// The store, for reads from its snapshots.
    pub fn store(&self) -> Arc<Store> {
        self.app.store.clone()
    }

    /// The one write path.
    pub fn writer(&self) -> Writer {
        self.app.writer.clone()
    }

    /// The notifier's view (what the UDP push door serves with).
    pub fn pushes(&self) -> Pushes {
        self.app.pushes()
    }

    /// The configuration the server started with (a door's own settings).
    pub fn config(&self) -> &Config {
        &self.app.config
    }

    /// The whole server state, for the doors whose handlers are written
    /// against it (HTTP, gRPC); a new door takes the narrow views above.
    pub fn state(&self) -> &Arc<App> {
        self.app
    }
}
