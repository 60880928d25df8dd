//! Plain tables rendered as aligned terminal text or as Markdown, and the cell
//! formats of the report's units (microseconds, rates, bytes, fractions).
//!
//! `show` and `compare` build a [`Table`] once and render it in either format,
//! so the terminal and the CI summary always carry the same numbers.

use std::fmt::Write as _;

use crate::chart::escape;

/// A table of text cells with one header row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Column titles.
    pub headers: Vec<String>,
    /// Rows; each should have as many cells as there are headers.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles and no rows.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Self {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Aligned text: the first column left-aligned, the others right-aligned.
    pub fn to_text(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width.saturating_sub(cell.chars().count());
                if i == 0 {
                    text.push_str(cell);
                    text.push_str(&" ".repeat(pad));
                } else {
                    text.push_str("  ");
                    text.push_str(&" ".repeat(pad));
                    text.push_str(cell);
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        };
        line(&self.headers);
        for row in &self.rows {
            line(row);
        }
        out
    }

    /// An HTML `<table>` with escaped cells.
    pub fn to_html(&self) -> String {
        let mut out = String::from("<table><thead><tr>");
        for header in &self.headers {
            let _ = write!(out, "<th>{}</th>", escape(header));
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for i in 0..self.headers.len() {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        out
    }

    /// A GitHub-flavoured Markdown table.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let row = |out: &mut String, cells: &[String]| {
            out.push('|');
            for i in 0..self.headers.len() {
                let cell = cells.get(i).map(String::as_str).unwrap_or("");
                let _ = write!(out, " {} |", cell.replace('|', "\\|"));
            }
            out.push('\n');
        };
        row(&mut out, &self.headers);
        out.push('|');
        for i in 0..self.headers.len() {
            out.push_str(if i == 0 { " --- |" } else { " ---: |" });
        }
        out.push('\n');
        for cells in &self.rows {
            row(&mut out, cells);
        }
        out
    }
}

/// A latency in the most readable unit: `812µs`, `1.23ms`, `4.50s`.
pub fn micros(us: f64) -> String {
    if !us.is_finite() {
        return "-".to_owned();
    }
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1_000.0)
    } else {
        format!("{:.2}s", us / 1_000_000.0)
    }
}

/// A rate in operations per second.
pub fn per_second(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}/s")
    } else {
        format!("{rate:.2}/s")
    }
}

/// A byte count in binary units.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A fraction as a percentage with enough digits for small error rates.
pub fn fraction(f: f64) -> String {
    format!("{:.3}%", f * 100.0)
}

/// A signed relative change, `+12.3%`; infinite changes (from a zero base) print as `+inf%`.
pub fn delta_pct(pct: f64) -> String {
    if pct.is_infinite() {
        if pct > 0.0 { "+inf%" } else { "-inf%" }.to_owned()
    } else {
        format!("{pct:+.1}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both_formats() {
        let mut t = Table::new(["op", "p99"]);
        t.push(["beat", "1.00ms"]);
        t.push(["a|b", "3µs"]);
        assert_eq!(t.to_text(), "op       p99\nbeat  1.00ms\na|b      3µs\n");
        assert_eq!(
            t.to_markdown(),
            "| op | p99 |\n| --- | ---: |\n| beat | 1.00ms |\n| a\\|b | 3µs |\n"
        );
    }

    #[test]
    fn unit_cells() {
        assert_eq!(micros(812.0), "812µs");
        assert_eq!(micros(1_234.0), "1.23ms");
        assert_eq!(micros(4_500_000.0), "4.50s");
        assert_eq!(bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
        assert_eq!(per_second(12_345.4), "12345/s");
        assert_eq!(fraction(0.0012), "0.120%");
        assert_eq!(delta_pct(f64::INFINITY), "+inf%");
        assert_eq!(delta_pct(-5.04), "-5.0%");
    }
}
