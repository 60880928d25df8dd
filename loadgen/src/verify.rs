//! End-of-phase checks: does the server hold what loadgen registered, and does every
//! subscriber hold what the server holds?
//!
//! After the steady phase and again after the drain, once no change is in flight:
//!
//! - the server's `instanceCount` (`/operator/metrics`) must equal its count before the
//!   run plus the instances loadgen registered and did not remove (an instance counts
//!   as registered once a registration or a beat was answered OK, and as removed once
//!   a deregistration was answered `ok` or a beat `20404`);
//! - every watched service's list on the server must equal the set loadgen expects
//!   (for the 2.x fleet read over gRPC, the protocol under test, and counted by
//!   those lists rather than the server's counter: [`crate::grpc::check`]);
//! - every subscriber's last received list must equal that set too (so it equals the
//!   server's list): that is convergence.
//!
//! With several servers (`--target a,b,c`, a cluster's members) every member that
//! answers is checked the same way ([`members`]): a cluster has converged when each
//! of them holds what loadgen registered. A member that does not answer (stopped,
//! its clients failed over) is left out.
//!
//! A segment of a run ([`crate::segment`]) shares the server with the other segments,
//! so it cannot judge the server's total: it checks its own services' lists and its
//! own subscribers, and records its instance count and the server's for `report
//! merge` to judge once every segment is in.

use crate::fleet::{Naming, SetHash};
use crate::grpc::check::{fresh_seed, sample, LIST_ALL_UP_TO};
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
    /// What could not be read from the server, and why (`member: what: error`).
    pub unread: Vec<String>,
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
        let mut parts = vec![match self.server {
            Some(n) => format!("server instances {n} (expected {})", self.expected),
            None => format!(
                "server instances unknown: could not read them (expected {})",
                self.expected
            ),
        }];
        if !self.unread.is_empty() {
            parts.push(format!("unread: {}", self.unread.join("; ")));
        }
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
    client.instance_count()
}

/// Compares every watched service's list (of this process's segment) on the server with `expected`; returns the
/// number that differ and up to five of their names. Over gRPC (the 2.x fleet),
/// above [`LIST_ALL_UP_TO`] services a fresh random sample of that many is compared.
pub fn lists(
    client: &mut ControlClient,
    naming: &Naming,
    expected: &[SetHash],
) -> anyhow::Result<(u64, Vec<String>)> {
    let mut bad = 0;
    let mut examples = Vec::new();
    let mut own: Vec<(usize, &SetHash)> = expected
        .iter()
        .enumerate()
        .filter(|(s, _)| naming.owns_service(*s as u32))
        .collect();
    if client.lists_over_grpc() && own.len() > LIST_ALL_UP_TO as usize {
        // One gRPC query per service: above the limit a seeded sample of them.
        own = sample(own, fresh_seed());
    }
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
                unread: vec!["127.0.0.1:1: instance count: refused".into()],
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
        let unread = Check {
            server: None,
            unread: vec!["127.0.0.1:1: instance count: refused".into()],
            ..good.clone()
        };
        let text = unread.describe();
        assert!(
            text.contains("unknown: could not read them") && text.contains("refused"),
            "says what it could not read and why: {text}"
        );
    }
}

/// What [`members`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// The instance count of the first member that answered (`None`: none did).
    pub count: Option<u64>,
    /// Watched services whose list differs on some member, plus members whose
    /// count differs from that first count.
    pub bad: u64,
    /// The first few differences, for the message.
    pub examples: Vec<String>,
    /// What could not be read, and why: `member: instance count: error`.
    pub unread: Vec<String>,
}

/// Checks every member that answers: its instance count, and every watched
/// service's list against `expected`.
pub fn members(clients: &mut [ControlClient], naming: &Naming, expected: &[SetHash]) -> Members {
    let mut out = Members::default();
    let several = clients.len() > 1;
    for client in clients.iter_mut() {
        let member = client.addr().map_or(String::new(), |a| format!("{a}: "));
        let count = match server_count(client) {
            Ok(count) => count,
            Err(e) => {
                // Not answering: left out, and said why.
                out.unread.push(format!("{member}instance count: {e:#}"));
                continue;
            }
        };
        match out.count {
            None => out.count = Some(count),
            Some(first) if first != count => {
                out.bad += 1;
                if out.examples.len() < 5 {
                    out.examples
                        .push(format!("{member}{count} instances, another member {first}"));
                }
            }
            Some(_) => {}
        }
        match lists(client, naming, expected) {
            Ok((bad, examples)) => {
                out.bad += bad;
                for e in examples {
                    if out.examples.len() < 5 {
                        out.examples
                            .push(if several { format!("{member}{e}") } else { e });
                    }
                }
            }
            Err(e) => {
                out.unread.push(format!("{member}lists: {e:#}"));
                out.bad += expected.len().max(1) as u64;
            }
        }
    }
    out
}
