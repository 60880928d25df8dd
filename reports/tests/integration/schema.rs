//! Schema round trips, validation against the committed JSON Schema, and the
//! golden version-1 report that must keep loading.

use std::path::Path;

use reports::{validate_against_schema, Report, ReportError};
use serde_json::{json, Value};

use crate::common::{minimal_report, sample_report};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1.json");

fn assert_valid(report: &Report) {
    let value = serde_json::to_value(report).unwrap();
    if let Err(errors) = validate_against_schema(&value) {
        panic!("report does not match the schema:\n{}", errors.join("\n"));
    }
}

#[test]
fn full_report_round_trips_and_validates() {
    let report = sample_report(1, 1.0);
    let text = report.to_json_pretty().unwrap();
    let back = Report::from_json_str(&text).unwrap();
    assert_eq!(back, report);
    assert_eq!(back.to_json_pretty().unwrap(), text);
    assert_valid(&report);
}

#[test]
fn minimal_report_round_trips_and_validates() {
    let report = minimal_report();
    let value = serde_json::to_value(&report).unwrap();
    // Absent optional blocks are written as null, never left out.
    for key in ["send_lag", "push", "server", "verification"] {
        assert_eq!(value[key], Value::Null, "{key}");
    }
    assert_eq!(Report::from_json_value(value).unwrap(), report);
    assert_valid(&report);
}

#[test]
fn schema_catches_drift_from_the_types() {
    let good = serde_json::to_value(sample_report(2, 1.0)).unwrap();
    let mut cases: Vec<(&str, Value)> = Vec::new();

    let mut extra_top = good.clone();
    extra_top["deltas"] = json!({});
    cases.push(("unknown top-level field", extra_top));

    let mut extra_op = good.clone();
    extra_op["operations"][0]["p99_us"] = json!(1);
    cases.push(("unknown operation field", extra_op));

    let mut missing = good.clone();
    missing["operations"][0]["corrected"]["summary"]
        .as_object_mut()
        .unwrap()
        .remove("p9999_us");
    cases.push(("missing summary field", missing));

    let mut wrong_type = good.clone();
    wrong_type["operations"][1]["count"] = json!("12000");
    cases.push(("count as string", wrong_type));

    let mut bad_version = good.clone();
    bad_version["schema_version"] = json!(2);
    cases.push(("other version", bad_version));

    let mut bad_histogram = good.clone();
    bad_histogram["operations"][0]["corrected"]["histogram"] = json!("not base64!");
    cases.push(("histogram not base64", bad_histogram));

    for (what, value) in cases {
        assert!(
            validate_against_schema(&value).is_err(),
            "schema accepted: {what}"
        );
    }
    assert!(validate_against_schema(&good).is_ok());
}

#[test]
fn golden_v1_report_still_loads() {
    // REPORTS_BLESS=1 rewrites the golden file from the fixture; do that only when
    // the format changes on purpose (and bump SCHEMA_VERSION if old files break).
    if std::env::var_os("REPORTS_BLESS").is_some() {
        sample_report(7, 1.0).save(GOLDEN).unwrap();
    }
    assert!(Path::new(GOLDEN).exists(), "missing {GOLDEN}");
    let text = std::fs::read_to_string(GOLDEN).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    if let Err(errors) = validate_against_schema(&value) {
        panic!(
            "golden report no longer matches the schema:\n{}",
            errors.join("\n")
        );
    }
    let report = Report::from_json_str(&text).unwrap();
    assert_eq!(report.operations.len(), 3);
    for op in &report.operations {
        let histogram = op.corrected.histogram().unwrap();
        assert_eq!(histogram.len(), op.count);
        assert_eq!(
            histogram.value_at_quantile(0.99),
            op.corrected.summary.p99_us
        );
    }
}

#[test]
fn bad_files_are_errors_not_panics() {
    let missing = Report::load("/nonexistent/report.json").unwrap_err();
    assert!(matches!(missing, ReportError::Io { .. }));
    assert!(missing.to_string().contains("/nonexistent/report.json"));

    let mut value = serde_json::to_value(sample_report(3, 1.0)).unwrap();
    value["operations"][0]["corrected"]["histogram"] = json!("AAAA");
    let report = Report::from_json_value(value).unwrap();
    assert!(report.operations[0].corrected.histogram().is_err());

    assert!(Report::from_json_str(r#"{"schema_version": 1}"#).is_err());
    assert!(Report::from_json_str("").is_err());
}
