//! `--start-at`: when the load begins, so that processes started on different machines
//! (the segments of one run) begin their phases together.
//!
//! Either an absolute time in RFC 3339 (`2026-11-30T12:00:00Z`, any offset, optional
//! fraction) or a delay from now (`+30s`, any duration `loadgen` accepts). An absolute
//! time in the past is refused before any load is sent: the phases would not line up.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::profile::parse_duration;

/// When to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// At this moment.
    At(SystemTime),
    /// This long after the command line is read.
    After(Duration),
}

/// Why a start time is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid start time {text:?}: {reason} (expected RFC 3339 such as 2026-11-30T12:00:00Z, or +30s)")]
pub struct StartError {
    /// The text as given.
    pub text: String,
    /// What is wrong.
    pub reason: String,
}

impl StartAt {
    /// Parses `+DURATION` or an RFC 3339 time.
    pub fn parse(text: &str) -> Result<StartAt, StartError> {
        let err = |reason: String| StartError {
            text: text.to_owned(),
            reason,
        };
        let text = text.trim();
        if let Some(delay) = text.strip_prefix('+') {
            return parse_duration(delay).map(StartAt::After).map_err(err);
        }
        parse_rfc3339(text).map(StartAt::At).map_err(err)
    }

    /// The moment to start, given that it is `now`; refuses a moment in the past.
    pub fn resolve(self, now: SystemTime) -> Result<SystemTime, String> {
        match self {
            StartAt::After(delay) => Ok(now + delay),
            StartAt::At(at) if at >= now => Ok(at),
            StartAt::At(at) => Err(format!(
                "the start time {} is in the past (it is now {})",
                reports::rfc3339_utc(at),
                reports::rfc3339_utc(now)
            )),
        }
    }
}

/// Days from 1970-01-01 to the given civil date (proleptic Gregorian).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (`t`, `z` and a space for `T`
/// accepted) into a time at or after the Unix epoch.
pub fn parse_rfc3339(text: &str) -> Result<SystemTime, String> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Result<u32, String> {
        let part = text.get(range).ok_or("too short")?;
        if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(format!("{part:?} is not a number"));
        }
        part.parse()
            .map_err(|_| format!("{part:?} is not a number"))
    };
    if b.len() < 20 {
        return Err("too short".into());
    }
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err("not of the form YYYY-MM-DDTHH:MM:SS".into());
    }
    let (year, month, day) = (i64::from(digits(0..4)?), digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err("no such date".into());
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day".into());
    }
    let mut rest = &text[19..];
    let mut nanos = 0u32;
    if let Some(fraction) = rest.strip_prefix('.') {
        let len = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return Err("empty fraction of a second".into());
        }
        let kept = &fraction[..len.min(9)];
        nanos = kept.parse::<u32>().map_err(|_| "bad fraction")? * 10u32.pow(9 - kept.len() as u32);
        rest = &fraction[len..];
    }
    let offset_s: i64 = match rest {
        "Z" | "z" => 0,
        _ if rest.is_ascii()
            && rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':' =>
        {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let (h, m) = (digits_of(&rest[1..3])?, digits_of(&rest[4..6])?);
            if h > 23 || m > 59 {
                return Err("bad offset".into());
            }
            sign * i64::from(h * 3600 + m * 60)
        }
        _ => return Err("no time zone (Z or ±HH:MM)".into()),
    };
    let seconds = days_from_civil(year, month, day) * 86_400
        + i64::from(hour * 3600 + minute * 60 + second)
        - offset_s;
    let seconds = u64::try_from(seconds).map_err(|_| "before 1970")?;
    Ok(UNIX_EPOCH + Duration::new(seconds, nanos))
}

fn digits_of(part: &str) -> Result<u32, String> {
    if part.bytes().all(|c| c.is_ascii_digit()) {
        part.parse()
            .map_err(|_| format!("{part:?} is not a number"))
    } else {
        Err(format!("{part:?} is not a number"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_absolute_and_relative_times() {
        let at = |s| UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(
            StartAt::parse("1970-01-01T00:00:00Z"),
            Ok(StartAt::At(at(0)))
        );
        assert_eq!(
            StartAt::parse("2026-11-30T12:00:00Z"),
            Ok(StartAt::At(at(1_796_040_000)))
        );
        assert_eq!(
            StartAt::parse("2026-11-30T13:30:00+01:30"),
            Ok(StartAt::At(at(1_796_040_000)))
        );
        assert_eq!(
            StartAt::parse("2024-02-29T00:00:00.25Z"),
            Ok(StartAt::At(at(1_709_164_800) + Duration::from_millis(250)))
        );
        assert_eq!(
            StartAt::parse("+30s"),
            Ok(StartAt::After(Duration::from_secs(30)))
        );
        for bad in [
            "",
            "+",
            "+soon",
            "2026-11-30",
            "2026-11-30T12:00:00",
            "2026-02-30T12:00:00Z",
            "2025-02-29T12:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T12:00:00+25:00",
            "2026-11-30T12:00:00.Z",
            "1969-12-31T23:59:59Z",
            "tomorrow at noon please",
        ] {
            let e = StartAt::parse(bad).unwrap_err();
            assert!(e.to_string().contains("expected RFC 3339"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_time_in_the_past_is_refused() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000);
        let past = StartAt::At(UNIX_EPOCH + Duration::from_secs(999));
        assert!(past.resolve(now).unwrap_err().contains("in the past"));
        let later = UNIX_EPOCH + Duration::from_secs(1_005);
        assert_eq!(StartAt::At(later).resolve(now), Ok(later));
        assert_eq!(
            StartAt::After(Duration::from_secs(5)).resolve(now),
            Ok(later)
        );
    }

    proptest! {
        /// Whatever the reports crate writes, this reads back to the same second.
        #[test]
        fn reads_what_the_reports_crate_writes(seconds in 0u64..8_000_000_000) {
            let t = UNIX_EPOCH + Duration::from_secs(seconds);
            let text = reports::rfc3339_utc(t);
            prop_assert_eq!(parse_rfc3339(&text), Ok(t), "{}", text);
        }

        #[test]
        fn any_text_parses_or_errors_without_panicking(text in ".{0,40}") {
            let _ = StartAt::parse(&text);
        }
    }
}
