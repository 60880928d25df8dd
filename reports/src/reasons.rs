//! Why operations failed: per operation, the first distinct error messages of each
//! error class, each with how often it occurred.
//!
//! A count per class says *that* 267,679 registrations failed with "connection";
//! the messages say *why* (refused, reset, no stream left). They are bounded so a
//! run that fails a million ways stays a small report: at most
//! [`MESSAGES_PER_CLASS`] distinct messages per class are kept (the first ones seen;
//! later distinct ones only count in the class total, so the kept counts may add up
//! to less than it), each cut to [`MESSAGE_CHARS`] characters. The same bound holds
//! for a recorder's per-second figures, for the run's total and for `report merge`
//! (counts of equal messages add; a merge keeps the first inputs' messages first).

use serde::{Deserialize, Serialize};

/// Distinct messages kept per error class and operation.
pub const MESSAGES_PER_CLASS: usize = 5;

/// Characters kept of a message (longer ones end in `…`).
pub const MESSAGE_CHARS: usize = 200;

/// One error message of one class, and how often it occurred.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorSample {
    /// The error class (`http_4xx`, `http_5xx`, `timeout`, `connection`, `protocol`).
    pub class: String,
    /// What went wrong, at most [`MESSAGE_CHARS`] characters.
    pub message: String,
    /// Failures with this class and message.
    pub count: u64,
}

/// `message` cut to [`MESSAGE_CHARS`] characters (on a character boundary).
pub fn truncate(message: &str) -> std::borrow::Cow<'_, str> {
    match message.char_indices().nth(MESSAGE_CHARS) {
        None => message.into(),
        Some((end, _)) => format!("{}…", &message[..end]).into(),
    }
}

/// Counts `count` failures of `class` with `message` into `samples`: into the equal
/// message when there is one, as a new one while `class` has fewer than
/// [`MESSAGES_PER_CLASS`]; otherwise dropped (the class total still counts them).
/// Returns whether the message is among the kept ones.
pub fn add(samples: &mut Vec<ErrorSample>, class: &str, message: &str, count: u64) -> bool {
    let message = truncate(message);
    let mut of_class = 0;
    for s in samples.iter_mut().filter(|s| s.class == class) {
        if s.message == message {
            s.count += count;
            return true;
        }
        of_class += 1;
    }
    if of_class >= MESSAGES_PER_CLASS {
        return false;
    }
    samples.push(ErrorSample {
        class: class.to_owned(),
        message: message.into_owned(),
        count,
    });
    true
}

/// Adds every sample of `from` into `into` (see [`add`]).
pub fn merge(into: &mut Vec<ErrorSample>, from: &[ErrorSample]) {
    for s in from {
        add(into, &s.class, &s.message, s.count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_messages_count_and_each_class_keeps_its_first_few() {
        let mut samples = Vec::new();
        assert!(add(&mut samples, "connection", "refused", 1));
        assert!(add(&mut samples, "connection", "refused", 2));
        for i in 0..MESSAGES_PER_CLASS + 3 {
            add(&mut samples, "timeout", &format!("after {i} s"), 1);
        }
        assert!(!add(&mut samples, "timeout", "after 99 s", 1), "bounded");
        assert!(
            add(&mut samples, "timeout", "after 0 s", 1),
            "a kept one counts on"
        );
        let of = |class: &str| samples.iter().filter(|s| s.class == class).count();
        assert_eq!((of("connection"), of("timeout")), (1, MESSAGES_PER_CLASS));
        assert_eq!(samples[0].count, 3);
        assert_eq!(samples[1].count, 2, "after 0 s: twice");
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MESSAGE_CHARS + 10);
        let cut = truncate(&long);
        assert_eq!(cut.chars().count(), MESSAGE_CHARS + 1);
        assert!(cut.ends_with('…'));
        let mut samples = Vec::new();
        add(&mut samples, "protocol", &long, 1);
        add(&mut samples, "protocol", &format!("{long}x"), 1);
        assert_eq!(samples.len(), 1, "equal once cut");
        assert_eq!(samples[0].count, 2);
        assert_eq!(truncate("short"), "short");
    }

    #[test]
    fn merging_adds_counts_and_stays_bounded() {
        let mut a = Vec::new();
        add(&mut a, "http_5xx", "HTTP 503", 4);
        let mut b = Vec::new();
        add(&mut b, "http_5xx", "HTTP 503", 6);
        for i in 0..MESSAGES_PER_CLASS {
            add(&mut b, "http_5xx", &format!("HTTP 50{i} other"), 1);
        }
        merge(&mut a, &b);
        assert_eq!(a.len(), MESSAGES_PER_CLASS);
        assert_eq!(a[0].count, 10);
    }
}
