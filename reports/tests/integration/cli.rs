//! The `report` binary: subcommands, outputs and exit codes
//! (0 ok, 1 regression, 2 usage or input errors).

use reports::{Policy, Report};

use crate::common::{report_cli, sample_report, scratch, stderr, stdout, write};

fn code(output: &std::process::Output) -> i32 {
    output.status.code().expect("exited normally")
}

#[test]
fn show_prints_the_wrk2_style_table() {
    let dir = scratch("cli-show");
    let file = write(&dir, "run.json", &sample_report(1, 1.0));
    let out = report_cli([&"show".into(), &file]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "profile smoke (config c0ffee)",
        "p99.99",
        "beat",
        "uncorrected",
        "400/s (",
        "Push propagation",
        "200 subscribers",
        "send lag",
        "peak RSS 52.0 MiB",
        "CPU 7.50 s",
        "ok: expected 2000 instances, server has 2000",
        "beat.p99<20ms",
        "http_5xx",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }

    let out = report_cli([
        "show".as_ref(),
        file.as_os_str(),
        "--format".as_ref(),
        "markdown".as_ref(),
    ]);
    assert_eq!(code(&out), 0);
    let markdown = stdout(&out);
    assert!(markdown.contains("### Operations"), "{markdown}");
    assert!(markdown.contains("| operation | latency | count | rate | target | p50 |"));
}

#[test]
fn bad_inputs_exit_2_with_context() {
    let dir = scratch("cli-bad");
    let missing = dir.join("missing.json");
    let out = report_cli([&"show".into(), &missing]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("reading report") && stderr(&out).contains("missing.json"));

    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, "{ not json").unwrap();
    let out = report_cli([&"show".into(), &garbage]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("not a valid report"),
        "{}",
        stderr(&out)
    );

    let mut value = serde_json::to_value(sample_report(1, 1.0)).unwrap();
    value["schema_version"] = 9.into();
    let future = dir.join("future.json");
    std::fs::write(&future, value.to_string()).unwrap();
    let out = report_cli([&"show".into(), &future]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("unsupported schema_version 9"));

    let mut damaged = sample_report(1, 1.0);
    damaged.operations[0].corrected.histogram = "AAAA".into();
    let damaged = write(&dir, "damaged.json", &damaged);
    let out = report_cli([
        "html".as_ref(),
        damaged.as_os_str(),
        "-o".as_ref(),
        dir.join("x.html").as_os_str(),
    ]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("decoding histograms"),
        "{}",
        stderr(&out)
    );

    assert_eq!(
        code(&report_cli(["show"])),
        2,
        "missing argument is a usage error"
    );
    assert_eq!(code(&report_cli(["frobnicate"])), 2);
    assert_eq!(code(&report_cli(["show", "--format", "pdf", "x.json"])), 2);
}

#[test]
fn html_writes_a_self_contained_page() {
    let dir = scratch("cli-html");
    let file = write(&dir, "run.json", &sample_report(1, 1.0));
    let page = dir.join("run.html");
    let out = report_cli([
        "html".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    for op in ["register", "beat", "query"] {
        for kind in ["latency", "throughput", "spectrum"] {
            assert!(
                html.contains(&format!(r#"data-chart="{kind}-{op}""#)),
                "{kind}-{op}"
            );
        }
    }
    assert!(html.contains(r#"data-chart="push-spectrum""#));
    assert!(html.contains(r#"data-chart="send-lag-spectrum""#));
    // Nothing is loaded from anywhere.
    for forbidden in [
        "src=", "href=", "<link", "url(", "@import", "<iframe", "<img",
    ] {
        assert!(!html.contains(forbidden), "page contains {forbidden}");
    }
}

#[test]
fn merge_writes_a_loadable_sum() {
    let dir = scratch("cli-merge");
    let a = write(&dir, "a.json", &sample_report(1, 1.0));
    let b = write(&dir, "b.json", &sample_report(2, 1.0));
    let merged = dir.join("merged.json");
    let out = report_cli([&"merge".into(), &a, &b, &"-o".into(), &merged]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = Report::load(&merged).unwrap();
    assert_eq!(report.operations[1].count, 24_000);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&merged).unwrap()).unwrap();
    assert!(reports::validate_against_schema(&value).is_ok());

    let mut other = sample_report(3, 1.0);
    other.profile.name = "other".into();
    let other = write(&dir, "other.json", &other);
    let out = report_cli([&"merge".into(), &a, &other, &"-o".into(), &merged]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("ran profile other@c0ffee"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&report_cli(["merge", "-o", "x.json"])), 2);
}

#[test]
fn compare_exit_codes() {
    let dir = scratch("cli-compare");
    let base_report = sample_report(1, 1.0);
    let base = write(&dir, "base.json", &base_report);
    let same = write(&dir, "same.json", &base_report);
    let out = report_cli([&"compare".into(), &base, &same]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let table = stdout(&out);
    assert!(table.contains("no regression"));
    assert!(table.contains("| metric | base | head | delta | p | verdict |"));

    let slow = write(&dir, "slow.json", &sample_report(1, 2.0));
    let out = report_cli([&"compare".into(), &base, &slow]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(stdout(&out).contains("**REGRESSION**"));

    // A policy that tolerates +150 % everywhere lets the doubled latencies pass.
    let loose = dir.join("loose.toml");
    let mut policy = Policy::default();
    for rule in policy.metrics.values_mut() {
        rule.threshold_pct = 150.0;
    }
    std::fs::write(&loose, policy.to_string()).unwrap();
    let out = report_cli([&"compare".into(), &base, &slow, &"--policy".into(), &loose]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));

    let broken = dir.join("broken.toml");
    std::fs::write(&broken, "[metrics.p42]\nthreshold_pct = 1.0\n").unwrap();
    let out = report_cli([&"compare".into(), &base, &slow, &"--policy".into(), &broken]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("unknown metric `p42`"));

    let mut other = base_report.clone();
    other.environment.cpu_model = "Other CPU".into();
    let other = write(&dir, "other.json", &other);
    let out = report_cli([&"compare".into(), &base, &other]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("compare on one machine or --force"));
    let out = report_cli([&"compare".into(), &base, &other, &"--force".into()]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("warning: forced"));
}

#[test]
fn compare_repeated_runs() {
    let dir = scratch("cli-compare-repeat");
    let template = sample_report(1, 1.0);
    let run = |name: &str, p99: u64| {
        let mut r = template.clone();
        r.operations[1].corrected.summary.p99_us = p99;
        write(&dir, name, &r)
    };
    let base = [
        run("b1.json", 2_000),
        run("b2.json", 4_000),
        run("b3.json", 3_000),
    ];
    let noisy = [
        run("n1.json", 2_600),
        run("n2.json", 4_600),
        run("n3.json", 3_600),
    ];
    let tight_base = [
        run("t1.json", 3_000),
        run("t2.json", 3_020),
        run("t3.json", 2_980),
    ];
    let tight_head = [
        run("h1.json", 3_600),
        run("h2.json", 3_620),
        run("h3.json", 3_580),
    ];

    let args = |b: &[std::path::PathBuf; 3], h: &[std::path::PathBuf; 3]| {
        vec![
            "compare".into(),
            b[0].clone().into_os_string(),
            h[0].clone().into_os_string(),
            "--repeat-base".into(),
            b[1].clone().into_os_string(),
            b[2].clone().into_os_string(),
            "--repeat-head".into(),
            h[1].clone().into_os_string(),
            h[2].clone().into_os_string(),
        ]
    };
    let out = report_cli(args(&base, &noisy));
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("3 base run(s) vs 3 head run(s)"));
    assert!(stdout(&out).contains("not significant"));
    let out = report_cli(args(&tight_base, &tight_head));
    assert_eq!(code(&out), 1, "{}", stdout(&out));
}

#[test]
fn policy_prints_the_defaults() {
    let out = report_cli(["policy"]);
    assert_eq!(code(&out), 0);
    assert_eq!(
        Policy::from_toml_str(&stdout(&out)).unwrap(),
        Policy::default()
    );
}

/// The fault section (issue 34): `show` (text and markdown), the HTML page and
/// `compare` all render what a `--fault` run measured.
#[test]
fn the_fault_section_renders_in_every_view() {
    use reports::fault::{FaultResult, FaultTarget};
    let dir = scratch("cli-faults");
    let fault = |converge: Option<f64>, missing: f64| FaultResult {
        at_s: 2.0,
        command: "sh node.sh restart".into(),
        exit_code: Some(0),
        converge_s: converge,
        window_s: 4.5,
        missing_instance_seconds: missing,
        errors: 7,
        targets: vec![FaultTarget {
            target: "127.0.0.1:18848".into(),
            peak_missing: 40,
            missing_instance_seconds: missing,
            empty_lists: 5,
            partial_lists: 1,
            unanswered: 2,
        }],
    };
    let mut base = sample_report(1, 1.0);
    base.faults = vec![fault(Some(1.5), 0.0)];
    let mut head = base.clone();
    head.faults = vec![fault(None, 62.5)];
    let base = write(&dir, "base.json", &base);
    let head = write(&dir, "head.json", &head);

    let out = report_cli([&"show".into(), &head]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "Faults",
        "fault 1 at 2.0s: `sh node.sh restart` exit 0; converged never; missing 62.5 instance-s; 7 errors in 4.5s",
        "127.0.0.1:18848",
        "peak missing",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }

    let page = dir.join("head.html");
    let out = report_cli([
        "html".as_ref(),
        head.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<h2>Faults</h2>"),
        "no fault section in the page"
    );
    assert!(html.contains("converged never; missing 62.5 instance-s"));
    assert!(html.contains("<td>127.0.0.1:18848</td>") || html.contains("127.0.0.1:18848</td>"));

    let out = report_cli([&"compare".into(), &base, &head]);
    let table = stdout(&out);
    assert!(
        table.contains("fault 1: converged 1.5s -> never, missing instance-s 0.0 -> 62.5 (worse)"),
        "{table}"
    );
}
