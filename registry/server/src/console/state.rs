//! `GET /nacos/v1/console/server/state`: what the console's header and live
//! view show about the server itself. Named like Nacos's console endpoint,
//! which also answers without a login so the page knows whether to ask
//! for one; it reveals no more than the open `/metrics` does.

use serde::Serialize;

use super::catalog::encode;
use crate::reply::Failure;
use crate::state::App;

#[derive(Serialize)]
struct ServerState {
    version: &'static str,
    standalone_mode: &'static str,
    function_mode: &'static str,
    auth_enabled: bool,
    services: usize,
    instances: usize,
    subscribers: u64,
    /// Resident set size in bytes; `null` where `/proc` is not readable.
    rss_bytes: Option<u64>,
    uptime_ms: u64,
}

pub(super) fn server_state(app: &App, body: &mut Vec<u8>) -> Result<(), Failure> {
    let stats = app.store.stats();
    encode(
        body,
        &ServerState {
            version: env!("CARGO_PKG_VERSION"),
            standalone_mode: if app.cluster.is_some() {
                "cluster"
            } else {
                "standalone"
            },
            function_mode: "naming",
            auth_enabled: app.auth.is_some(),
            services: stats.services,
            instances: stats.instances,
            subscribers: app.metrics.push.subscribers.get(),
            rss_bytes: resident_bytes(),
            uptime_ms: app.clock.now().0,
        },
    )
}

/// `VmRSS` of this process, from `/proc/self/status` (no `unsafe`
/// `sysconf` call needed for the page size).
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_its_own_rss() {
        let rss = super::resident_bytes().expect("linux /proc");
        assert!(rss > 1024 * 1024, "{rss}");
    }
}
