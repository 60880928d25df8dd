//! A short profile end to end against the embedded registry: the first-run path of
//! `cargo run -p loadgen`, shortened to a few seconds.

use std::path::PathBuf;
use std::time::Duration;

use loadgen::profile::Overrides;
use loadgen::{exit, RunConfig};
use reports::Report;

#[test]
fn a_short_profile_runs_clean_against_the_embedded_registry() {
    let report = short_run("sleeping", false);
    assert!(
        report.profile.params["generator"]
            .get("busy_poll")
            .is_none(),
        "the default leaves the profile (and its hash) as it was"
    );
}

/// `--busy-poll`: workers that never park still send, receive, verify and stop, and
/// the report says the generator spun.
#[test]
fn a_busy_polling_generator_runs_the_same_profile_clean() {
    let report = short_run("spinning", true);
    assert_eq!(report.profile.params["generator"]["busy_poll"], true);
}

fn short_run(tag: &str, busy_poll: bool) -> Report {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-it-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let config = RunConfig {
        profile: "smoke".into(),
        overrides: Overrides {
            services: Some(60),
            instances: Some(600),
            subscribers: Some(60),
            watched_services: Some(20),
            rate: Some(2000.0),
            duration: Some(Duration::from_secs(3)),
            query_rate: Some(100.0),
            churn_rate: Some(20.0),
            connections: Some(8),
            workers: Some(if busy_poll { 1 } else { 2 }),
            busy_poll,
            ..Overrides::default()
        },
        out: out.clone(),
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    // Beats within a 3 s steady phase: the first beat follows the profile's initial
    // interval, later ones the server's clientBeatInterval.
    let config = RunConfig {
        profile: {
            let path = out.with_extension("toml");
            std::fs::create_dir_all(out.parent().unwrap()).unwrap();
            let mut text = loadgen::profile::BUILT_IN[0].1.to_owned();
            text = text.replace("[fleet]", "[fleet]\nbeat_interval = \"1s\"");
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        },
        ..config
    };
    let report = loadgen::run(config).expect("the run completes");

    for name in ["register", "deregister", "beat", "query", "subscribe"] {
        let op = report
            .operation(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert!(op.count > 0, "{name} has no count");
        assert_eq!(op.errors, 0, "{name} errors: {:?}", op.errors_by_class);
        assert!(op.corrected.summary.count > 0);
    }
    for op in &report.operations {
        assert_eq!(op.errors, 0, "{} errors: {:?}", op.name, op.errors_by_class);
    }
    let push = report.push.as_ref().expect("push stats");
    assert!(push.converged, "subscribers converged: {push:?}");
    assert!(push.pushes_received > 0 && push.acks_sent > 0);
    assert!(
        push.latency.summary.count > 0,
        "change-to-receipt latency measured"
    );
    let v = report.verification.as_ref().unwrap();
    assert!(v.ok, "verification: {}", v.detail);
    assert!(!report.timeline.is_empty());
    assert!(report.server.is_some_and(|s| s.cpu_seconds.is_some()));
    assert!(
        report.thresholds.iter().all(|t| t.passed),
        "{:?}",
        report.thresholds
    );
    assert_ne!(exit_code_without_lag(&report), exit::VERIFICATION);

    // The saved report parses back, equals what run() returned and fits the schema.
    let json = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a JSON report");
    let back = Report::load(&json).unwrap();
    assert_eq!(back, report);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    reports::validate_against_schema(&value).unwrap();
    let hlog = std::fs::read_to_string(json.with_extension("hlog")).unwrap();
    assert!(hlog.contains("Tag=beat,") && hlog.contains("Tag=register,"));
    report
}

/// The exit code, except that a busy test machine may make the generator late.
fn exit_code_without_lag(r: &Report) -> u8 {
    let mut r = r.clone();
    r.generator.fell_behind = false;
    loadgen::exit_code(&r)
}
