//! Segments: one profile split into N deterministic slices run by N processes
//! (`loadgen run --segment I/N`), whose reports `report merge` joins exactly.
//!
//! The slices are cut by service, so that each is a complete little world of its own:
//! segment `I` (1-based) owns the services `s` with `s % N == I - 1`, every instance
//! of those services, the subscribers that watch them, and `1/N` of every rate. Its
//! subscribers' expected lists then hold only its own instances, so each segment can
//! check convergence and the server's lists of its own services by itself; the N
//! processes together send exactly the instances, subscribers and rates of one
//! process (the union of the slices is the whole, and they do not overlap).
//!
//! Within a slice, items are numbered densely ("segment-local" indexes `0..items`):
//! local item `j` is the `(j / owned)`-th item of its owned group `j % owned`, i.e.
//! global item `first + (j % owned) * N + (j / owned) * groups`, where the groups are
//! services (for instances) or watched services (for subscribers). The mapping is
//! increasing, so the slice of `0..total` is exactly a prefix of the local indexes.

use std::fmt;
use std::str::FromStr;

/// Segment `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Which slice, `1..=count`.
    pub index: u32,
    /// How many slices.
    pub count: u32,
}

/// Why a segment spec is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid segment {spec:?}: {reason} (expected I/N with 1 <= I <= N, e.g. 1/2)")]
pub struct SegmentError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong.
    pub reason: String,
}

impl Segment {
    /// The whole profile: one segment of one.
    pub const WHOLE: Segment = Segment { index: 1, count: 1 };

    /// Whether this is the whole profile.
    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    fn first(self) -> u32 {
        self.index - 1
    }

    /// How many of `groups` groups (services) this segment owns.
    pub fn owned(self, groups: u32) -> u32 {
        crate::schedule::share(u64::from(groups), self.first(), self.count) as u32
    }

    /// Whether the segment owns group `g`.
    pub fn owns(self, g: u32) -> bool {
        g % self.count == self.first()
    }

    /// The `k`-th group the segment owns.
    pub fn group(self, k: u32) -> u32 {
        self.first() + k * self.count
    }

    /// The global index of segment-local item `j`, items being spread over `groups`
    /// groups as item `i` belongs to group `i % groups`.
    pub fn global(self, j: u32, groups: u32) -> u32 {
        let owned = self.owned(groups).max(1);
        self.group(j % owned) + (j / owned) * groups
    }

    /// How many of the items `0..total` (spread over `groups`) the segment owns.
    pub fn items(self, total: u32, groups: u32) -> u32 {
        (0..self.owned(groups))
            .map(|k| {
                let g = self.group(k);
                if g < total {
                    (total - g).div_ceil(groups)
                } else {
                    0
                }
            })
            .sum()
    }
}

impl FromStr for Segment {
    type Err = SegmentError;

    fn from_str(spec: &str) -> Result<Segment, SegmentError> {
        let err = |reason: &str| SegmentError {
            spec: spec.to_owned(),
            reason: reason.to_owned(),
        };
        let (i, n) = spec.trim().split_once('/').ok_or_else(|| err("no '/'"))?;
        let index: u32 = i.trim().parse().map_err(|_| err("I is not a number"))?;
        let count: u32 = n.trim().parse().map_err(|_| err("N is not a number"))?;
        if count == 0 {
            return Err(err("N must be at least 1"));
        }
        if index == 0 || index > count {
            return Err(err("I must be between 1 and N"));
        }
        Ok(Segment { index, count })
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_valid_specs_and_refuses_the_rest() {
        assert_eq!("2/3".parse(), Ok(Segment { index: 2, count: 3 }));
        assert_eq!(" 1/1 ".parse(), Ok(Segment::WHOLE));
        for bad in ["3/2", "0/2", "1/0", "1", "a/2", "1/b", "", "-1/2", "1/2/3"] {
            let e = bad.parse::<Segment>().unwrap_err();
            assert!(e.to_string().contains("expected I/N"), "{bad}: {e}");
        }
        assert_eq!(Segment { index: 2, count: 5 }.to_string(), "2/5");
    }

    proptest! {
        /// The slices of 0..total partition it exactly, and each slice is a dense
        /// prefix of its local indexes, in increasing order.
        #[test]
        fn slices_partition_the_items(total in 0u32..3000, groups in 1u32..60, count in 1u32..6) {
            let mut seen = vec![false; total as usize];
            for index in 1..=count {
                let segment = Segment { index, count };
                let items = segment.items(total, groups);
                let mut last = None;
                for j in 0..items {
                    let g = segment.global(j, groups);
                    prop_assert!(g < total);
                    prop_assert!(segment.owns(g % groups));
                    prop_assert!(!seen[g as usize], "item {} twice", g);
                    seen[g as usize] = true;
                    prop_assert!(last.is_none_or(|l| l < g));
                    last = Some(g);
                }
                if segment.owned(groups) > 0 {
                    prop_assert!(segment.global(items, groups) >= total);
                }
            }
            prop_assert!(seen.iter().all(|s| *s));
        }

        #[test]
        fn any_text_parses_or_errors_without_panicking(text in ".{0,12}") {
            let _ = text.parse::<Segment>();
        }
    }
}
