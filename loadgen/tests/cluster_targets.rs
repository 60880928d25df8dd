//! `--target A,B` (issue 10, item 6): loadgen spreads its simulated clients over every
//! listed server and fails over when one dies, as Nacos clients do. Two real embedded
//! registries on loopback port 0 (not a cluster: each holds what reached it); the
//! first is stopped in the middle of the steady phase. The connections that were on
//! it move to the second, so the run ends verified against the survivor: every
//! instance present after the steady phase, every subscriber converged, none left
//! after the drain (without the fail-over, the drain's deregistrations on the dead
//! server's connections would never complete). No deregistrations in the steady mix:
//! on two independent registries one sent to the first would leave the instance on
//! the second until it expires.

use crate::support::two_servers;

use std::net::SocketAddr;

use loadgen::target::{ControlClient, TargetConfig};
use loadgen::RunConfig;

fn instance_count(addr: SocketAddr) -> Option<u64> {
    ControlClient::new(addr)
        .metrics()
        .ok()
        .map(|m| m.instance_count)
}

#[test]
fn clients_spread_over_the_listed_servers_and_fail_over_when_one_stops() {
    let (first, second) = (two_servers::registry(), two_servers::registry());
    let (a, b) = (first.http_addr, second.http_addr);
    let out = two_servers::scratch("failover");
    let profile = out.join("failover.toml");
    std::fs::write(
        &profile,
        r#"
name = "failover"
thresholds = []
[fleet]
services = 20
instances = 200
subscribers = 20
watched_services = 5
beat_interval = "1s"
[load]
rate = 1000
[steady]
duration = "5s"
query_rate = 50
[drain]
rate = 1000
[subscribers]
poll_interval = "1s"
[connections]
count = 8
source_ips = 2
pipeline = 1
timeout = "2s"
[generator]
workers = 1
settle_timeout = "10s"
"#,
    )
    .unwrap();
    let config = RunConfig {
        profile: profile.display().to_string(),
        target: TargetConfig {
            url: Some(format!("http://{a},http://{b}")),
            ..RunConfig::default().target
        },
        out,
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let run = std::thread::spawn(move || loadgen::run(config));

    // Both servers get clients (the connections alternate between them, so each holds
    // about half the fleet once the load phase is done); then the first one stops.
    two_servers::wait_for_spread(instance_count, (a, b), 80);
    first.stop().unwrap();

    let report = run.join().unwrap().expect("the run completes");
    let verification = report.verification.as_ref().unwrap();
    assert!(verification.ok, "verification: {}", verification.detail);
    assert!(
        report.push.as_ref().is_some_and(|p| p.converged),
        "{:?}",
        report.push
    );
    // Only what was in flight on the stopped server when it stopped fails: without
    // the fail-over, the connections to it would fail about half of everything sent
    // for the rest of the run.
    let (count, errors) = report
        .operations
        .iter()
        .fold((0, 0), |(c, e), op| (c + op.count, e + op.errors));
    eprintln!("{errors} errors in {count} operations");
    assert!(
        errors * 20 <= count,
        "{errors} errors in {count} operations: no fail-over?"
    );
    let reregister = report.operation("reregister").map_or(0, |o| o.count);
    assert!(
        reregister > 0,
        "clients of the stopped server re-registered on the survivor"
    );
    assert_eq!(instance_count(b), Some(0), "the drain went to the survivor");
    second.stop().unwrap();
}
