//! Resident memory of this process, for footprint figures.

/// Resident set size in bytes, from `/proc/self/statm` (Linux only).
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_size())
}

fn page_size() -> u64 {
    // 4 KiB on every platform we run on; /proc has no cheaper source.
    4096
}
