//! The report's fault section: what each scheduled fault (`loadgen run --fault AT=COMMAND`)
//! did to the lists the targets served, and its views (a `report show` section, which
//! the HTML page renders too, merge and compare).
//!
//! Missing instances are counted per watched service by size: a target's list that
//! holds fewer instances than the generator expects misses the difference (a list
//! that holds as many but other ones, a stale copy, counts as differing, not missing).
//! So `missing_instance_seconds` is a lower bound of what clients could not see.

use serde::{Deserialize, Serialize};

use crate::show::Section;
use crate::table::Table;

/// One fault of the schedule and what the targets served around it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultResult {
    /// When the command ran, seconds after the start of the steady phase.
    pub at_s: f64,
    /// The command as the operator gave it (run by `sh -c`).
    pub command: String,
    /// The command's exit status; `None` when it could not be started or was killed.
    pub exit_code: Option<i32>,
    /// Seconds from the fault until, once the command had returned, every target
    /// answered and listed every expected instance of every watched service; `None`
    /// when that never happened in the window.
    pub converge_s: Option<f64>,
    /// How long the lists were sampled after the fault, seconds.
    pub window_s: f64,
    /// Instance-seconds missing, summed over the targets (lower bound, see the module).
    pub missing_instance_seconds: f64,
    /// Operations that failed during the window, all classes.
    pub errors: u64,
    /// Per target.
    pub targets: Vec<FaultTarget>,
}

/// One target's lists during a fault's window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultTarget {
    /// The target's address.
    pub target: String,
    /// Most instances missing in one sample.
    pub peak_missing: u64,
    /// Missing instances integrated over the window, instance-seconds.
    pub missing_instance_seconds: f64,
    /// Lists served empty while instances were expected.
    pub empty_lists: u64,
    /// Lists served non-empty but short of expected instances.
    pub partial_lists: u64,
    /// Samples the target did not answer (down, refused).
    pub unanswered: u64,
}

/// The `report show` section, absent for a run without faults.
pub fn section(faults: &[FaultResult]) -> Option<Section> {
    if faults.is_empty() {
        return None;
    }
    let mut s = Section {
        title: "Faults".to_owned(),
        lines: Vec::new(),
        table: None,
    };
    for (i, f) in faults.iter().enumerate() {
        s.lines.push(format!(
            "fault {} at {:.1}s: `{}` exit {}; converged {}; missing {:.1} instance-s; {} errors in {:.1}s",
            i + 1,
            f.at_s,
            f.command,
            f.exit_code.map_or("none".to_owned(), |c| c.to_string()),
            f.converge_s
                .map_or("never".to_owned(), |c| format!("after {c:.1}s")),
            f.missing_instance_seconds,
            f.errors,
            f.window_s
        ));
    }
    let mut t = Table::new([
        "fault",
        "target",
        "peak missing",
        "instance-s",
        "empty lists",
        "partial lists",
        "unanswered",
    ]);
    for (i, f) in faults.iter().enumerate() {
        for target in &f.targets {
            t.push([
                (i + 1).to_string(),
                target.target.clone(),
                target.peak_missing.to_string(),
                format!("{:.1}", target.missing_instance_seconds),
                target.empty_lists.to_string(),
                target.partial_lists.to_string(),
                target.unanswered.to_string(),
            ]);
        }
    }
    s.table = Some(t);
    Some(s)
}

/// Concurrent segments saw the same faults (each ran the schedule against the same
/// targets): per fault the slowest convergence, summed missing figures and errors.
pub fn merge(per_report: &[&[FaultResult]]) -> Vec<FaultResult> {
    let mut out: Vec<FaultResult> = Vec::new();
    for faults in per_report {
        for (i, f) in faults.iter().enumerate() {
            let Some(m) = out.get_mut(i) else {
                out.push(f.clone());
                continue;
            };
            m.converge_s = match (m.converge_s, f.converge_s) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            m.window_s = m.window_s.max(f.window_s);
            m.missing_instance_seconds += f.missing_instance_seconds;
            m.errors += f.errors;
            for t in &f.targets {
                match m.targets.iter_mut().find(|x| x.target == t.target) {
                    Some(x) => {
                        x.peak_missing += t.peak_missing;
                        x.missing_instance_seconds += t.missing_instance_seconds;
                        x.empty_lists += t.empty_lists;
                        x.partial_lists += t.partial_lists;
                        x.unanswered += t.unanswered;
                    }
                    None => m.targets.push(t.clone()),
                }
            }
        }
    }
    out
}

/// Compare's lines: per fault, both runs' convergence and missing instance-seconds,
/// and whether the candidate is worse (slower, or missing more).
pub fn compare_lines(baseline: &[FaultResult], candidate: &[FaultResult]) -> Vec<String> {
    let n = baseline.len().max(candidate.len());
    (0..n)
        .map(|i| {
            let b = baseline.get(i);
            let c = candidate.get(i);
            let conv = |f: Option<&FaultResult>| match f.map(|f| f.converge_s) {
                None => "absent".to_owned(),
                Some(None) => "never".to_owned(),
                Some(Some(s)) => format!("{s:.1}s"),
            };
            let miss = |f: Option<&FaultResult>| {
                f.map_or("absent".to_owned(), |f| {
                    format!("{:.1}", f.missing_instance_seconds)
                })
            };
            format!(
                "fault {}: converged {} -> {}, missing instance-s {} -> {}{}",
                i + 1,
                conv(b),
                conv(c),
                miss(b),
                miss(c),
                if worse(b, c) { " (worse)" } else { "" }
            )
        })
        .collect()
}

/// Whether the candidate's fault is worse than the baseline's.
pub fn worse(baseline: Option<&FaultResult>, candidate: Option<&FaultResult>) -> bool {
    let (Some(b), Some(c)) = (baseline, candidate) else {
        return false;
    };
    let slower = match (b.converge_s, c.converge_s) {
        (Some(_), None) => true,
        (Some(x), Some(y)) => y > x + 1.0,
        _ => false,
    };
    slower || c.missing_instance_seconds > b.missing_instance_seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(converge: Option<f64>, missing: f64) -> FaultResult {
        FaultResult {
            at_s: 1.0,
            command: "kill -9 1".into(),
            converge_s: converge,
            missing_instance_seconds: missing,
            targets: vec![FaultTarget {
                target: "a".into(),
                peak_missing: 3,
                missing_instance_seconds: missing,
                ..FaultTarget::default()
            }],
            ..FaultResult::default()
        }
    }

    #[test]
    fn merge_sums_missing_and_keeps_the_slowest() {
        let a = [fault(Some(2.0), 1.5)];
        let b = [fault(Some(4.0), 2.0)];
        let m = merge(&[&a, &b]);
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].converge_s, Some(4.0));
        assert_eq!(m[0].missing_instance_seconds, 3.5);
        assert_eq!(m[0].targets[0].peak_missing, 6);
        let never = [fault(None, 0.0)];
        assert_eq!(merge(&[&a, &never])[0].converge_s, None);
    }

    #[test]
    fn compare_flags_a_slower_or_lossier_candidate() {
        let b = fault(Some(2.0), 0.0);
        assert!(!worse(Some(&b), Some(&fault(Some(2.5), 0.0))));
        assert!(worse(Some(&b), Some(&fault(Some(5.0), 0.0))));
        assert!(worse(Some(&b), Some(&fault(None, 0.0))));
        assert!(worse(Some(&b), Some(&fault(Some(2.0), 0.1))));
        let lines = compare_lines(std::slice::from_ref(&b), &[fault(None, 4.0)]);
        assert_eq!(
            lines,
            ["fault 1: converged 2.0s -> never, missing instance-s 0.0 -> 4.0 (worse)"]
        );
    }

    #[test]
    fn section_lists_every_target() {
        let s = section(&[fault(Some(1.0), 2.0)]).expect("a section");
        assert!(s.lines[0].contains("converged after 1.0s"), "{:?}", s.lines);
        assert!(section(&[]).is_none());
    }
}
