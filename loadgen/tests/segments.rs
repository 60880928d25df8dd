//! `--segment I/N`, `--start-at` and `report merge` (issue 16): two segment processes
//! against one registry offer what one process offers against another. The operation
//! counts that do not depend on timing are equal, the two servers end in the same
//! state, the merged report validates against the schema and its verification (the
//! server's total across segments) passes. Percentiles are printed, not asserted:
//! latency belongs in figures, not in `cargo test`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use loadgen::fleet::Naming;
use loadgen::profile::Profile;
use loadgen::segment::Segment;
use loadgen::start::StartAt;
use loadgen::target::{ControlClient, TargetConfig};
use loadgen::RunConfig;
use reports::Report;

const PROFILE: &str = r#"
name = "segments"
thresholds = ["*.errors<=0"]
[fleet]
services = 30
instances = 301
subscribers = 41
watched_services = 7
beat_interval = "1s"
[load]
rate = 1000
[steady]
duration = "2s"
query_rate = 100
[drain]
enabled = false
[subscribers]
poll_interval = "1s"
[connections]
count = 4
source_ips = 2
pipeline = 2
[generator]
workers = 1
settle_timeout = "10s"
"#;

fn registry() -> registry_server::Embedded {
    use clap::Parser as _;
    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.workers = 1;
    registry_server::Embedded::start(config).unwrap()
}

fn config(dir: &str, target: SocketAddr, segment: Segment, start: Option<StartAt>) -> RunConfig {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-segments-{}", std::process::id()))
        .join(dir);
    std::fs::create_dir_all(&out).unwrap();
    let profile = out.join("segments.toml");
    std::fs::write(&profile, PROFILE).unwrap();
    RunConfig {
        profile: profile.display().to_string(),
        target: TargetConfig {
            url: Some(format!("http://{target}")),
            ..RunConfig::default().target
        },
        out,
        quiet: true,
        commit: Some("test".into()),
        segment,
        start_at: start,
        ..RunConfig::default()
    }
}

/// Every service's host list, as the server holds it.
fn server_state(addr: SocketAddr) -> Vec<Vec<String>> {
    let profile = Profile::from_toml("segments", PROFILE).unwrap();
    let naming = Naming::new(&profile.fleet);
    let mut client = ControlClient::new(addr);
    (0..naming.services)
        .map(|s| {
            let info = client.list(&naming, s).unwrap();
            let mut hosts: Vec<String> = info
                .hosts
                .iter()
                .map(|h| format!("{}:{}", h.ip, h.port))
                .collect();
            hosts.sort();
            hosts
        })
        .collect()
}

#[test]
fn two_segments_offer_what_one_process_offers_and_merge_exactly() {
    let shared = registry();
    let start = StartAt::At(SystemTime::now() + Duration::from_secs(2));
    let runs: Vec<_> = (1..=2)
        .map(|index| {
            let c = config(
                &format!("segment-{index}"),
                shared.http_addr,
                Segment { index, count: 2 },
                Some(start),
            );
            std::thread::spawn(move || loadgen::run(c))
        })
        .collect();
    let segments: Vec<Report> = runs
        .into_iter()
        .map(|r| r.join().unwrap().expect("a segment completes"))
        .collect();
    assert_eq!(segments[0].segment.as_deref(), Some("1/2"));
    let merged = reports::merge(&segments).expect("the segments merge");
    reports::validate_against_schema(&serde_json::to_value(&merged).unwrap()).unwrap();

    let alone = registry();
    let whole = loadgen::run(config("whole", alone.http_addr, Segment::WHOLE, None))
        .expect("the whole run completes");

    for report in [&merged, &whole] {
        let v = report.verification.as_ref().unwrap();
        assert!(v.ok, "verification: {}", v.detail);
        assert!(report.push.as_ref().unwrap().converged);
        for op in &report.operations {
            assert_eq!(op.errors, 0, "{}: {:?}", op.name, op.errors_by_class);
        }
    }
    let count = |r: &Report, name: &str| r.operation(name).map_or(0, |o| o.count);
    assert_eq!(count(&merged, "register"), 301);
    assert_eq!(count(&whole, "register"), 301);
    let (m, w) = (merged.push.as_ref().unwrap(), whole.push.as_ref().unwrap());
    assert_eq!(m.subscribers, 41);
    assert_eq!(m.subscribers, w.subscribers);
    // The query schedule's intended rate is the same (each segment ran half of it).
    let rate = |r: &Report| r.operation("query").unwrap().target_rate.unwrap();
    assert!(
        (rate(&merged) / rate(&whole) - 1.0).abs() < 0.1,
        "query rate {} vs {}",
        rate(&merged),
        rate(&whole)
    );
    assert_eq!(
        server_state(shared.http_addr),
        server_state(alone.http_addr)
    );

    for name in ["register", "beat", "query", "subscribe"] {
        let (a, b) = (
            &merged.operation(name).unwrap().corrected.summary,
            &whole.operation(name).unwrap().corrected.summary,
        );
        eprintln!(
            "{name}: segments count {} p50 {} µs p99 {} µs | one process count {} p50 {} µs p99 {} µs",
            a.count, a.p50_us, a.p99_us, b.count, b.p50_us, b.p99_us
        );
    }
    shared.stop().unwrap();
    alone.stop().unwrap();
}
