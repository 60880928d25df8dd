//! The shape of the write path, checked over the server's sources: every
//! door's and task's writes go through `crate::write`, no door calls
//! another door's handlers, and the write path depends on no door.
//!
//! A source check rather than a behaviour test: what it guards against
//! (a new door translating its writes into 1.x requests, a handler
//! reached from the cluster) works until it is changed, so only the code
//! shows it. It reads `use`/path mentions of `crate::…`, which is how the
//! server's modules reach each other.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every line of code (comments stripped) under `src/<folder>` that
/// mentions one of `needles`, as `file:line: text`.
fn mentions(folder: &str, needles: &[&str]) -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let start = root.join(folder);
    if start.is_dir() {
        sources(&start, &mut files);
    } else {
        files.push(root.join(format!("{folder}.rs")));
    }
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if needles.iter().any(|n| code.contains(n)) {
                found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn the_scan_sees_what_it_looks_for() {
    // A control: the doors do use the write path, so a scan that found
    // nothing here would prove nothing below.
    for folder in ["http", "grpc", "cluster", "health"] {
        assert!(
            !mentions(folder, &["crate::write"]).is_empty(),
            "{folder} no longer names crate::write, or the scan is broken"
        );
    }
}

#[test]
fn no_door_or_task_calls_an_http_handler() {
    let handlers = [
        "http::instance",
        "http::service",
        "http::apply_write",
        "apply_write(",
        "http::dispatch",
    ];
    for folder in ["grpc", "cluster", "write", "health", "sweeper", "notifier"] {
        let found = mentions(folder, &handlers);
        assert!(
            found.is_empty(),
            "{folder} reaches into HTTP handlers:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn the_write_path_depends_on_no_door_and_not_on_the_server_state() {
    let doors = [
        "crate::http",
        "crate::grpc",
        "crate::cluster",
        "crate::state",
        "crate::App",
        "crate::console",
    ];
    let found = mentions("write", &doors);
    assert!(
        found.is_empty(),
        "the write path must sit below the doors:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_write_path_publishes_changes() {
    // Writers hand events to the change feed through `write::Writer`; a
    // direct publish elsewhere is a write that bypassed it. The feed itself
    // and the server state's test hook (`App::publish`) are the exceptions.
    // (`cluster` is not listed yet: connection-owned replication is being
    // built on the write path.)
    for folder in ["http", "grpc", "health", "sweeper"] {
        let found = mentions(folder, &[".publish("]);
        assert!(
            found.is_empty(),
            "{folder} publishes changes itself:\n{}",
            found.join("\n")
        );
    }
}
