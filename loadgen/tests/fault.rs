//! `--fault AT=COMMAND` end to end (issue 34, item 1): the command really disturbs
//! the target, and the report's fault section says what the lists lost.
//!
//! - A no-op (`true`) against the embedded registry: converged at the first
//!   sample, nothing missing, the `fault.missing_instance_seconds<=0` gate passes.
//! - `kill -9` and a start on the same ports of one registry process (its
//!   `node.sh restart`, as an operator's script), run through the `loadgen` binary:
//!   the restarted node serves empty lists until the 1.x clients' beats get 20404
//!   and they register again (Nacos's `ClientBeatCheckTask`/`InstanceController#beat`
//!   answer `RESOURCE_NOT_FOUND`, naming/controllers/InstanceController.java), so
//!   instances were missing, the lists converged, and the gate fails the run with
//!   loadgen's threshold exit code (3).
//! - The same restart of one node of a 3-node cluster of processes under a 2.x
//!   fleet: the section has every member, and converges.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::nodes::{self, Node};
use crate::support::two_servers;

use loadgen::fault::FaultSpec;
use loadgen::target::TargetConfig;
use loadgen::{exit, RunConfig};
use reports::fault::FaultResult;
use reports::Report;

/// A 1.x fleet small enough for seconds: beats every second (the node's
/// `--beat-interval-ms 1000` keeps later beats there), a steady phase long enough
/// for a restart and the re-registrations after it.
const HTTP_PROFILE: &str = r#"
name = "fault-http"
thresholds = []
[fleet]
services = 10
instances = 100
subscribers = 10
watched_services = 5
beat_interval = "1s"
[load]
rate = 1000
[steady]
duration = "6s"
query_rate = 20
[drain]
rate = 1000
[subscribers]
poll_interval = "1s"
[connections]
count = 4
pipeline = 1
timeout = "2s"
[generator]
workers = 1
settle_timeout = "15s"
# The subject is the fault gate, not the generator's pace: on a loaded 2-core CI
# machine a restart's kill and start can delay a dispatch past the default 100 ms,
# which would turn the threshold exit (3) into "fell behind" (4).
max_lag = "5s"
max_p99_lag = "2s"
"#;

/// Not a test on its own: the body of the registry processes of
/// [`crate::support::nodes`] (this binary run again with this test selected). In an
/// ordinary run it returns at once.
#[test]
fn registry_node() {
    nodes::entry();
}

#[test]
fn a_no_op_fault_converges_at_once_and_misses_nothing() {
    let out = two_servers::scratch("fault-noop");
    let profile = write_profile(&out, HTTP_PROFILE);
    let config = RunConfig {
        profile,
        faults: vec![loadgen::fault::parse("1s=true").unwrap()],
        thresholds: vec!["fault.missing_instance_seconds<=0".into()],
        out,
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let report = loadgen::run(config).expect("the run completes");
    let fault = only_fault(&report);
    assert_eq!(fault.exit_code, Some(0));
    assert_eq!(fault.missing_instance_seconds, 0.0, "{fault:?}");
    let converged = fault.converge_s.expect("converged");
    assert!(
        converged <= 1.5,
        "a no-op converges at the first samples: {fault:?}"
    );
    assert_eq!(fault.targets.len(), 1);
    let t = &fault.targets[0];
    assert_eq!((t.peak_missing, t.empty_lists, t.unanswered), (0, 0, 0));
    let gate = &report.thresholds[0];
    assert!(gate.passed, "{gate:?}");
}

#[test]
fn a_restarted_node_misses_instances_until_clients_redo_and_fails_the_gate() {
    let out = two_servers::scratch("fault-restart");
    let ports = nodes::free_ports(2);
    let node = Node::start(
        &out.join("node"),
        ports[0],
        ports[1],
        None,
        "--beat-interval-ms 1000",
    );
    let profile = write_profile(&out, HTTP_PROFILE);
    let status = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["run", "--quiet", "--commit", "test", "--profile", &profile])
        .args(["--target", &format!("http://{}", node.http)])
        .arg("--fault")
        .arg(format!("1s=sh '{}' restart", node.script.display()))
        .args(["--threshold", "fault.missing_instance_seconds<=0"])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    let report = read_report(&out);
    let fault = only_fault(&report);
    eprintln!("{fault:?}");
    assert_eq!(fault.exit_code, Some(0), "the restart script ran");
    let t = &fault.targets[0];
    assert!(
        fault.missing_instance_seconds > 0.0 && t.peak_missing > 0 && t.empty_lists > 0,
        "the restarted node served empty lists: {fault:?}\n{}",
        node.log()
    );
    let converged = fault.converge_s.expect("the lists converged");
    assert!(
        converged > 0.0 && converged < fault.window_s + 0.01,
        "{fault:?}"
    );
    let verification = report.verification.as_ref().unwrap();
    assert!(verification.ok, "{}", verification.detail);
    assert!(
        report.operation("reregister").is_some_and(|o| o.count > 0),
        "the clients registered again on the restarted node"
    );
    let gate = &report.thresholds[0];
    assert!(!gate.passed && gate.actual > 0.0, "{gate:?}");
    assert_eq!(status.code(), Some(i32::from(exit::THRESHOLDS)));
}

/// A 2.x fleet spread over three members.
const GRPC_PROFILE: &str = r#"
name = "fault-cluster"
protocol = "grpc"
thresholds = []
[fleet]
services = 10
instances = 120
subscribers = 12
watched_services = 5
[grpc]
clients = 6
batch = true
[load]
rate = 1000
[steady]
duration = "8s"
query_rate = 20
[drain]
rate = 1000
[connections]
timeout = "2s"
[generator]
workers = 1
settle_timeout = "20s"
"#;

#[test]
fn a_restarted_member_of_a_cluster_of_processes_is_sampled_until_all_converge() {
    let out = two_servers::scratch("fault-cluster");
    let ports = nodes::free_ports(6);
    let members = (0..3)
        .map(|i| format!("127.0.0.1:{}", ports[i]))
        .collect::<Vec<_>>()
        .join(",");
    let fast = "--cluster-probe-interval-ms 200 --cluster-probe-failures 3 \
                --distro-verify-interval-ms 500 --beat-interval-ms 1000";
    let cluster: Vec<Node> = (0..3)
        .map(|i| {
            let dir = out.join(format!("node{i}"));
            Node::start(&dir, ports[i], ports[3 + i], Some(&members), fast)
        })
        .collect();
    // Started together, the members are ready once each has found the
    // others starting too: the run's first gRPC list must not meet one
    // that still refuses.
    cluster.iter().for_each(Node::wait_ready);
    let profile = write_profile(&out, GRPC_PROFILE);
    let list = |f: &dyn Fn(&Node) -> String| cluster.iter().map(f).collect::<Vec<_>>().join(",");
    let config = RunConfig {
        profile,
        target: TargetConfig {
            url: Some(list(&|n| format!("http://{}", n.http))),
            grpc_url: Some(list(&|n| format!("http://{}", n.grpc))),
            ..RunConfig::default().target
        },
        faults: vec![FaultSpec {
            at: std::time::Duration::from_secs(1),
            command: format!("sh '{}' restart", cluster[0].script.display()),
        }],
        out,
        quiet: true,
        commit: Some("test".into()),
        ..RunConfig::default()
    };
    let report = loadgen::run(config).expect("the run completes");
    let fault = only_fault(&report);
    eprintln!("{fault:?}");
    assert_eq!(fault.exit_code, Some(0), "the restart script ran");
    let names: Vec<&str> = fault.targets.iter().map(|t| t.target.as_str()).collect();
    let want: Vec<String> = cluster.iter().map(|n| n.http.to_string()).collect();
    assert_eq!(names, want, "every member sampled");
    let converged = fault
        .converge_s
        .unwrap_or_else(|| panic!("the lists never converged: {fault:?}\n{}", cluster[0].log()));
    assert!(
        converged > 0.0 && converged < fault.window_s + 0.01,
        "{fault:?}"
    );
    let verification = report.verification.as_ref().unwrap();
    assert!(verification.ok, "{}", verification.detail);
}

fn write_profile(out: &Path, text: &str) -> String {
    let path = out.join("profile.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn only_fault(report: &Report) -> &FaultResult {
    assert_eq!(
        report.faults.len(),
        1,
        "one fault section: {:?}",
        report.faults
    );
    &report.faults[0]
}

/// The one JSON report the run wrote into `out`.
fn read_report(out: &Path) -> Report {
    let reports: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(
        reports.len(),
        1,
        "one report in {}: {reports:?}",
        out.display()
    );
    serde_json::from_slice(&std::fs::read(&reports[0]).unwrap()).unwrap()
}
