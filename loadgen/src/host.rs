//! The machine loadgen runs on: the file-descriptor limit and `/proc` readings of a
//! process's memory and CPU time.
//!
//! Subscribers are real sockets and the pool holds real connections, so a large
//! profile needs more descriptors than the usual soft limit of 1024:
//! [`raise_nofile`] lifts the soft limit to the hard limit at start. CPU time is read
//! from `/proc/<pid>/stat` (`utime + stime`, in the kernel's fixed 100 Hz user ticks);
//! for an embedded registry only the threads named `registry-*` are summed, so the
//! generator's own CPU is not counted as the server's.

use std::fs;

/// Clock ticks per second of `/proc/*/stat` times (`USER_HZ`, 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the new soft limit.
pub fn raise_nofile() -> std::io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(std::io::Error::from)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).map_err(std::io::Error::from)?;
        return Ok(hard);
    }
    Ok(soft)
}

/// `utime + stime` in seconds from the text of a `/proc/*/stat` file.
pub fn stat_cpu_seconds(stat: &str) -> Option<f64> {
    // The command name is in parentheses and may contain spaces: fields are counted
    // from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After ')' come field 3 (state) ... field 14 (utime), 15 (stime).
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

/// The scheduling policy (field 41: 0 normal, 1 FIFO, 2 round-robin, ...) from the
/// text of a `/proc/*/stat` file.
pub fn stat_policy(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' comes field 3: field 41 is the 39th.
    rest.split_ascii_whitespace().nth(38)?.parse().ok()
}

/// Whether the calling thread runs under a real-time policy (FIFO or round-robin).
pub fn realtime() -> Option<bool> {
    let policy = stat_policy(&fs::read_to_string("/proc/thread-self/stat").ok()?)?;
    Some(matches!(policy, 1 | 2))
}

/// CPU seconds used so far by process `pid` (all its threads).
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    stat_cpu_seconds(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// CPU seconds used so far by this process's threads whose name starts with `prefix`.
pub fn threads_cpu_seconds(prefix: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for entry in fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = entry.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        if let Some(s) = fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|t| stat_cpu_seconds(&t))
        {
            total += s;
            any = true;
        }
    }
    any.then_some(total)
}

/// Resident and peak resident set size of a process, bytes, from `/proc/<pid>/status`
/// (`pid` = `None` for this process).
pub fn memory(pid: Option<u32>) -> (Option<u64>, Option<u64>) {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".to_owned(),
    };
    let text = fs::read_to_string(path).unwrap_or_default();
    (status_kib(&text, "VmRSS:"), status_kib(&text, "VmHWM:"))
}

fn status_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The CPUs this process may run on (`Cpus_allowed_list`), e.g. `1` under `taskset -c 1`.
pub fn cpus_allowed() -> Option<String> {
    let text = fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 5 0 0";
        assert_eq!(stat_cpu_seconds(stat), Some(3.0));
        assert_eq!(stat_cpu_seconds("garbage"), None);
        // Fields 3..=40 as ones, then policy 1 (FIFO).
        let fifo = format!("7 (x) {} 1 0", vec!["1"; 38].join(" "));
        assert_eq!(stat_policy(&fifo), Some(1));
        assert_eq!(stat_policy("7 (x) S 1"), None);
    }

    #[test]
    fn reads_this_process() {
        let (rss, hwm) = memory(None);
        assert!(rss.unwrap() > 0 && hwm.unwrap() >= rss.unwrap());
        assert!(process_cpu_seconds(std::process::id()).is_some());
        assert!(raise_nofile().unwrap() >= 256);
        assert!(cpus_allowed().is_some());
        assert!(realtime().is_some());
        assert_eq!(status_kib("VmRSS:\t  12 kB\n", "VmRSS:"), Some(12 * 1024));
    }
}
