//! `registry`: the Nacos-1.x-compatible naming server.

use std::sync::Arc;

use clap::Parser;
use registry_server::{run_app, shutdown, App, Config, Listeners};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    if let Err(e) = config.validate() {
        eprintln!("registry: {e}");
        std::process::exit(2);
    }
    init_tracing(&config.log_format);
    let listeners = Listeners::bind(&config)?;
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if config.workers > 0 {
        runtime.worker_threads(config.workers);
    }
    let runtime = runtime.enable_all().build()?;
    // Loads the data directory before anything is served; connections
    // arriving meanwhile wait in the listen backlog.
    let app = Arc::new(App::new(config)?);
    // Printed (not logged) so scripts starting on port 0 can read it; it
    // also says the persistent state is loaded.
    println!(
        "registry listening on http://{} (udp {})",
        listeners.http_addr(),
        listeners.udp_addr()
    );
    runtime.block_on(run_app(app, listeners, shutdown::signal()))
}

fn init_tracing(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("REGISTRY_LOG")
        .unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}
