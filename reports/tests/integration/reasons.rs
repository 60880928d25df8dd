//! Errors carry their reasons: a report's error samples are shown by `report show`
//! and on the HTML page, merged by `report merge` (counts added, still bounded),
//! and a verification whose server count could not be read says so instead of 0.

use reports::reasons::MESSAGES_PER_CLASS;

use crate::common::{report_cli, sample_report, scratch, stdout, write};

#[test]
fn error_messages_are_shown_and_merged_with_their_counts() {
    let mut a = sample_report(1, 1.0);
    let mut b = sample_report(2, 1.0);
    // Segment b saw more distinct timeouts than a class keeps.
    for i in 0..MESSAGES_PER_CLASS + 2 {
        let beat = &mut b.operations[1];
        reports::reasons::add(
            &mut beat.error_samples,
            "timeout",
            &format!("stalled {i}"),
            1,
        );
    }
    a.operations[0].send_stamps = Some(reports::SendStamps {
        stamped: 10,
        fallback: 2,
    });
    let text = reports::show::render(&a, reports::Format::Text);
    assert!(text.contains("== Error reasons =="), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("HTTP 503: server busy") && l.contains("register"))
        .expect("register's 503s with their message");
    assert!(line.contains(&(3_000 / 500 / 2).to_string()), "{line}");
    assert!(text.contains("2 by the fallback"), "{text}");
    let html = reports::render_html(&a).unwrap();
    assert!(html.contains("HTTP 503: server busy") && html.contains("wake-up lateness"));

    let dir = scratch("reasons-merge");
    let (fa, fb) = (write(&dir, "a.json", &a), write(&dir, "b.json", &b));
    let merged_path = dir.join("merged.json");
    let out = report_cli([&"merge".into(), &fa, &fb, &"-o".into(), &merged_path]);
    assert!(out.status.success(), "{}", stdout(&out));
    let merged = reports::Report::load(&merged_path).unwrap();
    let beat = merged.operation("beat").unwrap();
    let busy = beat
        .error_samples
        .iter()
        .find(|s| s.message == "HTTP 503: server busy")
        .unwrap();
    let each = a.operation("beat").unwrap().error_samples[0].count;
    assert_eq!(busy.count, 2 * each, "counts add");
    let timeouts = beat.error_samples.iter().filter(|s| s.class == "timeout");
    assert_eq!(timeouts.count(), MESSAGES_PER_CLASS, "still bounded");
    let stamps = merged.operation("register").unwrap().send_stamps.unwrap();
    assert_eq!((stamps.stamped, stamps.fallback), (10 + 3_000, 2));
    assert!(
        merged.wakeup_lateness.is_some(),
        "wake-ups merge as send lag does"
    );
}

#[test]
fn an_unread_server_count_is_unknown_not_zero() {
    let mut r = sample_report(1, 1.0);
    let v = r.verification.as_mut().unwrap();
    v.server_instances = None;
    v.ok = false;
    v.detail = "server instances unknown (could not read: refused)".into();
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["verification"]["server_instances"].is_null());
    reports::validate_against_schema(&json).unwrap();
    let text = reports::show::render(&r, reports::Format::Text);
    assert!(
        text.contains("server has an unknown number (not read)") && text.contains("refused"),
        "{text}"
    );
    // An older report's number still reads.
    let mut old = json.clone();
    old["verification"]["server_instances"] = 0.into();
    let back = reports::Report::from_json_value(old).unwrap();
    assert_eq!(back.verification.unwrap().server_instances, Some(0));
}
