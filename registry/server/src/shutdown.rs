//! Graceful shutdown: one token, an ordered sequence, a bounded grace period.
//!
//! The order, enforced by `run_app`:
//! 1. stop accepting: the doors of `door::Phase::Accept` (HTTP, gRPC,
//!    DNS); open HTTP connections finish the batch they are on, including
//!    persistent writes waiting for their commit;
//! 2. stop the health checker;
//! 3. stop the lease sweeper;
//! 4. the doors of `door::Phase::Push`: the notifier (the UDP door) sends
//!    its last due pushes, then closes the UDP socket;
//! 5. the durable writer commits what is queued and closes the database;
//! 6. return.
//!
//! The whole sequence runs under the configured grace period; whatever is
//! still running when it ends is abandoned.

use tokio_util::sync::CancellationToken;

/// Resolves on SIGINT or SIGTERM.
pub async fn signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        // Without a SIGTERM handler, Ctrl-C still works.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// The tokens tasks watch, one per shutdown stage.
#[derive(Clone, Debug, Default)]
pub struct Stages {
    /// Stage 1: the doors that accept requests (`door::Phase::Accept`:
    /// HTTP, gRPC, DNS), their acceptors and connections.
    pub http: CancellationToken,
    /// Stage 2: the sweeper.
    pub sweeper: CancellationToken,
    /// Stage 3: the doors of `door::Phase::Push`: the notifier and its UDP
    /// socket.
    pub notifier: CancellationToken,
}
