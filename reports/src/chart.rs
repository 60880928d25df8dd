//! Line charts as inline SVG, drawn in Rust so the HTML page needs no library,
//! no network and (almost) no script.
//!
//! Every chart is `<svg class="chart" data-chart="ID">` with one
//! `<path class="series" data-series="NAME" d="…">` per non-empty series; tests
//! and the page's self-check find charts by those attributes. The x axis is
//! either seconds (linear) or the percentile axis `1/(1-p)` (base-10 log, labelled
//! 0 %, 90 %, 99 %, 99.9 % …); the y axis is linear from 0 with 1-2-5 ticks.

use std::fmt::Write as _;

/// Chart width in SVG user units.
const WIDTH: f64 = 640.0;
/// Chart height in SVG user units.
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 40.0;

/// How x values are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XAxis {
    /// Seconds since the start of the run, linear.
    Seconds,
    /// `1/(1-p)` on a log scale; x values are the inverse tail, ≥ 1.
    Percentile,
    /// Offered load in operations per second, linear (`loadgen capacity`'s steps).
    OfferedLoad,
}

/// How y values are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YAxis {
    /// Microseconds, labelled in µs, ms or s.
    Latency,
    /// Operations per second.
    Rate,
}

/// One line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text and `data-series` value.
    pub name: String,
    /// `(x, y)` points in x order; non-finite points are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A chart ready to be drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The `data-chart` value, unique in the page (such as `latency-beat`).
    pub id: String,
    /// Title drawn above the plot.
    pub title: String,
    /// The x scale.
    pub x: XAxis,
    /// The y labels.
    pub y: YAxis,
    /// The lines.
    pub series: Vec<Series>,
}

/// Escapes text for HTML and SVG content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Rounds `raw` up to 1, 2 or 5 times a power of ten.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn latency_label(us: f64, scale_max: f64) -> String {
    if scale_max >= 1_000_000.0 {
        format!("{}s", trim(us / 1_000_000.0))
    } else if scale_max >= 1_000.0 {
        format!("{}ms", trim(us / 1_000.0))
    } else {
        format!("{}µs", trim(us))
    }
}

fn rate_label(rate: f64) -> String {
    if rate >= 1_000.0 {
        format!("{}k", trim(rate / 1_000.0))
    } else {
        trim(rate)
    }
}

/// A number with at most 3 decimals and no trailing zeros.
fn trim(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text.is_empty() || text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

fn percentile_label(decades: i32) -> String {
    // 10^k on the inverse-tail axis is the percentile 100 (1 − 10^−k).
    match decades {
        0 => "0%".to_owned(),
        k => format!("{}%", trim(100.0 * (1.0 - 10f64.powi(-k)))),
    }
}

impl Chart {
    fn visible_points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let x_kind = self.x;
        self.series.iter().flat_map(move |s| {
            s.points.iter().copied().filter(move |&(x, y)| {
                x.is_finite() && y.is_finite() && (x_kind != XAxis::Percentile || x >= 1.0)
            })
        })
    }

    /// The chart as an `<svg>` element.
    pub fn to_svg(&self) -> String {
        let points: Vec<(f64, f64)> = self.visible_points().collect();
        let f = self.frame(&points);
        let mut svg = String::new();
        let _ = write!(
            svg,
            r#"<svg class="chart" data-chart="{id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}"><title>{title}</title>"#,
            id = escape(&self.id),
            title = escape(&self.title),
        );
        let _ = write!(
            svg,
            r#"<text class="chart-title" x="{LEFT}" y="16">{}</text>"#,
            escape(&self.title)
        );
        self.y_axis(&f, &mut svg);
        self.x_axis(&f, &mut svg);
        if self.lines(&f, &mut svg) == 0 {
            let _ = write!(
                svg,
                r#"<text class="empty" x="{:.1}" y="{:.1}" text-anchor="middle">no data</text>"#,
                LEFT + f.plot_w / 2.0,
                TOP + f.plot_h / 2.0
            );
        }
        svg.push_str("</svg>");
        svg
    }

    /// The scales that fit `points`.
    fn frame(&self, points: &[(f64, f64)]) -> Frame {
        let (x_lo, x_hi) = match self.x {
            XAxis::Seconds | XAxis::OfferedLoad => {
                let lo = points.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
                let hi = points.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
                if !lo.is_finite() {
                    (0.0, 1.0)
                } else if hi - lo < 1.0 {
                    (lo, lo + 1.0)
                } else {
                    (lo, hi)
                }
            }
            XAxis::Percentile => {
                let hi = points.iter().map(|p| p.0.log10()).fold(1.0, f64::max);
                (0.0, hi.ceil())
            }
        };
        // y scale: from 0 to a 1-2-5 multiple above the largest value.
        let y_max_value = points.iter().map(|p| p.1).fold(0.0, f64::max);
        let y_step = nice_step(y_max_value / 5.0);
        // One step of headroom above the largest value, so a flat line never sits on the frame.
        let y_hi = ((y_max_value / y_step).floor() + 1.0) * y_step;
        Frame {
            x: self.x,
            x_lo,
            x_hi,
            y_step,
            y_hi,
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h: HEIGHT - TOP - BOTTOM,
        }
    }

    /// Grid lines and y labels.
    fn y_axis(&self, f: &Frame, svg: &mut String) {
        svg.push_str(r#"<g class="axis y-axis">"#);
        let mut tick = 0.0;
        while tick <= f.y_hi + f.y_step / 2.0 {
            let y = f.to_y(tick);
            let label = match self.y {
                YAxis::Latency => latency_label(tick, f.y_hi),
                YAxis::Rate => rate_label(tick),
            };
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{LEFT}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}" text-anchor="end">{label}</text>"#,
                LEFT + f.plot_w,
                LEFT - 6.0,
                y + 4.0
            );
            tick += f.y_step;
        }
        svg.push_str("</g>");
    }

    /// x labels, their grid lines and the axis title.
    fn x_axis(&self, f: &Frame, svg: &mut String) {
        svg.push_str(r#"<g class="axis x-axis">"#);
        for (value, label) in f.x_ticks() {
            let x = f.to_x(value);
            let _ = write!(
                svg,
                r#"<line class="grid" x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"#,
                TOP + f.plot_h,
                TOP + f.plot_h + 16.0
            );
        }
        let x_title = match self.x {
            XAxis::Seconds => "time since start",
            XAxis::Percentile => "percentile (log 1/(1-p))",
            XAxis::OfferedLoad => "offered load (operations/s)",
        };
        let _ = write!(
            svg,
            r#"<text class="axis-title" x="{:.1}" y="{:.1}" text-anchor="middle">{x_title}</text></g>"#,
            LEFT + f.plot_w / 2.0,
            HEIGHT - 6.0
        );
    }

    /// Each series with points as a path and a legend entry; returns how
    /// many were drawn.
    fn lines(&self, f: &Frame, svg: &mut String) -> usize {
        let mut drawn = 0;
        for (index, series) in self.series.iter().enumerate() {
            let mut d = String::new();
            for (x, y) in series.points.iter().copied().filter(|&(x, y)| {
                x.is_finite() && y.is_finite() && (self.x != XAxis::Percentile || x >= 1.0)
            }) {
                let _ = write!(
                    d,
                    "{}{:.1},{:.1}",
                    if d.is_empty() { "M" } else { " L" },
                    f.to_x(x),
                    f.to_y(y)
                );
            }
            if d.is_empty() {
                continue;
            }
            drawn += 1;
            let _ = write!(
                svg,
                r#"<path class="series s{index}" data-series="{name}" d="{d}"/>"#,
                name = escape(&series.name)
            );
            // Legend entry, top right.
            let legend_y = TOP + 12.0 + 14.0 * index as f64;
            let _ = write!(
                svg,
                r#"<g class="legend"><line class="series s{index}" x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text x="{:.1}" y="{:.1}">{name}</text></g>"#,
                WIDTH - RIGHT - 130.0,
                WIDTH - RIGHT - 112.0,
                WIDTH - RIGHT - 106.0,
                legend_y + 4.0,
                y = legend_y,
                name = escape(&series.name)
            );
        }
        drawn
    }
}

/// A chart's scales: data values to SVG coordinates.
struct Frame {
    x: XAxis,
    x_lo: f64,
    x_hi: f64,
    y_step: f64,
    y_hi: f64,
    plot_w: f64,
    plot_h: f64,
}

impl Frame {
    fn to_x(&self, x: f64) -> f64 {
        let v = match self.x {
            XAxis::Seconds | XAxis::OfferedLoad => x,
            XAxis::Percentile => x.log10(),
        };
        LEFT + (v - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w
    }

    fn to_y(&self, y: f64) -> f64 {
        TOP + self.plot_h - (y / self.y_hi) * self.plot_h
    }

    /// Where the x labels go, and what they say.
    fn x_ticks(&self) -> Vec<(f64, String)> {
        let (x_lo, x_hi) = (self.x_lo, self.x_hi);
        match self.x {
            XAxis::Seconds => {
                let step = nice_step((x_hi - x_lo) / 6.0).max(1.0);
                let mut ticks = Vec::new();
                let mut t = (x_lo / step).ceil() * step;
                while t <= x_hi + 1e-9 {
                    ticks.push((t, format!("{}s", trim(t))));
                    t += step;
                }
                ticks
            }
            XAxis::Percentile => (0..=x_hi as i32)
                .map(|k| (10f64.powi(k), percentile_label(k)))
                .collect(),
            XAxis::OfferedLoad => {
                let step = nice_step((x_hi - x_lo) / 6.0);
                let mut ticks = Vec::new();
                let mut t = (x_lo / step).ceil() * step;
                while t <= x_hi + 1e-9 {
                    ticks.push((t, rate_label(t)));
                    t += step;
                }
                ticks
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(x: XAxis, points: Vec<(f64, f64)>) -> Chart {
        Chart {
            id: "latency-beat".to_owned(),
            title: "beat <p99>".to_owned(),
            x,
            y: YAxis::Latency,
            series: vec![Series {
                name: "p99".to_owned(),
                points,
            }],
        }
    }

    #[test]
    fn draws_a_path_inside_the_plot() {
        let svg = chart(
            XAxis::Seconds,
            vec![(0.0, 100.0), (1.0, 250.0), (2.0, 50.0)],
        )
        .to_svg();
        assert!(svg.starts_with(r#"<svg class="chart" data-chart="latency-beat""#));
        assert!(svg.contains("beat &lt;p99&gt;"));
        let d = svg.split(r#"data-series="p99" d=""#).nth(1).unwrap();
        let d = &d[..d.find('"').unwrap()];
        assert!(d.starts_with('M') && d.matches(" L").count() == 2, "{d}");
        for pair in d.split([' ', 'M', 'L']).filter(|s| !s.is_empty()) {
            let (x, y) = pair.split_once(',').unwrap();
            let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
            assert!((LEFT..=WIDTH - RIGHT).contains(&x) && (TOP..=HEIGHT - BOTTOM).contains(&y));
        }
    }

    #[test]
    fn percentile_axis_is_labelled_by_nines() {
        let svg = chart(
            XAxis::Percentile,
            vec![(1.0, 10.0), (10.0, 20.0), (1000.0, 90.0)],
        )
        .to_svg();
        for label in ["0%", "90%", "99%", "99.9%"] {
            assert!(svg.contains(&format!(">{label}<")), "{label} missing");
        }
    }

    #[test]
    fn empty_chart_says_so() {
        let svg = chart(XAxis::Seconds, vec![]).to_svg();
        assert!(svg.contains("no data") && !svg.contains("<path"));
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(13.0), 20.0);
        assert_eq!(nice_step(420.0), 500.0);
        assert_eq!(nice_step(0.0), 1.0);
    }
}
