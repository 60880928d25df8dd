//! The v3 client HTTP API fleet (`--protocol v3`) end to end against the embedded
//! registry: registers, heartbeats, queries, polling subscribers and the drain go
//! through `/nacos/v3/client/ns/...`, and the run is verified through the v3 APIs.

use std::path::PathBuf;
use std::time::Duration;

use loadgen::profile::{Overrides, Protocol};
use loadgen::RunConfig;
use reports::Report;

#[test]
fn the_v3_fleet_runs_clean_against_the_embedded_registry() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-v3-it-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    // Heartbeats and polls within a 3 s steady phase.
    let profile = out.join("v3.toml");
    let text = loadgen::profile::BUILT_IN[0]
        .1
        .replace("[fleet]", "[fleet]\nbeat_interval = \"1s\"")
        .replace(
            "[connections]",
            "[subscribers]\npoll_interval = \"500ms\"\n\n[connections]",
        );
    std::fs::write(&profile, text).unwrap();
    let config = RunConfig {
        profile: profile.display().to_string(),
        overrides: Overrides {
            services: Some(40),
            instances: Some(400),
            subscribers: Some(40),
            watched_services: Some(10),
            rate: Some(1000.0),
            duration: Some(Duration::from_secs(3)),
            query_rate: Some(100.0),
            churn_rate: Some(10.0),
            connections: Some(4),
            workers: Some(2),
            protocol: Some(Protocol::V3),
            ..Overrides::default()
        },
        out: out.clone(),
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let report = loadgen::run(config).expect("the run completes");
    for name in ["register", "deregister", "beat", "query", "subscribe"] {
        let op = report
            .operation(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(op.count > 0, "{name} has no count");
        assert_eq!(op.errors, 0, "{name} errors: {:?}", op.errors_by_class);
    }
    let push = report.push.as_ref().expect("subscriber stats");
    assert!(push.converged, "polling subscribers converged: {push:?}");
    assert_eq!(push.pushes_received, 0, "3.x has no UDP push");
    let v = report.verification.as_ref().expect("verification");
    assert!(v.ok, "verification: {}", v.detail);
    assert_eq!(report.profile.params["protocol"], "v3");
    let json = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a JSON report");
    assert_eq!(Report::load(&json).unwrap(), report);
}
