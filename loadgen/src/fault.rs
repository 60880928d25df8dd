//! Faults in the schedule: `--fault AT=COMMAND` runs the operator's command (`kill -9
//! PID`, `systemctl restart registry`, a script) AT into the steady phase, and samples
//! every target's lists of the watched services from then on until each target lists
//! every instance the generator expects, or the steady phase ends. The figures go to
//! the report's fault section ([`reports::fault`]).
//!
//! The command runs under `sh -c` without waiting: a restart script may take longer
//! than the sampling interval, and the lists during it are what is measured. A window
//! converges only once the command has returned and every target answered complete
//! lists in one round: a target that is down while the others agree has not
//! converged (it comes back empty), and a `kill -9` whose node stays down never does.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reports::fault::{FaultResult, FaultTarget};

use crate::fleet::{Naming, SetHash};
use crate::schedule::{Nanos, MILLI, SECOND};
use crate::target::ControlClient;

/// How often a fault's window samples the lists.
pub const SAMPLE_EVERY: Nanos = 500 * MILLI;

/// One `AT=COMMAND`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpec {
    /// When, after the start of the steady phase.
    pub at: Duration,
    /// What to run (by `sh -c`).
    pub command: String,
}

/// Parses `AT=COMMAND`, AT in seconds (`10`, `2.5`, `10s`) or milliseconds (`500ms`).
pub fn parse(text: &str) -> Result<FaultSpec, String> {
    let (at, command) = text.split_once('=').ok_or_else(|| {
        format!("invalid --fault {text:?}: expected AT=COMMAND, e.g. 10s='kill -9 1234'")
    })?;
    let at = at.trim();
    let secs = if let Some(ms) = at.strip_suffix("ms") {
        ms.parse::<f64>().map(|v| v / 1e3)
    } else {
        at.strip_suffix('s').unwrap_or(at).parse::<f64>()
    }
    .map_err(|_| format!("invalid --fault {text:?}: AT {at:?} is not a time (10, 10s, 500ms)"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid --fault {text:?}: AT must be >= 0"));
    }
    if command.trim().is_empty() {
        return Err(format!("invalid --fault {text:?}: empty command"));
    }
    Ok(FaultSpec {
        at: Duration::from_secs_f64(secs),
        command: command.to_owned(),
    })
}

/// A fault whose command ran and whose window is open.
struct Open {
    spec: FaultSpec,
    /// Run clock at the command's start.
    started: Nanos,
    child: Option<Child>,
    errors_at_start: u64,
    targets: Vec<FaultTarget>,
    last_sample: Nanos,
    result: FaultResult,
}

/// The schedule of one run's faults and their open windows.
pub struct Faults {
    pending: Vec<FaultSpec>,
    open: Vec<Open>,
    done: Vec<FaultResult>,
    members: Vec<ControlClient>,
    names: Vec<String>,
}

/// What one sample of one target found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Instances expected but not listed (by count, see [`reports::fault`]).
    pub missing: u64,
    /// Lists served empty while instances were expected.
    pub empty: u64,
    /// Lists served non-empty but short.
    pub partial: u64,
    /// Whether every list equalled the expected set.
    pub complete: bool,
}

/// Compares one target's lists (`got`, `None` for a list it did not answer) with the
/// expected sets.
pub fn judge(expected: &[SetHash], got: &[Option<SetHash>]) -> Option<Sample> {
    let mut s = Sample {
        complete: true,
        ..Sample::default()
    };
    for (want, got) in expected.iter().zip(got) {
        let got = (*got)?;
        let short = u64::from(want.len().saturating_sub(got.len()));
        s.missing += short;
        if short > 0 && got.is_empty() {
            s.empty += 1;
        } else if short > 0 {
            s.partial += 1;
        }
        s.complete &= got == *want;
    }
    Some(s)
}

impl Faults {
    /// The schedule for these targets (`members`, one control client each, named).
    pub fn new(specs: Vec<FaultSpec>, members: Vec<ControlClient>, names: Vec<String>) -> Faults {
        Faults {
            pending: specs,
            open: Vec::new(),
            done: Vec::new(),
            members,
            names,
        }
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.open.is_empty()
    }

    /// Runs what is due (`since_steady` into the steady phase, `now` on the run clock)
    /// and samples the open windows.
    pub fn tick(
        &mut self,
        now: Nanos,
        since_steady: Duration,
        naming: &Naming,
        expected: &[SetHash],
        errors: u64,
    ) {
        while let Some(i) = self.pending.iter().position(|f| f.at <= since_steady) {
            let spec = self.pending.remove(i);
            self.open.push(self.start(spec, now, since_steady, errors));
        }
        if self.open.is_empty() {
            return;
        }
        let due = self
            .open
            .iter()
            .any(|o| now >= o.last_sample + SAMPLE_EVERY);
        if !due {
            return;
        }
        let samples: Vec<Option<Sample>> = (0..self.members.len())
            .map(|m| self.sample(m, naming, expected))
            .collect();
        let mut i = 0;
        while i < self.open.len() {
            if record(&mut self.open[i], now, &samples) {
                let open = self.open.remove(i);
                self.done.push(close(open, now, errors));
            } else {
                i += 1;
            }
        }
    }

    fn start(&self, spec: FaultSpec, now: Nanos, since_steady: Duration, errors: u64) -> Open {
        let child = Command::new("sh")
            .arg("-c")
            .arg(&spec.command)
            .stdin(Stdio::null())
            .spawn()
            .ok();
        Open {
            result: FaultResult {
                at_s: since_steady.as_secs_f64(),
                command: spec.command.clone(),
                ..FaultResult::default()
            },
            spec,
            started: now,
            child,
            errors_at_start: errors,
            targets: self
                .names
                .iter()
                .map(|n| FaultTarget {
                    target: n.clone(),
                    ..FaultTarget::default()
                })
                .collect(),
            last_sample: now,
        }
    }

    fn sample(&mut self, m: usize, naming: &Naming, expected: &[SetHash]) -> Option<Sample> {
        let client = &mut self.members[m];
        let got: Vec<Option<SetHash>> = (0..expected.len() as u32)
            .map(|s| client.hosts(naming, s).ok().map(|h| h.hash))
            .collect();
        judge(expected, &got)
    }

    /// Closes every open window (the steady phase ended) and returns all results.
    pub fn finish(mut self, now: Nanos, errors: u64) -> Vec<FaultResult> {
        for open in std::mem::take(&mut self.open) {
            self.done.push(close(open, now, errors));
        }
        self.done
    }
}

/// Adds one round of samples to a window; returns whether it converged (the command
/// returned, every target answered and was complete), closing it.
fn record(open: &mut Open, now: Nanos, samples: &[Option<Sample>]) -> bool {
    let dt = now.saturating_sub(open.last_sample) as f64 / SECOND as f64;
    open.last_sample = now;
    let mut complete = true;
    for (t, s) in open.targets.iter_mut().zip(samples) {
        let Some(s) = s else {
            t.unanswered += 1;
            complete = false;
            continue;
        };
        t.peak_missing = t.peak_missing.max(s.missing);
        t.missing_instance_seconds += s.missing as f64 * dt;
        t.empty_lists += s.empty;
        t.partial_lists += s.partial;
        complete &= s.complete;
    }
    let returned = open
        .child
        .as_mut()
        .is_none_or(|c| matches!(c.try_wait(), Ok(Some(_))));
    if complete && returned {
        open.result.converge_s = Some(now.saturating_sub(open.started) as f64 / SECOND as f64);
        return true;
    }
    false
}

fn close(mut open: Open, now: Nanos, errors: u64) -> FaultResult {
    let mut r = std::mem::take(&mut open.result);
    r.window_s = now.saturating_sub(open.started) as f64 / SECOND as f64;
    r.errors = errors.saturating_sub(open.errors_at_start);
    r.missing_instance_seconds = open
        .targets
        .iter()
        .map(|t| t.missing_instance_seconds)
        .sum();
    r.exit_code = open.child.as_mut().and_then(|c| match c.try_wait() {
        Ok(Some(status)) => status.code(),
        // Still running when the window closes: wait for it (a restart script that
        // returns once its node is up), so no child outlives the run.
        _ => c.wait().ok().and_then(|s| s.code()),
    });
    r.targets = open.targets;
    let _ = open.spec;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Endpoint;

    fn set(n: u32) -> SetHash {
        SetHash::of(
            (0..n).map(|i| Endpoint::new(std::net::Ipv4Addr::new(10, 0, 0, 1), 1000 + i as u16)),
        )
    }

    #[test]
    fn parses_at_and_command() {
        let f = parse("10s=kill -9 12 && echo x=y").unwrap();
        assert_eq!(f.at, Duration::from_secs(10));
        assert_eq!(f.command, "kill -9 12 && echo x=y");
        assert_eq!(parse("500ms=true").unwrap().at, Duration::from_millis(500));
        assert_eq!(parse("2.5=true").unwrap().at, Duration::from_millis(2500));
        assert!(parse("soon=true").is_err());
        assert!(parse("10").is_err());
        assert!(parse("10=  ").is_err());
    }

    #[test]
    fn judges_missing_empty_and_partial_lists() {
        let expected = [set(3), set(2), set(1)];
        let s = judge(&expected, &[Some(set(3)), Some(set(0)), Some(set(1))]).unwrap();
        assert_eq!(
            (s.missing, s.empty, s.partial, s.complete),
            (2, 1, 0, false)
        );
        let s = judge(&expected, &[Some(set(1)), Some(set(2)), Some(set(1))]).unwrap();
        assert_eq!(
            (s.missing, s.empty, s.partial, s.complete),
            (2, 0, 1, false)
        );
        let s = judge(&expected, &[Some(set(3)), Some(set(2)), Some(set(1))]).unwrap();
        assert!(s.complete && s.missing == 0);
        assert!(judge(&expected, &[Some(set(3)), None, Some(set(1))]).is_none());
    }
}
