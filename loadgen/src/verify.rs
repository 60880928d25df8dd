//! End-of-phase checks: does the server hold what loadgen registered, and does every
//! subscriber hold what the server holds?
//!
//! After the steady phase and again after the drain, once no change is in flight:
//!
//! - the server's `instanceCount` (`/operator/metrics`) must equal its count before the
//!   run plus the instances loadgen registered and did not remove (an instance counts
//!   as registered once a registration or a beat was answered OK, and as removed once
//!   a deregistration was answered `ok` or a beat `20404`);
//! - every watched service's list on the server must equal the set loadgen expects;
//! - every subscriber's last received list must equal that set too (so it equals the
//!   server's list): that is convergence.
//!
//! A segment of a run ([`crate::segment`]) shares the server with the other segments,
//! so it cannot judge the server's total: it checks its own services' lists and its
//! own subscribers, and records its instance count and the server's for `report
//! merge` to judge once every segment is in.

use crate::fleet::{Naming, SetHash};
use crate::target::ControlClient;

/// The result of one check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Check {
    /// Instances the server should hold.
    pub expected: u64,
    /// Instances it reports (`None`: it could not be asked).
    pub server: Option<u64>,
    /// Subscribers.
    pub subscribers: u64,
    /// Subscribers whose view differs from the expected list.
    pub unconverged: u64,
    /// Watched services whose server list differs from the expected set.
    pub bad_lists: u64,
    /// The first few of them, for the message.
    pub bad_examples: Vec<String>,
    /// Changes still unanswered when the check ran.
    pub changes_outstanding: u64,
    /// Whether the server's total is this process's to judge (not for a segment).
    pub judge_count: bool,
}

impl Check {
    /// Whether everything matched.
    pub fn ok(&self) -> bool {
        (!self.judge_count || self.server == Some(self.expected))
            && self.unconverged == 0
            && self.bad_lists == 0
            && self.changes_outstanding == 0
    }

    /// One line.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!(
            "server instances {} (expected {})",
            self.server.map_or("unknown".to_owned(), |n| n.to_string()),
            self.expected
        )];
        if self.subscribers > 0 {
            parts.push(format!(
                "{}/{} subscribers converged",
                self.subscribers - self.unconverged.min(self.subscribers),
                self.subscribers
            ));
        }
        if self.bad_lists > 0 {
            parts.push(format!(
                "{} watched services differ on the server (e.g. {})",
                self.bad_lists,
                self.bad_examples.join(", ")
            ));
        }
        if self.changes_outstanding > 0 {
            parts.push(format!("{} changes unanswered", self.changes_outstanding));
        }
        format!(
            "{}: {}",
            if self.ok() { "ok" } else { "FAILED" },
            parts.join(", ")
        )
    }
}

/// The server's instance count.
pub fn server_count(client: &mut ControlClient) -> anyhow::Result<u64> {
    Ok(client.metrics()?.instance_count)
}

/// Compares every watched service's list (of this process's segment) on the server with `expected`; returns the
/// number that differ and up to five of their names.
pub fn lists(
    client: &mut ControlClient,
    naming: &Naming,
    expected: &[SetHash],
) -> anyhow::Result<(u64, Vec<String>)> {
    let mut bad = 0;
    let mut examples = Vec::new();
    let own = expected
        .iter()
        .enumerate()
        .filter(|(s, _)| naming.owns_service(*s as u32));
    for (s, want) in own {
        let got = client.hosts(naming, s as u32)?.hash;
        if got != *want {
            bad += 1;
            if examples.len() < 5 {
                examples.push(format!(
                    "{} has {} hosts, expected {}",
                    naming.grouped(s as u32),
                    got.len(),
                    want.len()
                ));
            }
        }
    }
    Ok((bad, examples))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_passes_only_when_everything_matches() {
        let good = Check {
            expected: 10,
            server: Some(10),
            subscribers: 4,
            judge_count: true,
            ..Check::default()
        };
        let segment = Check {
            server: Some(25),
            judge_count: false,
            ..good.clone()
        };
        assert!(segment.ok(), "a segment does not judge the server's total");
        assert!(good.ok());
        assert!(good
            .describe()
            .starts_with("ok: server instances 10 (expected 10), 4/4"));
        for bad in [
            Check {
                server: Some(9),
                ..good.clone()
            },
            Check {
                server: None,
                ..good.clone()
            },
            Check {
                unconverged: 1,
                ..good.clone()
            },
            Check {
                bad_lists: 1,
                ..good.clone()
            },
            Check {
                changes_outstanding: 1,
                ..good.clone()
            },
        ] {
            assert!(!bad.ok(), "{bad:?}");
            assert!(bad.describe().starts_with("FAILED"));
        }
    }
}
