//! `report show`: a report as readable sections, rendered as terminal text,
//! Markdown (for CI summaries) or HTML (the page's tables).
//!
//! The operations table follows wrk2: count, achieved and target rate, p50 …
//! p99.99 and max, errors; each operation has a *corrected* row (latency from the
//! intended send time, what clients experience) and an *uncorrected* row
//! (latency from the actual send, the server's service time). A large gap between
//! the two means requests queued, at the server or in the generator.

use std::fmt::Write as _;

use crate::latency::Summary;
use crate::report::{PushStats, Report, ServerStats, Verification};
use crate::table::{self, Table};

/// Output format of `report show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned plain text for a terminal.
    #[default]
    Text,
    /// GitHub-flavoured Markdown.
    Markdown,
}

/// One titled part of the rendered report.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Sentences shown before the table.
    pub lines: Vec<String>,
    /// The section's table, if it has one.
    pub table: Option<Table>,
}

impl Section {
    fn new(title: impl Into<String>) -> Self {
        Section {
            title: title.into(),
            lines: Vec::new(),
            table: None,
        }
    }
}

fn latency_cells(summary: &Summary) -> [String; 6] {
    [
        summary.p50_us,
        summary.p90_us,
        summary.p99_us,
        summary.p999_us,
        summary.p9999_us,
        summary.max_us,
    ]
    .map(|us| table::micros(us as f64))
}

fn latency_table(first_header: &str, rows: &[(String, &Summary)]) -> Table {
    let mut t = Table::new([
        first_header,
        "count",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
    ]);
    for (name, summary) in rows {
        let mut cells = vec![name.clone(), summary.count.to_string()];
        cells.extend(latency_cells(summary));
        t.push(cells);
    }
    t
}

/// The report as sections, in display order.
pub fn sections(report: &Report) -> Vec<Section> {
    let mut out = vec![run_section(report), operations_section(report)];
    out.extend(phases_section(report));
    out.extend(errors_section(report));
    out.extend(reasons_section(report));
    out.extend(report.push.as_ref().map(push_section));
    out.push(generator_section(report));
    out.extend(report.server.as_ref().map(server_section));
    out.extend(report.verification.as_ref().map(verification_section));
    out.extend(crate::fault::section(&report.faults));
    out.extend(thresholds_section(report));
    out
}

/// Tool, profile, target and machine.
fn run_section(report: &Report) -> Section {
    let mut run = Section::new("Run");
    run.lines.push(format!(
        "{} {}: profile {} (config {}), started {}, {:.1} s",
        report.tool,
        report.tool_version,
        report.profile.name,
        report.profile.config_hash,
        report.started_at,
        report.duration_s
    ));
    run.lines.push(format!(
        "target {}{}",
        report.target.url,
        if report.target.embedded {
            " (embedded)"
        } else {
            ""
        }
    ));
    let env = &report.environment;
    run.lines.push(format!(
        "environment: commit {}, {}, {} x {} cores, kernel {}, {}{}",
        env.commit,
        env.rustc,
        env.cpu_model,
        env.cores,
        env.kernel,
        env.os,
        env.pinning
            .as_deref()
            .map(|p| format!(", pinning {p}"))
            .unwrap_or_default()
    ));
    run
}

/// One corrected and one uncorrected row per operation, wrk2's columns.
fn operations_section(report: &Report) -> Section {
    let mut ops = Section::new("Operations");
    ops.lines.push(
        "corrected: from the intended send time (what clients see); uncorrected: from the actual send"
            .to_owned(),
    );
    let mut t = Table::new([
        "operation",
        "latency",
        "count",
        "rate",
        "target",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "p99.99",
        "max",
        "errors",
        "send lag p50/p99",
        "connection wait p50/p99",
    ]);
    let allowance = crate::lag::Allowance::of(report);
    for op in &report.operations {
        let target = match op.target_rate {
            Some(target) if target > 0.0 => format!(
                "{} ({:.1}%)",
                table::per_second(target),
                op.achieved_rate / target * 100.0
            ),
            Some(target) => table::per_second(target),
            None => "-".to_owned(),
        };
        let errors = format!("{} ({})", op.errors, table::fraction(op.error_rate()));
        for (kind, block) in [
            ("corrected", &op.corrected),
            ("uncorrected", &op.uncorrected),
        ] {
            let mut cells = vec![
                op.name.clone(),
                kind.to_owned(),
                op.count.to_string(),
                table::per_second(op.achieved_rate),
                target.clone(),
            ];
            cells.extend(latency_cells(&block.summary));
            cells.push(errors.clone());
            if kind == "corrected" {
                cells.push(lag_cell(op, allowance));
                cells.push(wait_cell(op));
            } else {
                cells.extend([String::new(), String::new()]);
            }
            t.push(cells);
        }
    }
    ops.table = Some(t);
    ops.lines.extend(crate::lag::Verdict::of(report).note());
    ops
}

/// Errors by operation and class; none when there were no errors.
fn errors_section(report: &Report) -> Option<Section> {
    let classes: Vec<(String, String, u64)> = report
        .operations
        .iter()
        .flat_map(|op| {
            op.errors_by_class
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(class, n)| (op.name.clone(), class.clone(), *n))
        })
        .collect();
    if classes.is_empty() {
        return None;
    }
    let mut errors = Section::new("Errors by class");
    let mut t = Table::new(["operation", "class", "count"]);
    for (op, class, n) in classes {
        t.push([op, class, n.to_string()]);
    }
    errors.table = Some(t);
    Some(errors)
}

/// The first distinct messages of each operation's error classes, with counts; none
/// when the report has none (no errors, or an older report).
fn reasons_section(report: &Report) -> Option<Section> {
    let mut t = Table::new(["operation", "class", "count", "message"]);
    for op in &report.operations {
        for sample in &op.error_samples {
            t.push([
                op.name.clone(),
                sample.class.clone(),
                sample.count.to_string(),
                sample.message.clone(),
            ]);
        }
    }
    if t.rows.is_empty() {
        return None;
    }
    let mut s = Section::new("Error reasons");
    s.lines.push(format!(
        "the first {} distinct messages of each class per operation",
        crate::reasons::MESSAGES_PER_CLASS
    ));
    s.table = Some(t);
    Some(s)
}

/// Subscribers, pushes and their latency.
fn push_section(push: &PushStats) -> Section {
    let mut s = Section::new("Push propagation");
    s.lines.push(format!(
        "{} subscribers, {} pushes received, {} acks sent, {}",
        push.subscribers,
        push.pushes_received,
        push.acks_sent,
        if push.converged {
            "converged".to_owned()
        } else {
            format!(
                "NOT converged ({} subscribers mismatched)",
                push.mismatched_subscribers
            )
        }
    ));
    s.table = Some(latency_table(
        "latency",
        &[("change to receipt".to_owned(), &push.latency.summary)],
    ));
    s
}

/// Whether the generator kept up with its schedule and how its send lag compares with
/// the machine's own wake-up lateness: [`crate::lag::Verdict`]'s words.
fn generator_section(report: &Report) -> Section {
    let verdict = crate::lag::Verdict::of(report);
    let mut generator = Section::new("Generator");
    generator.lines.push(verdict.headline());
    if verdict.skipped_slots > 0 {
        generator.lines.push(format!(
            "INVALID RUN: {} schedule slots skipped (planned load never offered)",
            verdict.skipped_slots
        ));
    }
    let stamps: Vec<(&str, crate::report::SendStamps)> = report
        .operations
        .iter()
        .filter_map(|op| op.send_stamps.map(|s| (op.name.as_str(), s)))
        .collect();
    if !stamps.is_empty() {
        let (stamped, fallback) = stamps
            .iter()
            .fold((0, 0), |(a, b), (_, s)| (a + s.stamped, b + s.fallback));
        generator.lines.push(format!(
            "send times: {stamped} stamped by the socket, {fallback} by the fallback (the call's start){}",
            if fallback > 0 {
                ": those calls' send lag and service time are known no better than their start"
            } else {
                ""
            }
        ));
    }
    let mut rows = Vec::new();
    if let Some(lag) = &report.send_lag {
        rows.push(("send lag (write - writable)".to_owned(), &lag.summary));
    }
    if let Some(wake) = &report.wakeup_lateness {
        rows.push(("wake-up lateness (machine)".to_owned(), &wake.summary));
    }
    if !rows.is_empty() {
        generator.table = Some(latency_table("generator", &rows));
    }
    generator
}

/// The server's memory and CPU.
fn server_section(server: &ServerStats) -> Section {
    let mut s = Section::new("Server");
    let opt_bytes = |b: Option<u64>| b.map_or("-".to_owned(), |b| table::bytes(b as f64));
    s.lines.push(format!(
        "RSS {}, peak RSS {}, CPU {}",
        opt_bytes(server.rss_bytes),
        opt_bytes(server.peak_rss_bytes),
        server
            .cpu_seconds
            .map_or("-".to_owned(), |c| format!("{c:.2} s"))
    ));
    s
}

/// Whether the server holds what the run registered.
fn verification_section(v: &Verification) -> Section {
    let mut s = Section::new("Verification");
    s.lines.push(format!(
        "{}: expected {} instances, server has {}{}",
        if v.ok { "ok" } else { "FAILED" },
        v.expected_instances,
        v.server_instances
            .map_or("an unknown number (not read)".to_owned(), |n| n.to_string()),
        if v.detail.is_empty() {
            String::new()
        } else {
            format!(" ({})", v.detail)
        }
    ));
    s
}

/// Each threshold with its actual value; none when the run had none.
fn thresholds_section(report: &Report) -> Option<Section> {
    if report.thresholds.is_empty() {
        return None;
    }
    let mut s = Section::new("Thresholds");
    let mut t = Table::new(["threshold", "actual", "result"]);
    for th in &report.thresholds {
        t.push([
            th.expr.clone(),
            format!("{}", th.actual),
            if th.passed { "pass" } else { "FAIL" }.to_owned(),
        ]);
    }
    s.table = Some(t);
    Some(s)
}

/// How much of an operation's corrected p50 and p99 is send lag, and of that what
/// it queued in the generator's client where it says: `12µs 3% / 80µs 8%; in
/// client 5µs / 40µs`.
fn lag_cell(op: &crate::report::Operation, allowance: crate::lag::Allowance) -> String {
    let share = match crate::lag::share(op) {
        Some(s) => format!(
            "{} {:.0}% / {} {:.0}%{}",
            table::micros(s.lag_p50_us as f64),
            s.p50_pct,
            table::micros(s.lag_p99_us as f64),
            s.p99_pct,
            if s.limited(allowance) { " LIMITED" } else { "" }
        ),
        None => return "-".to_owned(),
    };
    match &op.client_queue {
        Some(q) => format!(
            "{share}; in client {} / {}",
            table::micros(q.summary.p50_us as f64),
            table::micros(q.summary.p99_us as f64)
        ),
        None => share,
    }
}

/// What an operation waited for its connection, p50/p99: `0µs / 1.2ms`.
fn wait_cell(op: &crate::report::Operation) -> String {
    match &op.connection_wait {
        Some(w) => format!(
            "{} / {}",
            table::micros(w.summary.p50_us as f64),
            table::micros(w.summary.p99_us as f64)
        ),
        None => "-".to_owned(),
    }
}

/// Per phase: planned and actual length, and each scheduled operation's intended
/// against achieved rate.
fn phases_section(report: &Report) -> Option<Section> {
    if report.phases.is_empty() {
        return None;
    }
    let mut s = Section::new("Phases");
    s.lines
        .push("rates the profile intended against those achieved, per phase".to_owned());
    let mut t = Table::new([
        "phase",
        "planned",
        "took",
        "operation",
        "intended",
        "achieved",
    ]);
    for phase in &report.phases {
        for op in &phase.ops {
            t.push([
                phase.phase.clone(),
                format!("{:.1}s", phase.planned_s),
                format!("{:.1}s", phase.actual_s),
                op.name.clone(),
                table::per_second(op.intended_rate),
                format!(
                    "{} ({:.1}%)",
                    table::per_second(op.achieved_rate),
                    op.ratio() * 100.0
                ),
            ]);
        }
    }
    s.table = Some(t);
    Some(s)
}

/// Renders a report in the given format.
pub fn render(report: &Report, format: Format) -> String {
    let mut out = String::new();
    for section in sections(report) {
        match format {
            Format::Text => {
                let _ = writeln!(out, "== {} ==", section.title);
            }
            Format::Markdown => {
                let _ = writeln!(out, "### {}\n", section.title);
            }
        }
        for line in &section.lines {
            // Markdown joins adjacent lines into one paragraph; keep them apart.
            let _ = match format {
                Format::Text => writeln!(out, "{line}"),
                Format::Markdown => writeln!(out, "{line}\n"),
            };
        }
        if let Some(t) = &section.table {
            if format == Format::Text && !section.lines.is_empty() {
                out.push('\n');
            }
            out.push_str(&match format {
                Format::Text => t.to_text(),
                Format::Markdown => t.to_markdown(),
            });
        }
        out.push('\n');
    }
    out
}
