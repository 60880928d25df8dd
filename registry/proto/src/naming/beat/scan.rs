//! The allocation-free reader of the `beat` JSON's common shape.
//!
//! A beat from a known instance needs only the identity fields of its JSON (`ip`,
//! `port`, `cluster`), yet the whole text must still be valid, so that a malformed
//! beat is refused whether or not its instance is known. serde decoding the whole
//! `BeatInfo` (strings, a metadata map, a sort) cost about as much again as the rest
//! of the request; this reader walks the text once, borrows the identity strings and
//! allocates nothing.
//!
//! It is a *fast path*, not a second parser with its own opinions: it accepts only
//! the shape every client sends (a flat object; strings without `\` escapes; plain
//! unsigned numbers; `true`/`false`/`null`; a metadata object of string values) and
//! only when every value is also valid. Anything else (an escape, an exponent, a
//! quoted number, a nested value, a duplicate field, an invalid value) answers
//! `None`, and the caller decodes with serde, whose verdict and error message stand.
//! So the rule to keep is one-way: whatever this accepts, serde accepts with the
//! same identity (`fuzz/fuzz_targets/beat_json.rs` and the tests check exactly that).

use std::borrow::Cow;

use super::BeatIdentity;
use crate::naming::{check_weight, normalize_cluster, validate_ip, ParseLimits};
use crate::params::java_trim;

/// A scalar token, as far as the fast path reads it.
#[derive(Clone, Copy)]
enum Scalar<'t> {
    /// A string without escapes (its content, borrowed).
    Str(&'t str),
    /// An unsigned integer of at most 18 digits.
    Int(i64),
    /// An unsigned number with a fraction, at most 15 significant digits.
    Frac(&'t str),
    Bool,
    Null,
}

struct Cursor<'t> {
    text: &'t str,
    at: usize,
}

impl<'t> Cursor<'t> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Skips JSON whitespace and returns the next byte, if any.
    fn next_token(&mut self) -> Option<u8> {
        while let Some(b) = self.peek() {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    /// Consumes `byte` after optional whitespace.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.next_token()? == byte).then(|| self.at += 1)
    }

    /// A string without escapes or control characters; the cursor is on its `"`.
    fn string(&mut self) -> Option<&'t str> {
        let bytes = self.text.as_bytes();
        let start = self.at + 1;
        let mut end = start;
        // serde rejects raw control characters, and an escape needs decoding:
        // either is serde's to handle. One pass that notes them without a
        // branch; a beat's strings are short, shorter than `memchr`'s set-up
        // pays for.
        let mut bad = false;
        loop {
            let b = *bytes.get(end)?;
            if b == b'"' {
                break;
            }
            bad |= (b < 0x20) | (b == b'\\');
            end += 1;
        }
        if bad {
            return None;
        }
        self.at = end + 1;
        // Both ends are ASCII quotes, so these are char boundaries.
        Some(&self.text[start..end])
    }

    /// A literal such as `true`.
    fn literal(&mut self, word: &str, value: Scalar<'t>) -> Option<Scalar<'t>> {
        self.text[self.at..].starts_with(word).then(|| {
            self.at += word.len();
            value
        })
    }

    /// An unsigned number in JSON's grammar without an exponent:
    /// `(0|[1-9][0-9]*)(\.[0-9]+)?`.
    fn number(&mut self) -> Option<Scalar<'t>> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let digits = |from: usize| {
            bytes[from..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
        };
        let int_len = digits(start);
        if int_len == 0 || (int_len > 1 && bytes[start] == b'0') {
            return None;
        }
        let mut end = start + int_len;
        let frac_len = if bytes.get(end) == Some(&b'.') {
            let n = digits(end + 1);
            if n == 0 {
                return None;
            }
            end += 1 + n;
            n
        } else {
            0
        };
        // An exponent is valid JSON, but not this path's to read.
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            return None;
        }
        self.at = end;
        let token = &self.text[start..end];
        if frac_len == 0 {
            return (int_len <= 18).then(|| Scalar::Int(token.parse().unwrap_or(0)));
        }
        // Up to 15 significant digits, serde's `significand / 10^k` is exact and
        // correctly rounded, as `str::parse` is: both give the same `f64`.
        (int_len + frac_len <= 15).then_some(Scalar::Frac(token))
    }

    fn scalar(&mut self) -> Option<Scalar<'t>> {
        match self.next_token()? {
            b'"' => self.string().map(Scalar::Str),
            b't' => self.literal("true", Scalar::Bool),
            b'f' => self.literal("false", Scalar::Bool),
            b'n' => self.literal("null", Scalar::Null),
            b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// The `metadata` value: `null`, or an object whose values are strings or
    /// `null` (serde skips null values). Returns the number of string entries,
    /// duplicates included.
    fn metadata(&mut self) -> Option<usize> {
        match self.next_token()? {
            b'n' => return self.literal("null", Scalar::Null).map(|_| 0),
            b'{' => self.at += 1,
            _ => return None,
        }
        let mut entries = 0;
        if self.next_token()? == b'}' {
            self.at += 1;
            return Some(0);
        }
        loop {
            if self.next_token()? != b'"' {
                return None;
            }
            self.string()?;
            self.eat(b':')?;
            match self.scalar()? {
                Scalar::Str(_) => entries += 1,
                Scalar::Null => {}
                // serde renders numbers and booleans as text: its job.
                _ => return None,
            }
            match self.next_token()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(entries);
                }
                _ => return None,
            }
        }
    }
}

/// Indexes of the fields `BeatInfo` knows (a bit each in the `seen` mask: a
/// second occurrence is serde's "duplicate field").
const IP: usize = 0;
const PORT: usize = 1;
const CLUSTER: usize = 2;
const SERVICE_NAME: usize = 3;
const WEIGHT: usize = 4;
const EPHEMERAL: usize = 5;
const METADATA: usize = 6;
const SCHEDULED: usize = 7;
const PERIOD: usize = 8;
const STOPPED: usize = 9;

/// The index of the field `key`: a `match` on the text compares lengths
/// first, so an unknown key costs a few comparisons and no `memcmp`.
fn field_index(key: &str) -> Option<usize> {
    Some(match key {
        "ip" => IP,
        "port" => PORT,
        "cluster" => CLUSTER,
        "serviceName" => SERVICE_NAME,
        "weight" => WEIGHT,
        "ephemeral" => EPHEMERAL,
        "metadata" => METADATA,
        "scheduled" => SCHEDULED,
        "period" => PERIOD,
        "stopped" => STOPPED,
        _ => return None,
    })
}

/// Reads the identity of a beat in the common shape, validating every field as
/// `BeatInfo::parse` does; `None` when the text is not in that shape or not valid,
/// and serde must decide.
pub(super) fn identity<'t>(text: &'t str, limits: &ParseLimits) -> Option<BeatIdentity<'t>> {
    if text.len() > limits.max_beat_bytes {
        return None;
    }
    let mut c = Cursor { text, at: 0 };
    c.eat(b'{')?;
    let mut seen = 0u16;
    let mut out = BeatIdentity::default();
    if c.next_token()? == b'}' {
        c.at += 1;
    } else {
        loop {
            if c.next_token()? != b'"' {
                return None;
            }
            let key = c.string()?;
            c.eat(b':')?;
            let field = field_index(key);
            if let Some(i) = field {
                if seen & (1 << i) != 0 {
                    return None;
                }
                seen |= 1 << i;
            }
            match field {
                Some(METADATA) => {
                    if c.metadata()? > limits.max_metadata_entries {
                        return None;
                    }
                }
                Some(i) => read_field(i, c.scalar()?, limits, &mut out)?,
                // An unknown field: any scalar is ignored, as serde ignores it.
                None => {
                    c.scalar()?;
                }
            }
            match c.next_token()? {
                b',' => c.at += 1,
                b'}' => {
                    c.at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    // serde refuses trailing characters.
    if c.next_token().is_some() {
        return None;
    }
    Some(out)
}

/// Checks one known scalar field (by its index) the way
/// `BeatInfo::parse` does and keeps the identity fields; `None` for a type or
/// value serde must judge.
fn read_field<'t>(
    field: usize,
    value: Scalar<'t>,
    limits: &ParseLimits,
    out: &mut BeatIdentity<'t>,
) -> Option<()> {
    match (field, value) {
        (_, Scalar::Null) => {}
        (IP, Scalar::Str(ip)) => {
            if !java_trim(ip).is_empty() {
                validate_ip(ip).ok()?;
                out.ip = Some(Cow::Borrowed(ip));
            }
        }
        (PORT, Scalar::Int(p)) => out.port = Some(u16::try_from(p).ok()?),
        (CLUSTER, Scalar::Str(cluster)) => {
            if !java_trim(cluster).is_empty() {
                let cluster = normalize_cluster(Some(cluster), limits).ok()?;
                out.cluster = Some(Cow::Borrowed(cluster));
            }
        }
        (SERVICE_NAME, Scalar::Str(_)) | (PERIOD, Scalar::Int(_)) => {}
        (WEIGHT, Scalar::Int(w)) => {
            check_weight(w as f64).ok()?;
        }
        (WEIGHT, Scalar::Frac(w)) => {
            check_weight(w.parse().ok()?).ok()?;
        }
        (EPHEMERAL | SCHEDULED | STOPPED, Scalar::Bool) => {}
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::beat::BeatInfo;

    /// The one-way rule: what the fast path accepts, serde accepts with the same
    /// identity. Returns whether the fast path took the text.
    fn agrees(text: &str) -> bool {
        let limits = ParseLimits::default();
        let slow = BeatInfo::parse(text, &limits);
        let Some(fast) = identity(text, &limits) else {
            return false;
        };
        let info = slow.unwrap_or_else(|e| panic!("fast path accepted `{text}`, serde: {e}"));
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref(), "{text}");
        assert_eq!(fast.port, info.port, "{text}");
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref(), "{text}");
        true
    }

    #[test]
    fn what_clients_send_takes_the_fast_path() {
        for text in [
            // Java 1.4 (Jackson, BeatInfo's field order).
            r#"{"port":8080,"ip":"10.0.0.1","weight":1.0,"serviceName":"DEFAULT_GROUP@@svc","cluster":"DEFAULT","metadata":{"preserved.register.source":"SPRING_CLOUD"},"scheduled":false,"period":5000,"stopped":false}"#,
            // Python (json.dumps, spaces after separators).
            r#"{"cluster": "c1", "ip": "10.0.0.2", "metadata": {}, "port": 80, "scheduled": true, "serviceName": "g@@s", "weight": 2, "ephemeral": true}"#,
            "{}",
            " { \"ip\" : null , \"metadata\" : null , \"x\" : 1.25 }\n",
            r#"{"ip":"host-1.example","cluster":"None","metadata":{"k":null,"k":"v"},"period":0}"#,
            r#"{"ip":"  ","cluster":" ","weight":10000.0,"weight2":"x"}"#,
        ] {
            assert!(agrees(text), "not taken: {text}");
        }
        let id = identity(
            r#"{"ip":"10.0.0.1","port":9,"cluster":"None"}"#,
            &ParseLimits::default(),
        )
        .unwrap();
        assert!(matches!(id.ip, Some(Cow::Borrowed("10.0.0.1"))));
        assert_eq!((id.port, id.cluster.as_deref()), (Some(9), Some("DEFAULT")));
    }

    #[test]
    fn other_shapes_and_bad_values_are_left_to_serde() {
        for text in [
            // Valid, but not this path's shape.
            r#"{"ip":"10.0.0\u002e1"}"#,
            r#"{"port":"8080"}"#,
            r#"{"port":8.08e3}"#,
            r#"{"weight":1e0}"#,
            r#"{"weight":0.1234567890123456}"#,
            r#"{"period":-1}"#,
            r#"{"metadata":{"k":1}}"#,
            r#"{"ephemeral":"TRUE"}"#,
            r#"{"other":[1,{"a":2}]}"#,
            // Invalid: serde gives the error.
            "",
            "{",
            "[]",
            r#"{"ip":"10.0.0.1",}"#,
            r#"{"ip":"10.0.0.1"} x"#,
            r#"{"ip":"10.0.0.1","ip":"10.0.0.2"}"#,
            r#"{"ip":"999.0.0.1"}"#,
            r#"{"port":65536}"#,
            r#"{"port":01}"#,
            r#"{"weight":10000.5}"#,
            r#"{"cluster":"a b"}"#,
            r#"{"ip":"a	b"}"#,
            r#"{"stopped":tru}"#,
            r#"{"metadata":{"k":"v",}}"#,
            r#"{"metadata":[]}"#,
        ] {
            assert!(!agrees(text), "taken: {text}");
        }
    }

    const FIELDS: [&str; 10] = [
        "ip",
        "port",
        "cluster",
        "serviceName",
        "weight",
        "ephemeral",
        "metadata",
        "scheduled",
        "period",
        "stopped",
    ];

    #[test]
    fn field_indexes_name_the_fields() {
        for (i, name) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(name), Some(i));
        }
        assert_eq!(field_index("Ip"), None);
    }

    #[test]
    fn limits_are_the_same_as_serde_s() {
        let limits = ParseLimits {
            max_metadata_entries: 1,
            max_beat_bytes: 40,
            ..ParseLimits::default()
        };
        assert!(identity(r#"{"metadata":{"a":"1","b":null}}"#, &limits).is_some());
        assert!(identity(r#"{"metadata":{"a":"1","b":"2"}}"#, &limits).is_none());
        assert!(identity(r#"{"serviceName":"a-long-name-over-forty-bytes"}"#, &limits).is_none());
    }

    #[test]
    fn prefixes_of_a_beat_never_panic_and_agree() {
        let text = r#"{"port":8080,"ip":"10.0.0.1","weight":1.5,"cluster":"c","metadata":{"a":"b","c":null},"stopped":false,"period":5000}"#;
        for end in 0..=text.len() {
            agrees(&text[..end]);
            agrees(&text[end..]);
        }
    }
}
