//! A registry running inside another program: on its own threads and
//! runtime, so its CPU time can be told apart from the host's (its threads
//! are named `registry-*`), stopped through the same ordered shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context as _;
use tokio::sync::oneshot;

use crate::{App, Config, Listeners};

/// Prefix of the names of an embedded registry's threads.
pub const THREAD_PREFIX: &str = "registry-";

/// A running embedded registry. Dropping it stops the registry.
pub struct Embedded {
    /// The HTTP address it serves on.
    pub http_addr: SocketAddr,
    /// The UDP address pushes come from.
    pub udp_addr: SocketAddr,
    /// The gRPC (Nacos 2.x) address.
    pub grpc_addr: SocketAddr,
    /// The DNS door's address (UDP and TCP), with `--dns-listen`.
    pub dns_addr: Option<SocketAddr>,
    /// The server state: store, metrics, configuration.
    pub app: Arc<App>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Embedded {
    /// Binds and starts a registry with `config` on `workers` threads of
    /// its own (at least one).
    ///
    /// # Errors
    /// When binding or building the runtime fails.
    pub fn start(config: Config) -> anyhow::Result<Embedded> {
        config.validate().map_err(anyhow::Error::msg)?;
        let listeners = Listeners::bind(&config)?;
        let (http_addr, udp_addr) = (listeners.http_addr(), listeners.udp_addr());
        let grpc_addr = listeners.grpc_addr();
        let dns_addr = listeners.dns_addr();
        let workers = if config.workers == 0 {
            1
        } else {
            config.workers
        };
        let app = Arc::new(App::new(config)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name_fn(|| {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static N: AtomicUsize = AtomicUsize::new(0);
                format!("{THREAD_PREFIX}{}", N.fetch_add(1, Ordering::Relaxed))
            })
            .enable_all()
            .build()
            .context("building the registry runtime")?;
        let (stop, stopped) = oneshot::channel::<()>();
        let served = app.clone();
        let thread = std::thread::Builder::new()
            .name(format!("{THREAD_PREFIX}main"))
            .spawn(move || {
                runtime.block_on(crate::run_app(served, listeners, async {
                    let _ = stopped.await;
                }))
            })
            .context("starting the registry thread")?;
        Ok(Embedded {
            http_addr,
            udp_addr,
            grpc_addr,
            dns_addr,
            app,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the registry and waits for its ordered shutdown.
    ///
    /// # Errors
    /// What the server returned.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> anyhow::Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("registry thread panicked"))?,
            None => Ok(()),
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}
