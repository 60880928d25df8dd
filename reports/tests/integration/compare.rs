//! `compare`: thresholds, noise floors, significance and compatibility checks.

use reports::policy::Metric;
use reports::{compare, CompareError, Policy, Report, Verdict};

use crate::common::sample_report;

fn with_beat_p99(report: &Report, p99_us: u64) -> Report {
    let mut r = report.clone();
    r.operations[1].corrected.summary.p99_us = p99_us;
    r
}

fn verdict_of(c: &reports::Comparison, subject: &str, metric: Metric) -> Verdict {
    c.rows
        .iter()
        .find(|r| r.subject == subject && r.metric == metric)
        .unwrap_or_else(|| panic!("no row {subject} {metric}"))
        .verdict
}

#[test]
fn identical_reports_pass() {
    let base = sample_report(1, 1.0);
    let c = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&base),
        &Policy::default(),
    )
    .unwrap();
    assert!(!c.has_regression());
    assert!(c.rows.iter().all(|r| r.verdict == Verdict::Ok), "{c:#?}");
    assert!(c.rows.iter().all(|r| r.delta_pct == Some(0.0)));
    // Every operation, push, send lag and the server are compared.
    assert_eq!(c.rows.len(), 3 * 8 + 6 + 6 + 2);
}

#[test]
fn doubled_p99_is_a_regression() {
    let base = sample_report(1, 1.0);
    let head = with_beat_p99(&base, base.operations[1].corrected.summary.p99_us * 2);
    let c = compare(&[base], &[head], &Policy::default()).unwrap();
    assert!(c.has_regression());
    let regressions: Vec<_> = c
        .regressions()
        .map(|r| (r.subject.as_str(), r.metric))
        .collect();
    assert_eq!(regressions, [("beat", Metric::P99)]);
    let row = c.regressions().next().unwrap();
    assert!((row.delta_pct.unwrap() - 100.0).abs() < 1e-9);
    let markdown = c.to_markdown();
    assert!(markdown.contains("| beat p99 |"), "{markdown}");
    assert!(markdown.contains("+100.0%") && markdown.contains("**REGRESSION**"));
}

#[test]
fn slower_everything_regresses_and_faster_improves() {
    let base = sample_report(1, 1.0);
    let slow = sample_report(1, 2.0);
    let c = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&slow),
        &Policy::default(),
    )
    .unwrap();
    assert!(c.has_regression());
    assert_eq!(verdict_of(&c, "register", Metric::P50), Verdict::Regression);
    assert_eq!(verdict_of(&c, "push", Metric::P99), Verdict::Regression);
    let c = compare(&[slow], &[base], &Policy::default()).unwrap();
    assert!(!c.has_regression());
    assert_eq!(verdict_of(&c, "beat", Metric::P99), Verdict::Improved);
}

#[test]
fn throughput_drop_and_errors_regress() {
    let base = sample_report(1, 1.0);
    let mut head = base.clone();
    head.operations[0].achieved_rate *= 0.9;
    head.operations[2].errors = head.operations[2].count / 10;
    let c = compare(&[base], &[head], &Policy::default()).unwrap();
    assert_eq!(
        verdict_of(&c, "register", Metric::Throughput),
        Verdict::Regression
    );
    assert_eq!(
        verdict_of(&c, "query", Metric::ErrorRate),
        Verdict::Regression
    );
}

#[test]
fn sub_noise_deltas_never_fail() {
    // +50 % on a 200 µs p99 is 100 µs, under the default 500 µs floor.
    let base = with_beat_p99(&sample_report(1, 1.0), 200);
    let head = with_beat_p99(&base, 300);
    let c = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&head),
        &Policy::default(),
    )
    .unwrap();
    assert!(!c.has_regression());
    assert_eq!(verdict_of(&c, "beat", Metric::P99), Verdict::WithinNoise);

    // With the floor lowered, the same change fails.
    let strict = Policy::from_toml_str("[metrics.p99]\nnoise_floor = 50.0").unwrap();
    let c = compare(&[base], &[head], &strict).unwrap();
    assert_eq!(verdict_of(&c, "beat", Metric::P99), Verdict::Regression);
}

#[test]
fn repeated_runs_must_differ_significantly() {
    let template = sample_report(1, 1.0);
    let runs = |values: &[u64]| -> Vec<Report> {
        values
            .iter()
            .map(|&v| with_beat_p99(&template, v))
            .collect()
    };
    // Head's mean is 20 % higher (and 600 µs, above the floor), but the runs overlap.
    let noisy_base = runs(&[2_000, 4_000, 3_000]);
    let noisy_head = runs(&[2_600, 4_600, 3_600]);
    let c = compare(&noisy_base, &noisy_head, &Policy::default()).unwrap();
    assert_eq!(verdict_of(&c, "beat", Metric::P99), Verdict::NotSignificant);
    assert!(!c.has_regression());
    let row = c
        .rows
        .iter()
        .find(|r| r.subject == "beat" && r.metric == Metric::P99)
        .unwrap();
    assert!(row.p_value.unwrap() > 0.05);

    // The same 20 % shift with tight runs is significant.
    let tight_base = runs(&[3_000, 3_020, 2_980]);
    let tight_head = runs(&[3_600, 3_620, 3_580]);
    let c = compare(&tight_base, &tight_head, &Policy::default()).unwrap();
    assert_eq!(verdict_of(&c, "beat", Metric::P99), Verdict::Regression);
    assert_eq!((c.base_runs, c.head_runs), (3, 3));

    // Identical repeated runs: p = 1, nothing flagged.
    let c = compare(&tight_base, &tight_base, &Policy::default()).unwrap();
    assert!(!c.has_regression());
}

#[test]
fn refuses_other_profiles_unless_forced() {
    let base = sample_report(1, 1.0);
    let mut head = base.clone();
    head.profile.name = "nacos-1x-report".into();
    let err = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&head),
        &Policy::default(),
    )
    .unwrap_err();
    assert!(matches!(err, CompareError::ProfileMismatch { ref run, .. } if run == "head[0]"));

    let mut hash = base.clone();
    hash.profile.config_hash = "different".into();
    assert!(matches!(
        compare(std::slice::from_ref(&base), &[hash], &Policy::default()),
        Err(CompareError::ProfileMismatch { .. })
    ));

    let forced = Policy {
        force: true,
        ..Policy::default()
    };
    let c = compare(&[base], &[head], &forced).unwrap();
    assert_eq!(c.warnings.len(), 1);
    assert!(c.to_markdown().contains("warning: forced"));
}

#[test]
fn refuses_other_machines_unless_forced() {
    let base = sample_report(1, 1.0);
    let mut cores = base.clone();
    cores.environment.cores = 16;
    let mut cpu = base.clone();
    cpu.environment.cpu_model = "Other CPU".into();
    for head in [cores, cpu] {
        assert!(matches!(
            compare(
                std::slice::from_ref(&base),
                std::slice::from_ref(&head),
                &Policy::default()
            ),
            Err(CompareError::EnvironmentMismatch { .. })
        ));
        let forced = Policy {
            force: true,
            ..Policy::default()
        };
        assert!(compare(std::slice::from_ref(&base), &[head], &forced).is_ok());
    }
    // A mismatch inside one side is refused too.
    let mut other_base = base.clone();
    other_base.environment.cores = 4;
    assert!(matches!(
        compare(
            &[base.clone(), other_base],
            std::slice::from_ref(&base),
            &Policy::default()
        ),
        Err(CompareError::EnvironmentMismatch { ref run, .. }) if run == "base[1]"
    ));
    // Other format versions are refused even when forced.
    let mut v2 = base.clone();
    v2.schema_version = 2;
    let forced = Policy {
        force: true,
        ..Policy::default()
    };
    assert!(matches!(
        compare(&[base], &[v2], &forced),
        Err(CompareError::SchemaVersion { .. })
    ));
    assert!(matches!(
        compare(&[], &[sample_report(1, 1.0)], &Policy::default()),
        Err(CompareError::NoRuns { side: "base" })
    ));
}

#[test]
fn added_operations_are_reported_missing_not_failed() {
    let base = sample_report(1, 1.0);
    let mut head = base.clone();
    let mut extra = head.operations[0].clone();
    extra.name = "deregister".into();
    head.operations.push(extra);
    let c = compare(&[base], &[head], &Policy::default()).unwrap();
    assert!(!c.has_regression());
    assert_eq!(verdict_of(&c, "deregister", Metric::P99), Verdict::Missing);
}

#[test]
fn advisory_metrics_warn_without_failing() {
    let base = sample_report(1, 1.0);
    let mut head = base.clone();
    head.send_lag.as_mut().unwrap().summary.p99_us *= 10;
    head.operations[1].corrected.summary.max_us *= 10;
    let c = compare(&[base], &[head], &Policy::default()).unwrap();
    assert!(!c.has_regression());
    assert_eq!(verdict_of(&c, "send_lag", Metric::P99), Verdict::Warning);
    assert_eq!(verdict_of(&c, "beat", Metric::Max), Verdict::Warning);
}

/// A run that failed its thresholds (loadgen exit 3), fell behind (exit 4) or
/// skipped slots is refused, naming the run and why, unless `allow_invalid`.
#[test]
fn refuses_invalid_runs_unless_allowed() {
    let base = sample_report(1, 1.0);
    let mut failed = base.clone();
    failed.thresholds[0].passed = false;
    let mut behind = base.clone();
    behind.generator.fell_behind = true;
    let mut skipped = base.clone();
    skipped.generator.skipped_slots = 7;
    for (head, why) in [
        (&failed, "failed thresholds beat.p99<20ms"),
        (&behind, "fell behind"),
        (&skipped, "skipped 7 schedule slot(s)"),
    ] {
        let err = compare(
            std::slice::from_ref(&base),
            std::slice::from_ref(head),
            &Policy::default(),
        )
        .unwrap_err();
        assert!(matches!(err, CompareError::InvalidRun { ref run, .. } if run == "head[0]"));
        assert!(err.to_string().contains(why), "{err}");
        // The base side is checked too.
        assert!(compare(
            std::slice::from_ref(head),
            std::slice::from_ref(&base),
            &Policy::default()
        )
        .is_err());
    }
    let allowed = Policy {
        allow_invalid: true,
        ..Policy::default()
    };
    let c = compare(&[base], &[failed], &allowed).unwrap();
    assert!(c
        .to_markdown()
        .contains("allowed: head[0] is not a valid run"));
}
