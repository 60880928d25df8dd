//! Renders the HTML page in real headless Chromium and checks that every chart
//! was drawn (the page's own script marks each chart after measuring its lines)
//! and that the page logged nothing.
//!
//! Needs the Debian package `chromium` at /usr/bin/chromium (or the path in
//! `$CHROMIUM`); install it with `scripts/deps/chromium.sh`. Without it these
//! tests fail, on purpose: a skipped browser test hides a broken page.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{report_cli, sample_report, scratch, stderr, write};

const TIMEOUT: Duration = Duration::from_secs(120);

fn chromium() -> PathBuf {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.exists(),
        "headless Chromium not found at {}: run scripts/deps/chromium.sh (installs the Debian package `chromium`)",
        path.display()
    );
    path
}

/// What Chromium produced for one page.
struct Rendered {
    dom: String,
    /// Lines of Chromium's log that came from the page: console output or uncaught errors.
    page_messages: Vec<String>,
}

/// Loads `page` in headless Chromium and returns the DOM after scripts ran.
fn render(page: &Path, dir: &Path) -> Rendered {
    let profile = dir.join("chromium-profile");
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    let dom_path = dir.join("dom.html");
    let log_path = dir.join("chromium.log");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(&url)
        .stdin(Stdio::null())
        .stdout(File::create(&dom_path).unwrap())
        .stderr(File::create(&log_path).unwrap())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(status.success(), "chromium failed ({status}):\n{log}");
    let page_messages = log
        .lines()
        .filter(|line| {
            line.contains(":CONSOLE")
                || line.contains("CONSOLE(")
                || line.contains("Uncaught")
                || line.contains("Failed to load resource")
        })
        .map(str::to_owned)
        .collect();
    Rendered {
        dom: std::fs::read_to_string(&dom_path).unwrap(),
        page_messages,
    }
}

/// The opening tag and body of the chart with this `data-chart` id.
fn chart<'a>(dom: &'a str, id: &str) -> &'a str {
    let marker = format!(r#"data-chart="{id}""#);
    let at = dom
        .find(&marker)
        .unwrap_or_else(|| panic!("chart {id} not in the rendered DOM"));
    let start = dom[..at].rfind("<svg").expect("chart is an svg");
    let end = at + dom[at..].find("</svg>").expect("svg is closed");
    &dom[start..end]
}

#[test]
fn html_chromium_draws_every_chart_without_console_output() {
    let dir = scratch("html-chromium");
    let file = write(&dir, "run.json", &sample_report(5, 1.0));
    let page = dir.join("run.html");
    let out = report_cli([
        "html".as_ref(),
        file.as_os_str(),
        "-o".as_ref(),
        page.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let rendered = render(&page, &dir);
    assert!(
        rendered.page_messages.is_empty(),
        "the page logged to the console:\n{}",
        rendered.page_messages.join("\n")
    );
    let mut ids: Vec<String> = Vec::new();
    for op in ["register", "beat", "query"] {
        for kind in ["latency", "throughput", "spectrum"] {
            ids.push(format!("{kind}-{op}"));
        }
    }
    ids.push("push-spectrum".into());
    ids.push("send-lag-spectrum".into());
    for id in &ids {
        let svg = chart(&rendered.dom, id);
        let open_tag = &svg[..svg.find('>').unwrap()];
        assert!(
            open_tag.contains(r#"data-drawn="true""#),
            "chart {id} was not drawn by the browser: {open_tag}"
        );
        let d = svg
            .split(r#"<path class="series"#)
            .nth(1)
            .and_then(|rest| rest.split(r#" d=""#).nth(1))
            .map(|rest| &rest[..rest.find('"').unwrap_or(0)])
            .unwrap_or_else(|| panic!("chart {id} has no series path"));
        assert!(
            d.starts_with('M') && d.contains(" L"),
            "chart {id} path data: {d:?}"
        );
    }
    assert!(
        rendered
            .dom
            .contains(&format!(r#"data-charts-drawn="{}""#, ids.len())),
        "the page's self-check did not count {} charts",
        ids.len()
    );
}

#[test]
fn html_chromium_check_catches_a_broken_page() {
    // Proves the check above can fail: console output and an uncaught error are
    // reported, and a chart whose path has no length is marked not drawn.
    let dir = scratch("html-chromium-broken");
    let page = dir.join("broken.html");
    std::fs::write(
        &page,
        r#"<!DOCTYPE html><html><body>
<svg class="chart" data-chart="latency-beat"><path class="series s0" d=""/></svg>
<script>console.error("boom"); missingFunction();</script>
</body></html>"#,
    )
    .unwrap();
    let rendered = render(&page, &dir);
    assert!(
        rendered.page_messages.iter().any(|l| l.contains("boom")),
        "{:?}",
        rendered.page_messages
    );
    assert!(rendered
        .page_messages
        .iter()
        .any(|l| l.contains("Uncaught")));
    assert!(!chart(&rendered.dom, "latency-beat").contains(r#"data-drawn="true""#));
}
