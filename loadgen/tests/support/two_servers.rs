//! Two real embedded registries on loopback port 0 (not a cluster: each holds what
//! reached it), for the tests in which loadgen spreads its clients over
//! `--target A,B` and fails over when the first stops.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One embedded registry with one worker, HTTP and UDP on loopback port 0.
pub fn registry() -> registry_server::Embedded {
    use clap::Parser as _;
    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.workers = 1;
    registry_server::Embedded::start(config).unwrap()
}

/// A fresh directory for the run's profile and report, named for the test.
pub fn scratch(name: &str) -> PathBuf {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    out
}

/// Waits (30 s at most) until both servers hold at least `each` instances by
/// `count`: the clients are spread over both.
pub fn wait_for_spread(
    count: impl Fn(SocketAddr) -> Option<u64>,
    (a, b): (SocketAddr, SocketAddr),
    each: u64,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (on_a, on_b) = (count(a), count(b));
        if on_a.unwrap_or(0) >= each && on_b.unwrap_or(0) >= each {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "instances not spread over both servers: {on_a:?} / {on_b:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
