//! `registry`: the Nacos-1.x-compatible naming server.

use clap::Parser;
use registry_server::{run, shutdown, Config, Listeners};

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
    // Printed (not logged) so scripts starting on port 0 can read it.
    println!(
        "registry listening on http://{} (udp {})",
        listeners.http_addr(),
        listeners.udp_addr()
    );
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if config.workers > 0 {
        runtime.worker_threads(config.workers);
    }
    runtime
        .enable_all()
        .build()?
        .block_on(run(config, listeners, shutdown::signal()))
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
