//! RFC 3339 timestamps for `Report::started_at`, without a date-time dependency.
//!
//! Reports are always written in UTC with a `Z` suffix and whole seconds, so
//! that timestamps from different processes order correctly as plain strings
//! (which `report merge` relies on to pick the earliest start).

use std::time::{SystemTime, UNIX_EPOCH};

/// Formats a time as `YYYY-MM-DDTHH:MM:SSZ` (UTC). Times before 1970 clamp to the epoch.
pub fn rfc3339_utc(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day).
///
/// Howard Hinnant's `civil_from_days`, restricted to non-negative day counts.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap_day = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661);
        assert_eq!(rfc3339_utc(leap_day), "2000-02-29T01:01:01Z");
        let y2038 = UNIX_EPOCH + Duration::from_secs(2_147_483_647);
        assert_eq!(rfc3339_utc(y2038), "2038-01-19T03:14:07Z");
    }
}
