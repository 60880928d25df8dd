//! Generator-limited figures: a report whose corrected p99 is mostly send lag says
//! so, and `report compare` refuses to call a worse such figure a server regression
//! unless `--allow-generator-limited` is given.

use reports::policy::Metric;
use reports::{compare, Policy, Report, Verdict};

use crate::common::{block_of, report_cli, sample_report, scratch, stdout, write};

/// `base` with beat's corrected p99 scaled by `scale`, and its send lag set to
/// `lag_share` of each of its corrected percentiles.
fn beat_with_lag(base: &Report, scale: f64, lag_share: f64) -> Report {
    let mut r = base.clone();
    let beat = &mut r.operations[1];
    assert_eq!(beat.name, "beat");
    beat.corrected.summary.p99_us = (beat.corrected.summary.p99_us as f64 * scale) as u64;
    let s = beat.corrected.summary;
    let lag = |us: u64| (us as f64 * lag_share) as u64;
    // A distribution whose p50 and p99 are the shares of the corrected ones.
    let mut values = vec![lag(s.p50_us).max(1); 98];
    values.extend([lag(s.p99_us).max(1); 2]);
    beat.send_lag = Some(block_of(&values));
    r
}

#[test]
fn a_report_whose_p99_is_mostly_send_lag_is_flagged() {
    let base = sample_report(1, 1.0);
    let limited = beat_with_lag(&base, 1.0, 0.8);
    let share = reports::lag::share(&limited.operations[1]).unwrap();
    let allowance = reports::lag::Allowance::of(&limited);
    assert!(
        allowance.wakeup_p99_us.is_some(),
        "the fixture measured its wake-ups"
    );
    assert!(
        share.limited(allowance) && share.p99_pct > 70.0,
        "{share:?}"
    );
    assert_eq!(reports::lag::limited_ops(&limited), ["beat"]);
    let text = reports::show::render(&limited, reports::Format::Text);
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("GENERATOR-LIMITED"))
        .collect();
    // The note under the operations and the generator's headline, from one verdict.
    assert_eq!(flagged.len(), 2, "two lines say so, and agree:\n{text}");
    assert!(flagged.iter().all(|l| l.contains("beat")), "{flagged:?}");
    assert!(!text.contains("no figure generator-limited"), "{text}");
    assert!(text.contains("LIMITED"), "the beat row carries its share");
    // On time: no flag.
    let on_time = beat_with_lag(&base, 1.0, 0.01);
    let text = reports::show::render(&on_time, reports::Format::Text);
    assert!(!text.contains("GENERATOR-LIMITED"), "{text}");
    assert!(text.contains("kept its schedule") && text.contains("no figure generator-limited"));
}

#[test]
fn compare_refuses_a_generator_limited_regression_unless_allowed() {
    let base = beat_with_lag(&sample_report(1, 1.0), 1.0, 0.01);
    // Head's beat p99 doubled, and most of it is send lag.
    let head = beat_with_lag(&base, 2.0, 0.8);
    let c = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&head),
        &Policy::default(),
    )
    .unwrap();
    let beat_p99 = c
        .rows
        .iter()
        .find(|r| r.subject == "beat" && r.metric == Metric::P99)
        .unwrap();
    assert_eq!(beat_p99.verdict, Verdict::GeneratorLimited);
    assert!(!c.has_regression(), "not called a server regression");
    let markdown = c.to_markdown();
    assert!(
        markdown.contains("generator-limited") && markdown.contains("--allow-generator-limited"),
        "{markdown}"
    );
    let allowed = Policy {
        allow_generator_limited: true,
        ..Policy::default()
    };
    let c = compare(
        std::slice::from_ref(&base),
        std::slice::from_ref(&head),
        &allowed,
    )
    .unwrap();
    assert!(c.has_regression(), "allowed: judged as any other figure");
    // The same doubling with the generator on time is a regression as before.
    let on_time_head = beat_with_lag(&base, 2.0, 0.01);
    let c = compare(
        std::slice::from_ref(&base),
        &[on_time_head],
        &Policy::default(),
    )
    .unwrap();
    assert!(c.has_regression());

    // Through the CLI: exit 0 and the refusal, exit 1 with the flag.
    let dir = scratch("cli-generator-limited");
    let (b, h) = (
        write(&dir, "base.json", &base),
        write(&dir, "head.json", &head),
    );
    let out = report_cli([&"compare".into(), &b, &h]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("generator-limited"));
    let out = report_cli([
        &"compare".into(),
        &b,
        &h,
        &"--allow-generator-limited".into(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}
