//! The HTTP door as the server registers it: `--listen`, every connection a
//! task of one tracker, drained before the write path stops (a persistent
//! write waiting for its commit still gets its answer).

use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::door::{Bound, Door, Running};

/// The 1.x HTTP API, the console and `/metrics` (`--listen`, always on).
pub struct HttpDoor;

impl Door for HttpDoor {
    fn name(&self) -> &'static str {
        "http"
    }

    fn bind(&self, config: &Config) -> anyhow::Result<Option<Bound>> {
        use anyhow::Context as _;
        let listener = std::net::TcpListener::bind(config.listen)
            .with_context(|| format!("binding HTTP {}", config.listen))?;
        listener.set_nonblocking(true)?;
        Ok(Some(Bound::new(listener.local_addr()?, move |views| {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            let connections = TaskTracker::new();
            let acceptor = tokio::spawn(super::serve(
                views.state().clone(),
                listener,
                connections.clone(),
                views.stop(),
            ));
            // Stop accepting, then let open connections finish their batch.
            Ok(Running::spawn(async move {
                let _ = acceptor.await;
                connections.close();
                connections.wait().await;
            }))
        })))
    }
}
