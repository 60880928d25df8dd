//! loadgen records every outcome (issue 13): against a server that accepts connections
//! and never answers, and one that answers every other request, every operation that
//! came due is in the corrected latency record, failures included, at the moment they
//! were declared failed; and a schedule slot the generator could not fill is counted.
//!
//! The broken servers are tiny real TCP servers on loopback port 0; the second one is a
//! proxy in front of a real embedded registry that drops every other request of each
//! connection. Nothing here asserts a wall-clock latency: the only latency bound
//! checked (a timed-out request was recorded at no less than the timeout) holds by
//! construction, whatever the machine's speed.

use std::io::{Read as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use loadgen::plan::Phase;
use loadgen::profile::{Dur, Profile};
use loadgen::recorder::{ErrorClass, Op, Stats};
use loadgen::schedule::Clock;
use loadgen::worker::{self, Shared};
use loadgen::RunConfig;
use registry_proto::http1::{parse_request, parse_response, Limits};

/// A server that accepts every connection, reads everything and answers nothing.
fn stalled_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = [0u8; 4096];
                while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    addr
}

/// What a proxy does with the second request of a connection.
#[derive(Clone, Copy)]
enum Unanswered {
    /// Closes the connection: the request fails as a broken connection.
    Close,
    /// Keeps the connection open and never answers: the request times out.
    Stall,
}

/// How a proxy in front of a real registry misbehaves.
#[derive(Clone, Copy)]
enum Proxy {
    /// Forwards the first request of each connection and leaves the second
    /// unanswered: every other request fails.
    EveryOther(Unanswered),
    /// Forwards every request at once but holds each beat's reply this long: the
    /// registry has taken the beat, and a deregistration sent later on another
    /// connection is answered first.
    LateBeats(Duration),
}

/// A proxy in front of `upstream`, one thread per connection.
fn proxy(upstream: SocketAddr, behaviour: Proxy) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || relay(client, upstream, behaviour));
        }
    });
    addr
}

fn relay(mut client: TcpStream, upstream: SocketAddr, behaviour: Proxy) {
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    let mut request = Vec::new();
    let mut answered_one = false;
    loop {
        let Some(len) = read_framed(&mut client, &mut request, |b| {
            parse_request(b, &Limits::default()).map(|r| r.map(|(_, used)| used))
        }) else {
            return;
        };
        if let (Proxy::EveryOther(unanswered), true) = (behaviour, answered_one) {
            if let Unanswered::Stall = unanswered {
                // Hold the connection until the client gives up on it.
                let mut sink = [0u8; 1024];
                while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
            }
            return;
        }
        if server.write_all(&request[..len]).is_err() {
            return;
        }
        let beat = request[..len].starts_with(b"PUT /nacos/v1/ns/instance/beat");
        request.drain(..len);
        let mut response = Vec::new();
        let Some(len) = read_framed(&mut server, &mut response, |b| {
            parse_response(b).map(|r| r.map(|(_, used)| used))
        }) else {
            return;
        };
        if let (Proxy::LateBeats(hold), true) = (behaviour, beat) {
            std::thread::sleep(hold);
        }
        if client.write_all(&response[..len]).is_err() {
            return;
        }
        answered_one = true;
    }
}

/// Reads from `stream` into `buf` until `frame` finds a whole message; its length.
fn read_framed<E>(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    frame: impl Fn(&[u8]) -> Result<Option<usize>, E>,
) -> Option<usize> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match frame(buf) {
            Ok(Some(len)) => return Some(len),
            Ok(None) => {}
            Err(_) => return None,
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A small profile: `instances` registered at 400/s over `connections` connections
/// without pipelining, requests timing out after `timeout`.
fn small_profile(instances: u32, timeout: Duration) -> Profile {
    let mut p = Profile::load("smoke").unwrap();
    p.thresholds.clear();
    p.fleet.services = 10;
    p.fleet.instances = instances;
    p.fleet.subscribers = 0;
    p.fleet.watched_services = 0;
    p.load.rate = 400.0;
    p.steady.register_rate = 0.0;
    p.steady.deregister_rate = 0.0;
    p.steady.query_rate = 0.0;
    p.steady.subscriber_churn_rate = 0.0;
    p.connections.count = 4;
    p.connections.pipeline = 1;
    p.connections.source_ips = 0;
    p.connections.timeout = Dur(timeout);
    p.generator.workers = 1;
    p
}

/// One worker driven through phases by hand, against `target`.
struct Fleet {
    shared: Arc<Shared>,
    handle: std::thread::JoinHandle<anyhow::Result<worker::Outcome>>,
    _seconds: mpsc::Receiver<worker::Interval>,
}

impl Fleet {
    fn start(profile: Profile, target: SocketAddr) -> Fleet {
        let shared = Arc::new(Shared::new(
            profile,
            Clock::start(),
            vec![target],
            Vec::new(),
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            1,
        ));
        let (tx, seconds) = mpsc::channel();
        let handle = worker::spawn(shared.clone(), 0, tx).unwrap();
        Fleet {
            shared,
            handle,
            _seconds: seconds,
        }
    }

    fn enter(&self, phase: Phase) {
        self.shared.set_phase(phase, self.shared.clock.now());
    }

    /// Polls `done` until it holds; panics after `limit` (a bound, not a measurement).
    fn wait_for(&self, what: &str, limit: Duration, done: impl Fn(&Shared) -> bool) {
        let deadline = Instant::now() + limit;
        while !done(&self.shared) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(self) -> Stats {
        self.enter(Phase::Stop);
        self.handle.join().unwrap().unwrap().stats
    }
}

/// Every operation that came due was either skipped or ended (answered or failed), and
/// every one that ended is in the corrected histogram.
fn assert_every_outcome_recorded(stats: &Stats) {
    for op in Op::ALL {
        let figures = stats.op(op);
        assert_eq!(
            figures.intended,
            figures.count + figures.skipped,
            "{}: every due operation ended or was skipped",
            op.name()
        );
        assert_eq!(
            figures.corrected.len(),
            figures.count,
            "{}: every outcome is in the corrected record",
            op.name()
        );
    }
}

#[test]
fn a_server_that_never_answers_puts_every_timeout_in_the_corrected_record() {
    let timeout = Duration::from_millis(300);
    let fleet = Fleet::start(small_profile(40, timeout), stalled_server());
    fleet.enter(Phase::Load);
    fleet.wait_for("the registrations to fail", Duration::from_secs(30), |s| {
        s.all_in(Phase::Load) && s.sum(|p| &p.load_left) == 0
    });
    let stats = fleet.stop();

    let register = stats.op(Op::Register);
    assert_eq!(register.intended, 40);
    assert_eq!(register.count, 40);
    assert_eq!(
        register.errors[ErrorClass::Timeout as usize],
        40,
        "{:?}",
        register.errors
    );
    assert_every_outcome_recorded(&stats);
    // Declared failed no earlier than the timeout after its intended time (the
    // histogram's resolution is 3 significant digits).
    let fastest_us = register.corrected.value_at_quantile(0.0);
    assert!(
        fastest_us >= 299_000,
        "a timeout recorded at {fastest_us} µs, below the 300 ms timeout"
    );
}

#[test]
fn requests_still_hanging_at_the_stop_are_recorded_as_failed() {
    let mut profile = small_profile(0, Duration::from_secs(1));
    profile.steady.query_rate = 200.0;
    let fleet = Fleet::start(profile, stalled_server());
    fleet.enter(Phase::Steady);
    // Stop while queries are queued and in flight at the stalled server.
    fleet.wait_for("queries to be outstanding", Duration::from_secs(30), |s| {
        s.sum(|p| &p.outstanding) >= 8
    });
    let stats = fleet.stop();
    let query = stats.op(Op::Query);
    assert!(query.intended >= 8);
    assert_eq!(query.error_count(), query.count, "none was answered");
    assert_every_outcome_recorded(&stats);
}

#[test]
fn a_deregistration_with_nothing_to_deregister_is_a_skipped_slot() {
    let mut profile = small_profile(0, Duration::from_secs(1));
    profile.steady.deregister_rate = 200.0;
    let fleet = Fleet::start(profile, stalled_server());
    fleet.enter(Phase::Steady);
    fleet.wait_for("skipped slots", Duration::from_secs(30), |s| {
        s.progress[0].skipped.load(Ordering::Relaxed) >= 5
    });
    let stats = fleet.stop();
    let deregister = stats.op(Op::Deregister);
    assert!(deregister.skipped >= 5);
    assert_eq!(deregister.count, 0, "nothing was sent");
    assert_every_outcome_recorded(&stats);
}

/// Runs the small profile through a misbehaving proxy; returns the report.
fn run_through_proxy(behaviour: Proxy, name: &str) -> reports::Report {
    // A drain against a server that stalls retries failed deregistrations for its
    // whole time limit: the stalling run ends after the steady phase.
    let drain = match behaviour {
        Proxy::EveryOther(Unanswered::Stall) => "enabled = false",
        _ => "rate = 400",
    };
    // Held beats keep their connection (the proxy relays one request at a time): a
    // smaller fleet over more connections, and a timeout none of them reaches.
    let (instances, connections, timeout) = match behaviour {
        Proxy::EveryOther(_) => (100, 4, "500ms"),
        Proxy::LateBeats(_) => (40, 16, "3s"),
    };
    let registry = registry_server::Embedded::start({
        use clap::Parser as _;
        let mut config = registry_server::Config::parse_from(["registry"]);
        config.listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.udp_listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        config.workers = 1;
        config
    })
    .unwrap();
    let proxy = proxy(registry.http_addr, behaviour);

    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loadgen-every-other-{}", std::process::id()))
        .join(name);
    std::fs::create_dir_all(&out).unwrap();
    let profile_path = out.join("every-other.toml");
    std::fs::write(
        &profile_path,
        format!(
            r#"
name = "every-other"
[fleet]
services = 20
instances = {instances}
subscribers = 0
watched_services = 0
beat_interval = "1s"
[load]
rate = 400
[steady]
duration = "2s"
register_rate = 20
deregister_rate = 20
query_rate = 50
[drain]
{drain}
[connections]
count = {connections}
source_ips = 1
pipeline = 1
timeout = "{timeout}"
[generator]
workers = 1
settle_timeout = "1s"
"#
        ),
    )
    .unwrap();
    let report = loadgen::run(RunConfig {
        profile: profile_path.display().to_string(),
        target: loadgen::target::TargetConfig {
            url: Some(format!("http://{proxy}")),
            ..RunConfig::default().target
        },
        out: out.clone(),
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    })
    .expect("the run completes");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(find_json(&out)).unwrap()).unwrap();
    reports::validate_against_schema(&value).unwrap();
    registry.stop().unwrap();
    for op in &report.operations {
        eprintln!(
            "{name}: {} count {} errors {:?} corrected count {} p99 {} us p99.9 {} us max {} us",
            op.name,
            op.count,
            op.errors_by_class,
            op.corrected.summary.count,
            op.corrected.summary.p99_us,
            op.corrected.summary.p999_us,
            op.corrected.summary.max_us
        );
    }
    report
}

#[test]
fn a_server_answering_every_other_request_has_its_failures_in_the_report() {
    let report = run_through_proxy(Proxy::EveryOther(Unanswered::Close), "close");
    let mut connection_errors = 0;
    for op in &report.operations {
        assert_eq!(
            op.corrected.summary.count, op.count,
            "{}: every outcome, failures included, is in the corrected record",
            op.name
        );
        connection_errors += op.errors_by_class["connection"];
    }
    let register = report.operation("register").expect("registrations");
    assert!(register.errors > 0 && register.errors < register.count);
    assert!(connection_errors > 0);
    // And each failure says why: the connection errors carry the proxy's close, with
    // counts no larger than their class's, at most 5 messages per class.
    for op in &report.operations {
        for class in op.errors_by_class.keys() {
            let kept: Vec<_> = op
                .error_samples
                .iter()
                .filter(|s| &s.class == class)
                .collect();
            assert!(kept.len() <= reports::reasons::MESSAGES_PER_CLASS);
            let counted: u64 = kept.iter().map(|s| s.count).sum();
            assert!(
                counted <= op.errors_by_class[class],
                "{}: {kept:?}",
                op.name
            );
            assert_eq!(
                kept.is_empty(),
                op.errors_by_class[class] == 0,
                "{}",
                op.name
            );
        }
    }
    let closed = register
        .error_samples
        .iter()
        .find(|s| s.class == "connection")
        .expect("a reason for register's connection errors");
    assert!(closed.count > 0 && !closed.message.is_empty(), "{closed:?}");
    let text = reports::show::render(&report, reports::Format::Text);
    assert!(text.contains("== Error reasons ==") && text.contains(&closed.message));
}

#[test]
fn timeouts_of_a_server_stalling_every_other_request_set_the_tail() {
    let report = run_through_proxy(Proxy::EveryOther(Unanswered::Stall), "stall");
    let query = report.operation("query").expect("queries");
    assert_eq!(query.corrected.summary.count, query.count);
    let timeouts = query.errors_by_class["timeout"];
    // More than 0.1% of the queries timed out after 500 ms or more, so the corrected
    // p99.9 is at least the timeout (3 significant digits).
    assert!(
        timeouts * 1000 > query.count,
        "{timeouts} of {}",
        query.count
    );
    assert!(
        query.corrected.summary.p999_us >= 499_000,
        "p99.9 {} µs leaves the timeouts out",
        query.corrected.summary.p999_us
    );
}

/// Replies on different connections arrive in any order: a beat the registry took
/// before an instance's deregistration, answered after it, must not make loadgen
/// expect the instance again. Every beat's reply is held 200 ms while the drain
/// deregisters on the other connections, so the final count of the verification
/// after the drain would be off by the beats that raced their deregistration.
#[test]
fn a_beat_answered_after_its_deregistration_does_not_bring_the_instance_back() {
    let report = run_through_proxy(Proxy::LateBeats(Duration::from_millis(200)), "late-beats");
    let beat = report.operation("beat").expect("beats");
    assert!(
        beat.count > 0 && beat.errors == 0,
        "{:?}",
        beat.errors_by_class
    );
    let verification = report.verification.as_ref().expect("verified");
    assert!(verification.ok, "{}", verification.detail);
    assert!(
        verification
            .detail
            .contains("after drain: ok: server instances 0 (expected 0)"),
        "{}",
        verification.detail
    );
}

fn find_json(dir: &std::path::Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a JSON report")
}
