//! `report gates` and `report gates-trend`: exit codes on real files, and the
//! committed gate policy and history files (gates and loadgen reports), which
//! must keep loading.

use std::path::{Path, PathBuf};

use reports::gates::{GateOp, GatePolicy, GateReport};

use crate::common::{report_cli, sample_report, scratch, stderr, stdout, write};

fn code(output: &std::process::Output) -> i32 {
    output.status.code().expect("exited normally")
}

fn gates(commit: &str, beat_2n: u64) -> GateReport {
    GateReport::new(
        commit,
        "rustc 1.90.0",
        "valgrind-3.19.0",
        "harness1",
        vec![
            GateOp::from_counts("beat", 20_000, 26_028_885, beat_2n),
            GateOp::from_counts("list-encode", 500, 61_476_156, 112_958_000),
        ],
    )
}

fn save(dir: &Path, name: &str, report: &GateReport) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(report).unwrap()).unwrap();
    path
}

#[test]
fn same_counts_exit_0_and_a_crafted_regression_exits_1() {
    let dir = scratch("cli-gates");
    let base = save(&dir, "base.json", &gates("aaaa", 42_177_724));
    let same = save(&dir, "same.json", &gates("aaaa", 42_177_724));
    // beat: 807.4 -> 831.6 Ir/op, +3.0 %.
    let slower = save(&dir, "slower.json", &gates("bbbb", 42_661_724));

    let out = report_cli([&"gates".into(), &base, &same]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("no regression"), "{}", stdout(&out));

    let out = report_cli([&"gates".into(), &base, &slower]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("| beat | 807.4 | 831.6 | +3.00% | +2% | **REGRESSION** |"),
        "{text}"
    );

    // A looser policy lets it through.
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, "[ops.beat]\nthreshold_pct = 5.0\n").unwrap();
    let out = report_cli([
        "gates".as_ref(),
        base.as_os_str(),
        slower.as_os_str(),
        "--policy".as_ref(),
        policy.as_os_str(),
    ]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    let out = report_cli([&"gates-trend".into(), &base, &slower]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("831.6 (+3.0%)"), "{}", stdout(&out));
}

#[test]
fn a_load_report_is_not_a_gates_file() {
    let dir = scratch("cli-gates-bad");
    let load = write(&dir, "run.json", &sample_report(1, 1.0));
    let base = save(&dir, "base.json", &gates("aaaa", 42_177_724));
    let out = report_cli([&"gates".into(), &base, &load]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("not a gates file"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn committed_policy_and_history_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let policy = GatePolicy::load(root.join("gates/policy.toml")).unwrap();
    assert!(policy.default.gate && policy.default.threshold_pct <= 5.0);
    let mut history = 0;
    for entry in std::fs::read_dir(root.join("history")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("gates-") && name.ends_with(".json") {
            let report = GateReport::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!report.ops.is_empty(), "{name}");
            history += 1;
        }
    }
    assert!(history > 0, "reports/history holds no gates-*.json");
}

#[test]
fn committed_loadgen_history_loads_as_reports() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for entry in std::fs::read_dir(root.join("history")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("loadgen-") && name.ends_with(".json") {
            let report = reports::Report::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
            let json = serde_json::to_value(&report).unwrap();
            reports::validate_against_schema(&json).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
    }
}

/// A pinned baseline must have been measured with head's `hotpaths`
/// program: `--same-harness` refuses another one (exit 2, saying to
/// re-pin) where a plain comparison only warns.
#[test]
fn same_harness_refuses_a_baseline_of_another_program() {
    let dir = scratch("cli-gates-harness");
    let pinned = save(&dir, "pinned.json", &gates("aaaa", 42_177_724));
    let mut other = gates("bbbb", 42_177_724);
    other.harness = "harness2".into();
    let head = save(&dir, "head.json", &other);

    let out = report_cli([&"gates".into(), &pinned, &head]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("different hotpaths programs"),
        "{}",
        stdout(&out)
    );

    let out = report_cli([
        "gates".as_ref(),
        pinned.as_os_str(),
        head.as_os_str(),
        "--same-harness".as_ref(),
    ]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stderr(&out).contains("re-pin"), "{}", stderr(&out));

    let same = save(&dir, "same.json", &gates("cccc", 42_661_724));
    let out = report_cli([
        "gates".as_ref(),
        pinned.as_os_str(),
        same.as_os_str(),
        "--same-harness".as_ref(),
    ]);
    assert_eq!(
        code(&out),
        1,
        "drift past the threshold fails: {}",
        stdout(&out)
    );
}

/// The committed pinned baseline (benches/gates-baseline.json) loads, and
/// was measured with the committed hotpaths program (`git hash-object`), so
/// CI's comparison with it is like for like.
#[test]
fn the_pinned_baseline_loads_and_matches_the_committed_program() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let pinned = GateReport::load(root.join("benches/gates-baseline.json")).unwrap();
    assert!(pinned.op("http-register").is_some(), "{:?}", pinned.ops);
    assert!(pinned.op("grpc-register").is_some(), "{:?}", pinned.ops);
    let hash = std::process::Command::new("git")
        .arg("hash-object")
        .arg(root.join("benches/src/bin/hotpaths.rs"))
        .output()
        .expect("git runs");
    let hash = String::from_utf8(hash.stdout).unwrap();
    assert_eq!(
        pinned.harness,
        hash.trim(),
        "hotpaths.rs changed since the pin: run scripts/gates.sh --pin and commit the file"
    );
}
