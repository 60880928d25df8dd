//! `loadgen capacity` (issue 16) against servers with a known limit, and bad input
//! refused before any load is sent.
//!
//! The limited server is a real embedded registry whose `max_instances_per_service`
//! is 45 while the profile puts 10 instances in each service: every multiple up to
//! 4.5× fits, every larger one has registrations refused. The limit is a property of
//! the server, not of the machine's speed, so the search must end within one step of
//! it wherever it runs.

use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loadgen::capacity::{self, CapacityConfig, Verdict};
use loadgen::target::TargetConfig;
use loadgen::RunConfig;

const PROFILE: &str = r#"
name = "capacity-small"
[fleet]
services = 10
instances = 100
subscribers = 0
watched_services = 0
beat_interval = "1s"
[load]
rate = 1000
[steady]
duration = "3s"
query_rate = 50
[drain]
rate = 2000
[connections]
count = 4
source_ips = 1
pipeline = 4
timeout = "2s"
[generator]
workers = 1
settle_timeout = "3s"
"#;

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-capacity-{}", std::process::id()))
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn search_config(name: &str, profile: &str, target: SocketAddr) -> CapacityConfig {
    let out = out_dir(name);
    let path = out.join("profile.toml");
    std::fs::write(&path, profile).unwrap();
    CapacityConfig {
        run: RunConfig {
            profile: path.display().to_string(),
            target: TargetConfig {
                url: Some(format!("http://{target}")),
                ..RunConfig::default().target
            },
            out,
            quiet: true,
            commit: Some("test".into()),
            ..RunConfig::default()
        },
        slos: vec!["*.errors<=0".into()],
        warmup: Duration::from_secs(1),
        growth: 2.0,
        max_multiple: 16.0,
        precision: 0.25,
        max_steps: 8,
    }
}

fn registry(max_instances_per_service: usize) -> registry_server::Embedded {
    use clap::Parser as _;
    let mut config = registry_server::Config::parse_from(["registry"]);
    config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    config.workers = 1;
    config.max_instances_per_service = max_instances_per_service;
    registry_server::Embedded::start(config).unwrap()
}

#[test]
fn finds_a_limited_registry_s_limit_within_one_step() {
    // Lag limits no loaded test machine breaks: this test is about the server's limit.
    let patient = PROFILE.replace(
        "[generator]\n",
        "[generator]\nmax_p99_lag = \"10s\"\nmax_lag = \"10s\"\n",
    );
    let limited = registry(45);
    let config = search_config("limited", &patient, limited.http_addr);
    let result = capacity::search(&config).expect("the search completes");
    eprint!("{}", result.summary());
    let (pass, fail) = (result.highest_pass.unwrap(), result.lowest_failure.unwrap());
    assert!(
        pass <= 4.5 && 4.5 < fail,
        "limit 4.5× not between {pass} and {fail}"
    );
    assert!(
        fail <= pass * 1.25 + 1e-9,
        "{pass}..{fail} is more than one step"
    );
    assert!(
        matches!(result.limit, Some(Verdict::ServerErrors(_))),
        "{:?}",
        result.limit
    );
    let files = result.save(&config.run.out).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(json["steps"].as_array().unwrap().len(), result.steps.len());
    let html = std::fs::read_to_string(&files[1]).unwrap();
    assert!(html.contains(r#"data-chart="p99-vs-offered""#));
    assert!(
        html.contains(r#"data-series="beat p99" d="M"#),
        "a drawn beat p99 line"
    );
    limited.stop().unwrap();
}

#[test]
fn says_the_generator_fell_behind_when_the_generator_is_the_limit() {
    // A generator held to a schedule no generator keeps: no lag at all.
    let strict = PROFILE.replace(
        "[generator]\n",
        "[generator]\nmax_p99_lag = \"0s\"\nmax_lag = \"0s\"\n",
    );
    let server = registry(200_000);
    let config = search_config("generator", &strict, server.http_addr);
    let result = capacity::search(&config).expect("the search completes");
    assert!(
        matches!(result.limit, Some(Verdict::GeneratorFellBehind(_))),
        "{:?}",
        result.limit
    );
    assert!(
        result.summary().contains("generator fell behind"),
        "{}",
        result.summary()
    );
    server.stop().unwrap();
}

/// A server that counts the connections it accepts and answers nothing.
fn counting_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 1024];
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    (addr, accepted)
}

#[test]
fn bad_input_is_refused_before_any_load_is_sent() {
    let (addr, accepted) = counting_server();
    let target = format!("http://{addr}");
    let cases: [(&[&str], &str); 4] = [
        (
            &["capacity", "--slo", "beat.p99<", "--target", &target],
            "invalid threshold",
        ),
        (
            &["run", "--segment", "3/2", "--target", &target],
            "I must be between 1 and N",
        ),
        (
            &[
                "run",
                "--start-at",
                "2001-01-01T00:00:00Z",
                "--target",
                &target,
            ],
            "in the past",
        ),
        (
            &["run", "--start-at", "noon", "--target", &target],
            "expected RFC 3339",
        ),
    ];
    for (args, message) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
            .args(args)
            .env("LOADGEN_OUT", out_dir("bad-input"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection was made");
}
