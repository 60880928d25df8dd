//! `report html`: one self-contained HTML page with the report's tables and charts.
//!
//! Everything is inline: CSS in a `<style>`, charts as SVG drawn in Rust (see
//! [`crate::chart`]), and one short script that checks, in the browser, that every
//! chart's lines have a real length and marks each chart `data-drawn="true"`.
//! That mark is what the headless-Chromium test looks for; the script logs
//! nothing. The page loads no scripts, fonts, images or styles from anywhere.
//!
//! Per operation the page shows p99 latency over time and throughput over time
//! (both from the per-second timeline) and the corrected and uncorrected
//! percentile spectra (from the decoded histograms). Push propagation and send
//! lag get a spectrum each. Chart ids: `latency-OP`, `throughput-OP`,
//! `spectrum-OP` (OP from [`slug`]), `push-spectrum`, `send-lag-spectrum`.

use std::fmt::Write as _;

use crate::chart::{escape, Chart, Series, XAxis, YAxis};
use crate::latency::{HistogramError, LatencyBlock};
use crate::report::Report;
use crate::show::sections;
use crate::spectrum::spectrum;

const STYLE: &str = r#"
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem; color: #1d2330; background: #fff; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.15rem; margin-top: 2rem; } h3 { font-size: 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.2rem 0.6rem; border-bottom: 1px solid #dde1e8; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
svg.chart { border: 1px solid #dde1e8; background: #fbfcfe; font-size: 11px; max-width: 100%; height: auto; }
svg.chart .chart-title { font-weight: 600; font-size: 12px; }
svg.chart .grid { stroke: #e4e7ee; stroke-width: 1; }
svg.chart .axis text { fill: #5a6272; }
svg.chart path.series { fill: none; stroke-width: 1.8; stroke-linejoin: round; }
svg.chart .legend line { stroke-width: 3; }
svg.chart .s0 { stroke: #2563eb; } svg.chart .s1 { stroke: #d97706; } svg.chart .s2 { stroke: #dc2626; }
svg.chart .empty { fill: #8a93a3; }
"#;

/// Marks each chart with the drawn length of its lines. Runs after the charts are
/// parsed; a chart whose paths have no length (bad path data) gets
/// `data-drawn="false"`.
const SELF_CHECK: &str = r#"
(function () {
  var charts = document.querySelectorAll("svg.chart");
  var drawn = 0;
  charts.forEach(function (chart) {
    var length = 0;
    chart.querySelectorAll("path.series").forEach(function (path) {
      length += path.getTotalLength();
    });
    chart.setAttribute("data-drawn-length", length.toFixed(1));
    chart.setAttribute("data-drawn", length > 0 ? "true" : "false");
    if (length > 0) { drawn += 1; }
  });
  document.body.setAttribute("data-charts-drawn", String(drawn));
})();
"#;

/// A chart id fragment from an operation name: lowercase ASCII letters, digits and `-`.
pub fn slug(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    if out.is_empty() {
        out.push('-');
    }
    out
}

fn spectrum_series(name: &str, block: &LatencyBlock) -> Result<Series, HistogramError> {
    let histogram = block.histogram()?;
    Ok(Series {
        name: name.to_owned(),
        points: spectrum(&histogram)
            .iter()
            .filter(|p| p.quantile < 1.0)
            .map(|p| (p.inverse_tail(), p.value_us as f64))
            .collect(),
    })
}

/// The charts of one operation: p99 over time, throughput over time, spectrum.
fn operation_charts(report: &Report, index: usize, id: &str) -> Result<Vec<Chart>, HistogramError> {
    let op = &report.operations[index];
    let timeline = |f: fn(&crate::report::TimelineOp) -> u64| -> Vec<(f64, f64)> {
        report
            .timeline
            .iter()
            .filter_map(|point| {
                point
                    .ops
                    .get(&op.name)
                    .map(|o| (f64::from(point.t_s), f(o) as f64))
            })
            .collect()
    };
    Ok(vec![
        Chart {
            id: format!("latency-{id}"),
            title: format!("{}: p99 latency over time (corrected)", op.name),
            x: XAxis::Seconds,
            y: YAxis::Latency,
            series: vec![Series {
                name: "p99".to_owned(),
                points: timeline(|o| o.p99_us),
            }],
        },
        Chart {
            id: format!("throughput-{id}"),
            title: format!("{}: completed per second", op.name),
            x: XAxis::Seconds,
            y: YAxis::Rate,
            series: vec![
                Series {
                    name: "ops/s".to_owned(),
                    points: timeline(|o| o.count),
                },
                Series {
                    name: "errors/s".to_owned(),
                    points: timeline(|o| o.errors),
                },
            ],
        },
        Chart {
            id: format!("spectrum-{id}"),
            title: format!("{}: latency by percentile", op.name),
            x: XAxis::Percentile,
            y: YAxis::Latency,
            series: vec![
                spectrum_series("corrected", &op.corrected)?,
                spectrum_series("uncorrected", &op.uncorrected)?,
            ],
        },
    ])
}

/// The charts of the whole run rather than one operation: the push
/// spectrum and the generator's send lag, when the report has them.
fn spectrum_charts(report: &Report) -> Result<Vec<Chart>, HistogramError> {
    let mut extra = Vec::new();
    if let Some(push) = &report.push {
        extra.push(Chart {
            id: "push-spectrum".to_owned(),
            title: "push: change to receipt by percentile".to_owned(),
            x: XAxis::Percentile,
            y: YAxis::Latency,
            series: vec![spectrum_series("push", &push.latency)?],
        });
    }
    if let Some(lag) = &report.send_lag {
        extra.push(Chart {
            id: "send-lag-spectrum".to_owned(),
            title: "generator: send lag by percentile".to_owned(),
            x: XAxis::Percentile,
            y: YAxis::Latency,
            series: vec![spectrum_series("send lag", lag)?],
        });
    }
    Ok(extra)
}

/// Renders the whole page.
pub fn render_html(report: &Report) -> Result<String, HistogramError> {
    let mut html = String::new();
    let title = format!(
        "{} report: {} ({})",
        report.tool, report.profile.name, report.started_at
    );
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );

    for section in sections(report) {
        let _ = write!(
            html,
            "<section class=\"summary\"><h2>{}</h2>",
            escape(&section.title)
        );
        for line in &section.lines {
            let _ = write!(html, "<p>{}</p>", escape(line));
        }
        if let Some(table) = &section.table {
            html.push_str(&table.to_html());
        }
        html.push_str("</section>\n");
    }

    html.push_str("<h2>Charts</h2>\n");
    let mut used = Vec::new();
    for index in 0..report.operations.len() {
        let op = &report.operations[index];
        // Two names can share a slug ("a b", "a-b"); keep chart ids unique.
        let mut id = slug(&op.name);
        if used.contains(&id) {
            id = format!("{id}-{index}");
        }
        used.push(id.clone());
        let _ = write!(
            html,
            "<section class=\"operation\" id=\"op-{id}\"><h3>{}</h3><div class=\"charts\">",
            escape(&op.name)
        );
        for chart in operation_charts(report, index, &id)? {
            html.push_str(&chart.to_svg());
        }
        html.push_str("</div></section>\n");
    }
    let extra = spectrum_charts(report)?;
    if !extra.is_empty() {
        html.push_str(
            "<section class=\"operation\" id=\"op-push-and-generator\"><h3>push and generator</h3><div class=\"charts\">",
        );
        for chart in extra {
            html.push_str(&chart.to_svg());
        }
        html.push_str("</div></section>\n");
    }
    let _ = write!(html, "<script>{SELF_CHECK}</script>\n</body></html>\n");
    Ok(html)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_id_safe() {
        assert_eq!(slug("beat"), "beat");
        assert_eq!(slug("Push Ack/UDP"), "push-ack-udp");
        assert_eq!(slug(""), "-");
    }
}
