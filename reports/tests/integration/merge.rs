//! `merge`: lossless histogram addition and counter sums.

use reports::{merge, LatencyBlock, MergeError, Report, Summary};

use crate::common::{block_of, histogram_of, sample_report, Noise};

#[test]
fn merged_percentiles_equal_the_union_of_values() {
    let mut noise = Noise::new(11);
    let a: Vec<u64> = (0..20_000).map(|_| noise.latency_us(300.0)).collect();
    let b: Vec<u64> = (0..7_000).map(|_| noise.latency_us(900.0)).collect();
    let union: Vec<u64> = a.iter().chain(&b).copied().collect();

    let mut left = sample_report(1, 1.0);
    let mut right = sample_report(2, 1.0);
    left.operations[0].corrected = block_of(&a);
    right.operations[0].corrected = block_of(&b);

    let merged = merge(&[left, right]).unwrap();
    let block = &merged.operations[0].corrected;
    let expected = histogram_of(&union);
    assert_eq!(block.histogram().unwrap(), expected);
    assert_eq!(block.summary, Summary::of(&expected));
    assert_eq!(block.summary.count, 27_000);
    // Re-encoding the same histogram gives the same text.
    assert_eq!(
        block.histogram,
        LatencyBlock::from_histogram(&expected).unwrap().histogram
    );
}

#[test]
fn counters_add_up_and_rates_sum() {
    let a = sample_report(1, 1.0);
    let b = sample_report(2, 1.5);
    let merged = merge(&[a.clone(), b.clone()]).unwrap();

    for (i, op) in merged.operations.iter().enumerate() {
        let (x, y) = (&a.operations[i], &b.operations[i]);
        assert_eq!(op.name, x.name);
        assert_eq!(op.count, x.count + y.count);
        assert_eq!(op.errors, x.errors + y.errors);
        for (class, n) in &op.errors_by_class {
            assert_eq!(*n, x.errors_by_class[class] + y.errors_by_class[class]);
        }
        assert_eq!(op.achieved_rate, x.achieved_rate + y.achieved_rate);
        assert_eq!(
            op.target_rate,
            x.target_rate.zip(y.target_rate).map(|(p, q)| p + q)
        );
        assert_eq!(op.uncorrected.summary.count, op.count);
    }
    assert_eq!(merged.timeline.len(), 30);
    for point in &merged.timeline {
        let find = |r: &Report| r.timeline.iter().find(|p| p.t_s == point.t_s).cloned();
        let (x, y) = (find(&a).unwrap(), find(&b).unwrap());
        for (name, op) in &point.ops {
            assert_eq!(op.count, x.ops[name].count + y.ops[name].count);
            assert_eq!(op.p99_us, x.ops[name].p99_us.max(y.ops[name].p99_us));
        }
    }
    let push = merged.push.as_ref().unwrap();
    assert_eq!(push.subscribers, 400);
    assert_eq!(push.latency.summary.count, 1_600);
    // Embedded targets: each process had its own server, so resources add up.
    let server = merged.server.unwrap();
    assert_eq!(server.peak_rss_bytes, Some(104 * 1024 * 1024));
    assert_eq!(server.cpu_seconds, Some(15.0));
    let verification = merged.verification.as_ref().unwrap();
    assert_eq!(verification.expected_instances, 4_000);
    assert!(verification.ok);
    assert_eq!(merged.duration_s, 30.0);
    assert_eq!(
        merged.generator.p99_send_lag_us,
        merged.send_lag.as_ref().unwrap().summary.p99_us
    );
    assert!(reports::validate_against_schema(&serde_json::to_value(&merged).unwrap()).is_ok());
}

#[test]
fn one_shared_server_is_not_counted_twice() {
    let mut a = sample_report(1, 1.0);
    let mut b = sample_report(2, 1.0);
    for r in [&mut a, &mut b] {
        r.target.embedded = false;
        r.target.url = "http://127.0.0.1:9000".into();
        if let Some(v) = r.verification.as_mut() {
            v.expected_instances = 1_000;
            v.server_instances = Some(2_000);
            v.ok = false; // each process alone sees more instances than it registered
        }
    }
    let merged = merge(&[a, b]).unwrap();
    assert_eq!(
        merged.server.unwrap().peak_rss_bytes,
        Some(52 * 1024 * 1024)
    );
    let v = merged.verification.unwrap();
    assert_eq!(
        (v.expected_instances, v.server_instances),
        (2_000, Some(2_000))
    );
    assert!(v.ok);
}

#[test]
fn refuses_mixed_versions_and_profiles() {
    let a = sample_report(1, 1.0);
    let mut b = sample_report(2, 1.0);
    b.schema_version = 2;
    assert!(matches!(
        merge(&[a.clone(), b]),
        Err(MergeError::SchemaVersion { index: 1, found: 2 })
    ));
    let mut c = sample_report(3, 1.0);
    c.profile.config_hash = "other".into();
    assert!(matches!(
        merge(&[a.clone(), c]),
        Err(MergeError::ProfileMismatch { index: 1, .. })
    ));
    assert!(matches!(merge(&[]), Err(MergeError::Empty)));
    assert_eq!(
        merge(std::slice::from_ref(&a)).unwrap().operations,
        a.operations
    );
}

#[test]
fn damaged_histograms_are_errors() {
    let a = sample_report(1, 1.0);
    let mut b = sample_report(2, 1.0);
    b.operations[1].corrected.histogram = "AAAA".into();
    let err = merge(&[a, b]).unwrap_err();
    assert!(matches!(err, MergeError::Histogram { ref operation, .. } if operation == "beat"));
}

#[test]
fn segments_merge_only_as_a_complete_split_and_the_server_total_is_judged() {
    let segment = |i: u32, n: u32, expected: u64, server: u64| {
        let mut r = sample_report(u64::from(i), 1.0);
        r.segment = Some(format!("{i}/{n}"));
        let v = r.verification.as_mut().unwrap();
        v.expected_instances = expected;
        v.server_instances = Some(server);
        v.ok = true;
        r
    };
    // The second segment finished last and saw the server hold both segments' 100.
    let merged = merge(&[segment(1, 2, 40, 70), segment(2, 2, 60, 100)]).unwrap();
    let v = merged.verification.as_ref().unwrap();
    assert_eq!((v.expected_instances, v.server_instances), (100, Some(70)));
    assert!(!v.ok, "the smallest count seen is judged: 70 of 100");
    let merged = merge(&[segment(1, 2, 40, 100), segment(2, 2, 60, 100)]).unwrap();
    assert!(merged.verification.as_ref().unwrap().ok);
    assert_eq!(merged.segment, None, "the merge covers the whole run");
    let value = serde_json::to_value(&merged).unwrap();
    reports::validate_against_schema(&value).unwrap();
    let value = serde_json::to_value(segment(1, 2, 1, 1)).unwrap();
    reports::validate_against_schema(&value).unwrap();

    for (inputs, why) in [
        (vec![segment(1, 2, 1, 1)], "missing 2/2"),
        (vec![segment(1, 2, 1, 1), segment(1, 2, 1, 1)], "twice"),
        (
            vec![segment(1, 2, 1, 1), segment(2, 3, 1, 1)],
            "another split",
        ),
        (
            vec![segment(1, 2, 1, 1), sample_report(9, 1.0)],
            "whole run",
        ),
    ] {
        let e = merge(&inputs).unwrap_err();
        assert!(matches!(e, MergeError::Segments(_)), "{e}");
        assert!(e.to_string().contains(why), "{e}");
    }
}
