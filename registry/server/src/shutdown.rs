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

/// A future that resolves on SIGINT or SIGTERM, with both handlers installed
/// now rather than when it is first polled: a SIGTERM that arrives while
/// the server starts (its doors already answer before `run_app` reaches the
/// await) then shuts it down in order instead of killing it. Call it inside
/// the runtime (`Runtime::enter`).
pub fn signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        let wait = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(term) => {}
            _ = wait(int) => {}
        }
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
