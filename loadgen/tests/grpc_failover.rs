//! `--protocol grpc --target A,B` (issue 21, item 6): the 2.x fleet spreads its
//! clients over every listed server, and when one stops, its clients reconnect to
//! the next and redo their registrations and subscriptions there, as the Nacos 2.x
//! clients' redo does. Two real embedded registries on loopback port 0 (not a
//! cluster: each holds what its clients registered); the first is stopped in the
//! middle of the steady phase. The run ends verified against the survivor, the
//! only member still answering: every instance present, every subscription
//! converged, none left after the drain. No deregistrations in the steady mix: on
//! two independent registries one sent before the stop would stay on the first.

use crate::support::two_servers;

use loadgen::fleet::Naming;
use loadgen::profile::Profile;
use loadgen::target::{ControlClient, TargetConfig};
use loadgen::RunConfig;

const PROFILE: &str = r#"
name = "grpc-failover"
protocol = "grpc"
thresholds = []
[fleet]
services = 20
instances = 200
subscribers = 20
watched_services = 5
[grpc]
clients = 8
batch = true
[load]
rate = 1000
[steady]
duration = "4s"
register_rate = 20
query_rate = 50
[drain]
rate = 1000
[connections]
timeout = "2s"
[generator]
workers = 1
settle_timeout = "10s"
"#;

#[test]
fn grpc_clients_spread_over_the_listed_servers_and_redo_on_the_survivor() {
    let (first, second) = (two_servers::registry(), two_servers::registry());
    let out = two_servers::scratch("grpc-failover");
    let path = out.join("grpc-failover.toml");
    std::fs::write(&path, PROFILE).unwrap();
    let profile: Profile = toml::from_str(PROFILE).unwrap();
    let naming = Naming::new(&profile.fleet);
    let count = |addr| {
        ControlClient::new(addr)
            .counting_by_lists(naming.clone())
            .instance_count()
            .ok()
    };
    let (a, b) = (first.http_addr, second.http_addr);
    let config = RunConfig {
        profile: path.display().to_string(),
        target: TargetConfig {
            url: Some(format!("http://{a},http://{b}")),
            grpc_url: Some(format!(
                "http://{},http://{}",
                first.grpc_addr, second.grpc_addr
            )),
            ..RunConfig::default().target
        },
        out,
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let run = std::thread::spawn(move || loadgen::run(config));

    // Both servers get clients (the lanes alternate between them), then the first
    // one stops.
    two_servers::wait_for_spread(count, (a, b), 80);
    first.stop().unwrap();

    let report = run.join().unwrap().expect("the run completes");
    let verification = report.verification.as_ref().unwrap();
    assert!(verification.ok, "verification: {}", verification.detail);
    assert!(
        report.push.as_ref().is_some_and(|p| p.converged),
        "{:?}",
        report.push
    );
    let reregister = report.operation("reregister").map_or(0, |o| o.count);
    assert!(
        reregister >= 80,
        "the stopped server's clients redid their registrations on the survivor: {reregister}"
    );
    assert_eq!(count(b), Some(0), "the drain went to the survivor");
    second.stop().unwrap();
}
