//! The machine a run happened on, recorded so that comparisons across different
//! machines can be refused.
//!
//! [`Environment::detect`] reads Linux's `/proc` and `/etc/os-release`; on other
//! systems (or in a sandbox that hides them) the fields fall back to `"unknown"`
//! rather than failing, because a report without a CPU model is still useful.

use std::fs;

use serde::{Deserialize, Serialize};

/// The value used for any field that could not be found.
pub const UNKNOWN: &str = "unknown";

/// The rustc that compiled this crate (and therefore the generator linking it).
pub const RUSTC_VERSION: &str = env!("REPORTS_RUSTC_VERSION");

/// Where a run happened.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// Commit of the code under test (git SHA), or `unknown`.
    pub commit: String,
    /// `rustc --version` of the compiler that built the generator.
    pub rustc: String,
    /// CPU model name, as in `/proc/cpuinfo`; comparisons require it to match.
    pub cpu_model: String,
    /// CPUs available to the process (`nproc`); comparisons require it to match.
    pub cores: u32,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// Operating system name, such as `Debian GNU/Linux 12 (bookworm)`.
    pub os: String,
    /// How generator and server were pinned to CPUs (such as `server=0 loadgen=1`), if at all.
    pub pinning: Option<String>,
}

impl Environment {
    /// Describes this machine, for a run of `commit`.
    pub fn detect(commit: impl Into<String>) -> Self {
        Environment {
            commit: commit.into(),
            rustc: RUSTC_VERSION.to_owned(),
            cpu_model: cpu_model().unwrap_or_else(|| UNKNOWN.to_owned()),
            cores: std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
                .unwrap_or(0),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|text| text.trim().to_owned())
                .unwrap_or_else(|_| UNKNOWN.to_owned()),
            os: os_name().unwrap_or_else(|| std::env::consts::OS.to_owned()),
            pinning: None,
        }
    }
}

fn cpu_model() -> Option<String> {
    let text = fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|line| line.starts_with("model name"))
        .and_then(|line| line.split_once(':'))
        .map(|(_, model)| model.trim().to_owned())
}

fn os_name() -> Option<String> {
    let text = fs::read_to_string("/etc/os-release").ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("PRETTY_NAME="))
        .map(|name| name.trim_matches('"').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_fills_every_field() {
        let env = Environment::detect("abc123");
        assert_eq!(env.commit, "abc123");
        assert!(env.rustc.starts_with("rustc ") || env.rustc == UNKNOWN);
        assert!(env.cores >= 1);
        assert!(!env.cpu_model.is_empty() && !env.kernel.is_empty() && !env.os.is_empty());
    }
}
