//! The 2.x fleet end to end against the embedded registry's gRPC port: the
//! `grpc-smoke` profile, shortened to a few seconds.

use std::path::PathBuf;
use std::time::Duration;

use loadgen::profile::{Overrides, Protocol};
use loadgen::RunConfig;
use reports::Report;

#[test]
fn the_grpc_fleet_runs_clean_against_the_embedded_registry() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-grpc-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let config = RunConfig {
        profile: "grpc-smoke".into(),
        overrides: Overrides {
            services: Some(40),
            instances: Some(400),
            subscribers: Some(40),
            watched_services: Some(10),
            rate: Some(1000.0),
            duration: Some(Duration::from_secs(2)),
            query_rate: Some(100.0),
            churn_rate: Some(20.0),
            workers: Some(2),
            protocol: Some(Protocol::Grpc),
            grpc_clients: Some(10),
            ..Overrides::default()
        },
        out: out.clone(),
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let report = loadgen::run(config).expect("the run completes");
    for name in ["register", "deregister", "query", "subscribe"] {
        let op = report
            .operation(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(op.count > 0, "{name} has no count");
        assert_eq!(op.errors, 0, "{name} errors: {:?}", op.errors_by_class);
        // Every call's send was its last byte on the wire, and the part of its send
        // lag queued in the client is recorded beside it: once per send, never more
        // than the send lag it is part of.
        let lag = &op.send_lag.as_ref().expect("send lag").summary;
        let queue = &op.client_queue.as_ref().expect("client queue").summary;
        assert!(queue.count > 0, "{name}: no client queue recorded");
        assert_eq!(queue.count, lag.count, "{name}: one client queue per send");
        assert!(
            queue.max_us <= lag.max_us,
            "{name}: {queue:?} within {lag:?}"
        );
        assert!(
            queue.min_us <= lag.min_us,
            "{name}: {queue:?} within {lag:?}"
        );
        // And each send was timed by its socket's stamp, not the fallback to the
        // call's start: if stamping broke, this fails.
        let stamps = op.send_stamps.expect("2.x sends say how they were timed");
        assert_eq!(stamps.fallback, 0, "{name}: sends timed by the fallback");
        assert_eq!(stamps.stamped, lag.count, "{name}: every send stamped");
    }
    let wakeup = report.wakeup_lateness.as_ref().expect("wake-ups measured");
    assert!(wakeup.summary.count > 0, "the probe ran during the run");
    let push = report.push.as_ref().expect("push stats");
    assert!(push.converged, "subscriptions converged: {push:?}");
    assert!(push.pushes_received > 0 && push.acks_sent > 0);
    assert!(push.latency.summary.count > 0, "push latency measured");
    let v = report.verification.as_ref().expect("verification");
    assert!(v.ok, "verification: {}", v.detail);
    // The saved report parses back and fits the schema.
    let json = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a JSON report");
    assert_eq!(Report::load(&json).unwrap(), report);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    reports::validate_against_schema(&value).unwrap();
}

/// The drain check of a server that holds no service (issue 24's
/// `nacos-2x-report` runs read "server instances unknown (expected 0)"): counted
/// over gRPC by the fleet's service lists, every member reads 0, and the check
/// passes.
#[test]
fn a_server_with_no_services_counts_zero_over_grpc() {
    use clap::Parser as _;
    use loadgen::fleet::Naming;
    use loadgen::target::ControlClient;
    use loadgen::verify::{self, Check};

    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = config.listen;
    config.workers = 1;
    let server = registry_server::Embedded::start(config).unwrap();
    let profile = loadgen::profile::Profile::from_toml(
        "x",
        "name = \"x\"\nprotocol = \"grpc\"\n[fleet]\nservices = 5\ninstances = 10\n",
    )
    .unwrap();
    let naming = Naming::new(&profile.fleet);
    let control = ControlClient::new(server.http_addr)
        .counting_by_lists(naming.clone())
        .listing_over_grpc(vec![server.grpc_addr]);
    let found = verify::members(&mut control.each_member(), &naming, &[]);
    assert_eq!(found.count, Some(0), "{found:?}");
    let check = Check {
        expected: 0,
        server: found.count,
        judge_count: true,
        ..Check::default()
    };
    assert!(check.ok(), "{}", check.describe());
    assert!(check
        .describe()
        .starts_with("ok: server instances 0 (expected 0)"));
    server.stop().unwrap();
}
