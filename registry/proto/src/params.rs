//! Request parameters: the query string and an `application/x-www-form-urlencoded`
//! body, decoded, plus the encoding side used to build query strings.
//!
//! Spring's `request.getParameter` (which Nacos uses) merges the query string and a
//! form body, query first, and returns the first value of a name. [`Params`] keeps that
//! precedence: **first occurrence wins, query before body**. Decoding is form decoding
//! (`+` is a space) as Tomcat does for both places; a bad `%` escape or bytes that are
//! not UTF-8 reject the whole request (Tomcat would silently drop the parameter, which
//! turns a client bug into a confusing `is required` error). An `encoding` parameter is
//! ignored: everything is UTF-8.
//!
//! Values that need no decoding are borrowed from the request buffer; parsing allocates
//! one small vector of pairs per request, plus a string for each value that contained
//! an escape.
//!
//! One parameter is held apart: `beat`, the URL-encoded JSON of a full heartbeat and
//! the one long, escape-dense value on a hot path. Its first occurrence is read in
//! place, still encoded, by the beat reader ([`BeatParam`]), which also checks its
//! encoding; only a value that reader declines is decoded here, with the same errors,
//! at the same point. [`Params::beat`] gives it; `get("beat")` finds nothing.

use std::borrow::Cow;
use std::fmt;

use crate::error::ProtoError;
use crate::http1::Request;
use crate::naming::beat::BeatParam;

/// Decoded request parameters, in arrival order (query first, then form body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params<'a> {
    pairs: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    /// For each of [`KNOWN`]: 1 + the index in `pairs` of its first
    /// occurrence, 0 when it is absent. A request reader looks up half a
    /// dozen names; comparing each with every key cost more than the split.
    first: [u32; KNOWN.len()],
    /// The first `beat` value (never in `pairs`).
    beat: Option<BeatParam<'a>>,
}

/// The names request readers look up on hot paths (beats, registers,
/// lists); [`Params::get`] of any other name compares it with every key.
const KNOWN: [&str; 18] = [
    "serviceName",
    "groupName",
    "namespaceId",
    "clusterName",
    "cluster",
    "ip",
    "port",
    "dom",
    "app",
    "ephemeral",
    "weight",
    "healthy",
    "enabled",
    "metadata",
    "clusters",
    "healthyOnly",
    "udpPort",
    "clientIP",
];

/// The index of `key` in [`KNOWN`]. Inlined into [`Params::get`], where the
/// name is nearly always a literal: the match then folds to a constant.
#[inline(always)]
fn known_slot(key: &[u8]) -> Option<usize> {
    match key {
        b"serviceName" => Some(0),
        b"groupName" => Some(1),
        b"namespaceId" => Some(2),
        b"clusterName" => Some(3),
        b"cluster" => Some(4),
        b"ip" => Some(5),
        b"port" => Some(6),
        b"dom" => Some(7),
        b"app" => Some(8),
        b"ephemeral" => Some(9),
        b"weight" => Some(10),
        b"healthy" => Some(11),
        b"enabled" => Some(12),
        b"metadata" => Some(13),
        b"clusters" => Some(14),
        b"healthyOnly" => Some(15),
        b"udpPort" => Some(16),
        b"clientIP" => Some(17),
        _ => None,
    }
}

impl<'a> Params<'a> {
    /// Decodes a raw query string and, if given, a form body.
    pub fn parse(query: &'a str, form_body: Option<&'a [u8]>) -> Result<Self, ProtoError> {
        let mut params = Params {
            pairs: Vec::with_capacity(12),
            first: [0; KNOWN.len()],
            beat: None,
        };
        params.push_pairs(query)?;
        if let Some(body) = form_body {
            // The body is checked as UTF-8 a segment at a time (the separators
            // are ASCII, so that checks it all), and a `beat` value the beat
            // reader takes needs no check: it is ASCII. That spares a second
            // pass over the ~330 bytes of a JSON beat. A body that is not
            // UTF-8 fails as such, whatever else is wrong in it, as when it
            // was checked whole before its pairs.
            params
                .push_pairs(body)
                .map_err(|e| match std::str::from_utf8(body) {
                    Ok(_) => e,
                    Err(_) => ProtoError::Utf8,
                })?;
        }
        Ok(params)
    }

    /// The parameters of a request: its query string, plus its body when the body is
    /// `application/x-www-form-urlencoded`.
    pub fn from_request(request: &'a Request<'_>) -> Result<Self, ProtoError> {
        let body = request.is_form().then_some(&*request.body);
        Params::parse(request.query, body)
    }

    /// The first `beat` value, held apart from the other pairs (see the module
    /// header): read in place when the beat reader took it, else decoded.
    pub fn beat(&self) -> Option<&BeatParam<'a>> {
        self.beat.as_ref()
    }

    /// The first value of `name`, decoded but not trimmed; never `beat` (see
    /// [`Params::beat`]).
    #[inline(always)]
    pub fn get(&self, name: &str) -> Option<&str> {
        match known_slot(name.as_bytes()) {
            Some(slot) => self.first_of(slot),
            None => self
                .pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_ref()),
        }
    }

    /// The first value of `KNOWN[slot]`.
    fn first_of(&self, slot: usize) -> Option<&str> {
        let at = self.first[slot] as usize;
        at.checked_sub(1)
            .and_then(|i| self.pairs.get(i))
            .map(|(_, v)| v.as_ref())
    }

    /// The first value of `name`, trimmed as Java's `String.trim` does, or `None` when
    /// it is absent or blank (Nacos `WebUtils.optional`).
    #[inline(always)]
    pub fn optional(&self, name: &str) -> Option<&str> {
        self.get(name).map(java_trim).filter(|v| !v.is_empty())
    }

    /// Like [`Params::optional`], but falls back to `default`.
    #[inline(always)]
    pub fn optional_or<'s>(&'s self, name: &str, default: &'s str) -> &'s str {
        self.optional(name).unwrap_or(default)
    }

    /// The trimmed value of `name`, or `Param '<name>' is required.` when it is absent
    /// or blank (Nacos `WebUtils.required`).
    #[inline(always)]
    pub fn required(&self, name: &'static str) -> Result<&str, ProtoError> {
        self.optional(name).ok_or(ProtoError::Required(name))
    }

    /// A boolean parameter read like Java's `Boolean.parseBoolean`: `true` in any case
    /// is true, any other value false; absent or blank gives `default`.
    #[inline(always)]
    pub fn bool_or(&self, name: &str, default: bool) -> bool {
        self.optional(name).map_or(default, parse_bool)
    }

    /// Every decoded pair but `beat`, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// Number of pairs, `beat` not counted.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are no pairs and no `beat`.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty() && self.beat.is_none()
    }

    fn push_pairs<R: Raw<'a>>(&mut self, raw: R) -> Result<(), ProtoError> {
        // One pass: each key and value is read once, a word at a time, for
        // its end and its first escape, and only a part with an escape is
        // decoded. A beat's query is ~170 bytes and six pairs: a `memchr`
        // per separator and per escape search cost more in set-up than in
        // search (callgrind: ~3.4k instructions per beat, against ~1k).
        let bytes = raw.bytes();
        let mut start = 0;
        while start < bytes.len() {
            let key = scan_part(bytes, start, true);
            if key.end == start && bytes[start] == b'&' {
                // An empty segment.
                start += 1;
                continue;
            }
            let has_value = key.end < bytes.len() && bytes[key.end] == b'=';
            let v_start = if has_value { key.end + 1 } else { key.end };
            // In a form body, `beat` as sent (ASCII, nothing to decode) is
            // known from its bytes: a JSON beat's key then needs no UTF-8
            // check, and its long, escape-dense value is not scanned here
            // (the beat reader reads it). Any other key, or spelling of it,
            // is decoded first and compared after.
            if R::UNCHECKED && bytes[start..key.end] == *b"beat" {
                let end =
                    memchr::memchr(b'&', &bytes[v_start..]).map_or(bytes.len(), |i| v_start + i);
                self.push_beat(raw, v_start..end)?;
                start = end + 1;
                continue;
            }
            let k = decode_part(raw, start..key.end, key.escape)?;
            let value = if has_value {
                scan_part(bytes, v_start, false)
            } else {
                Part {
                    end: key.end,
                    escape: None,
                }
            };
            if k == "beat" {
                self.push_beat(raw, v_start..value.end)?;
            } else {
                let v = decode_part(raw, v_start..value.end, value.escape)?;
                if let Some(slot) = known_slot(k.as_bytes()) {
                    if self.first[slot] == 0 {
                        // At most one pair per two bytes of a bounded body.
                        self.first[slot] = u32::try_from(self.pairs.len() + 1).unwrap_or(0);
                    }
                }
                self.pairs.push((k, v));
            }
            start = value.end + 1;
        }
        Ok(())
    }

    /// A `beat` value. Every value is checked where it stands, as any other
    /// is; only the first is kept, as `get` would find only the first.
    fn push_beat<R: Raw<'a>>(
        &mut self,
        raw: R,
        v: std::ops::Range<usize>,
    ) -> Result<(), ProtoError> {
        if self.beat.is_none() {
            self.beat = Some(match BeatParam::scan(&raw.bytes()[v.clone()]) {
                Some(read) => read,
                None => BeatParam::decoded(decode_str(raw.text(v)?)?),
            });
        } else {
            decode_str(raw.text(v)?)?;
        }
        Ok(())
    }
}

/// What pairs are split from: a query string (already UTF-8: its segments are
/// slices) or a form body (bytes: each segment is checked as UTF-8).
trait Raw<'a>: Copy {
    /// Whether [`Raw::text`] checks a segment as UTF-8 (a form body).
    const UNCHECKED: bool;
    fn bytes(self) -> &'a [u8];
    /// The segment at `range`, whose ends are at ASCII separators.
    fn text(self, range: std::ops::Range<usize>) -> Result<&'a str, ProtoError>;
}

impl<'a> Raw<'a> for &'a str {
    const UNCHECKED: bool = false;

    fn bytes(self) -> &'a [u8] {
        self.as_bytes()
    }

    fn text(self, range: std::ops::Range<usize>) -> Result<&'a str, ProtoError> {
        Ok(&self[range])
    }
}

impl<'a> Raw<'a> for &'a [u8] {
    const UNCHECKED: bool = true;

    fn bytes(self) -> &'a [u8] {
        self
    }

    fn text(self, range: std::ops::Range<usize>) -> Result<&'a str, ProtoError> {
        std::str::from_utf8(&self[range]).map_err(|_| ProtoError::Utf8)
    }
}

/// Where a key or value ends, and where its first escape is.
struct Part {
    /// The offset of the separator that ends it (or the end of the input).
    end: usize,
    /// The offset of its first `%` or `+`, if any.
    escape: Option<usize>,
}

/// Reads a key (`key`: up to `&` or `=`) or a value (up to `&`) from `at`.
///
/// Eight bytes at a time, as [`escape_free_prefix`] does: the separators'
/// and the escapes' flags of a word are found together, and the lowest flag
/// of each is a true one.
#[inline(always)]
fn scan_part(bytes: &[u8], mut at: usize, key: bool) -> Part {
    let mut escape = None;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("a slice of 8 bytes"));
        let stop = byte_flags(word, b'&') | if key { byte_flags(word, b'=') } else { 0 };
        let esc = byte_flags(word, b'%') | byte_flags(word, b'+');
        if escape.is_none() && esc != 0 {
            let e = esc.trailing_zeros();
            if stop == 0 || e < stop.trailing_zeros() {
                escape = Some(at + (e / 8) as usize);
            }
        }
        if stop != 0 {
            return Part {
                end: at + (stop.trailing_zeros() / 8) as usize,
                escape,
            };
        }
        at += 8;
    }
    while let Some(&b) = bytes.get(at) {
        match b {
            b'&' => break,
            b'=' if key => break,
            b'%' | b'+' if escape.is_none() => escape = Some(at),
            _ => {}
        }
        at += 1;
    }
    Part { end: at, escape }
}

/// The high bit of each byte of `word` that equals `needle`, and perhaps of
/// bytes above the lowest such one (the classic "has a zero byte" test).
#[inline(always)]
fn byte_flags(word: u64, needle: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let x = word ^ (ONES * u64::from(needle));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// The key or value at `range`, decoded when it has an escape (its first
/// at `escape`, an offset in the whole input).
fn decode_part<'a, R: Raw<'a>>(
    raw: R,
    range: std::ops::Range<usize>,
    escape: Option<usize>,
) -> Result<Cow<'a, str>, ProtoError> {
    let start = range.start;
    let text = raw.text(range)?;
    match escape {
        Some(at) => match decode_ascii_escapes(text, at - start) {
            Some(decoded) => Ok(Cow::Owned(decoded)),
            None => decode_escaped(text.as_bytes(), at - start).map(Cow::Owned),
        },
        None => Ok(Cow::Borrowed(text)),
    }
}

/// Decodes `text`, whose first `%` or `+` is at `first`, when every escape
/// is valid and stands for an ASCII byte (`DEFAULT_GROUP%40%40svc`): the
/// text between escapes is copied as text, so the result needs no UTF-8
/// check. `None` otherwise: [`decode_escaped`] then decodes it, or says why
/// it cannot be.
fn decode_ascii_escapes(text: &str, first: usize) -> Option<String> {
    let raw = text.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let (mut run, mut at) = (0, first);
    while at < raw.len() {
        if let Some(chunk) = raw.get(at..at + 8) {
            let plain = escape_free_prefix(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
            at += plain;
            if plain == 8 {
                continue;
            }
        }
        let (decoded, width) = match raw[at] {
            b'%' => (escape_at(raw, at).filter(u8::is_ascii)?, 3),
            b'+' => (b' ', 1),
            _ => {
                at += 1;
                continue;
            }
        };
        // `at` is at an ASCII byte: a char boundary.
        out.push_str(&text[run..at]);
        out.push(char::from(decoded));
        at += width;
        run = at;
    }
    out.push_str(&text[run..]);
    Some(out)
}

/// Decodes UTF-8 text that may contain `%` or `+`; borrowed when it has neither.
fn decode_str(raw: &str) -> Result<Cow<'_, str>, ProtoError> {
    match memchr::memchr2(b'%', b'+', raw.as_bytes()) {
        Some(first) => decode_escaped(raw.as_bytes(), first).map(Cow::Owned),
        None => Ok(Cow::Borrowed(raw)),
    }
}

/// Java's `Boolean.parseBoolean`: `true` ignoring ASCII case; anything else is false.
pub fn parse_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// Java's `String.trim`: strips leading and trailing chars `<= ' '`.
pub fn java_trim(s: &str) -> &str {
    // By bytes: the bytes of a multi-byte character are all above `' '`,
    // so this cuts where the char-wise trim does, without decoding chars.
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) if first > b' ' && last > b' ' => s,
        _ => {
            let start = b.iter().position(|&c| c > b' ').unwrap_or(b.len());
            let end = b.iter().rposition(|&c| c > b' ').map_or(start, |i| i + 1);
            &s[start..end]
        }
    }
}

/// Form-decodes `raw` (`%XX` escapes, `+` as space) into UTF-8 text, borrowing when
/// there is nothing to decode.
pub fn percent_decode(raw: &[u8]) -> Result<Cow<'_, str>, ProtoError> {
    match memchr::memchr2(b'%', b'+', raw) {
        Some(first) => decode_escaped(raw, first).map(Cow::Owned),
        None => std::str::from_utf8(raw)
            .map(Cow::Borrowed)
            .map_err(|_| ProtoError::Utf8),
    }
}

/// The byte that the escape `%XX` at `at` in `raw` stands for; `None` when
/// `at` holds no complete, valid escape.
#[inline(always)]
pub(crate) fn escape_at(raw: &[u8], at: usize) -> Option<u8> {
    let (hi, lo) = (
        HEX[usize::from(*raw.get(at + 1)?)],
        HEX[usize::from(*raw.get(at + 2)?)],
    );
    ((hi | lo) & 0xf0 == 0).then_some(hi << 4 | lo)
}

/// Decodes `raw`, whose first `%` or `+` is at `first`.
fn decode_escaped(raw: &[u8], first: usize) -> Result<String, ProtoError> {
    // Eight bytes at a time: each step stores a whole word and advances past
    // its escape-free prefix only, then decodes the escape that ended it. A
    // URL-encoded JSON beat has an escape every ~5 bytes: per-byte loops and
    // searches for the next escape both cost several times more. The output is
    // never longer than the input; the 8 spare bytes take the last word's store.
    let mut out = vec![0u8; raw.len() + 8];
    out[..first].copy_from_slice(&raw[..first]);
    // Invariant: w <= r (an escape is at least one input byte per output byte).
    let (mut r, mut w) = (first, first);
    while r < raw.len() {
        if let Some(chunk) = raw.get(r..r + 8) {
            let plain = escape_free_prefix(u64::from_le_bytes(
                chunk.try_into().expect("a slice of 8 bytes"),
            ));
            out[w..w + 8].copy_from_slice(chunk);
            r += plain;
            w += plain;
            if plain == 8 {
                continue;
            }
        }
        // An escape, or the last few bytes.
        out[w] = match raw[r] {
            b'%' => {
                let (Some(&hi), Some(&lo)) = (raw.get(r + 1), raw.get(r + 2)) else {
                    return Err(ProtoError::PercentEncoding);
                };
                let (hi, lo) = (HEX[usize::from(hi)], HEX[usize::from(lo)]);
                if (hi | lo) & 0xf0 != 0 {
                    return Err(ProtoError::PercentEncoding);
                }
                r += 3;
                hi << 4 | lo
            }
            b'+' => {
                r += 1;
                b' '
            }
            b => {
                r += 1;
                b
            }
        };
        w += 1;
    }
    out.truncate(w);
    String::from_utf8(out).map_err(|_| ProtoError::Utf8)
}

/// How many of the 8 bytes of `word` (first byte lowest) come before the first
/// `%` or `+`: 8 when there is none. The classic "has a zero byte" test on the
/// word XOR each needle; it may flag false bytes only above a true one, and only
/// the lowest flag is read.
fn escape_free_prefix(word: u64) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let flags =
        zero_bytes(word ^ (ONES * u64::from(b'%'))) | zero_bytes(word ^ (ONES * u64::from(b'+')));
    (flags.trailing_zeros() / 8) as usize
}

/// The value of each byte as a hex digit; `0xff` for a byte that is not one. A
/// table, not a `match`: a URL-encoded JSON beat has ~60 escapes.
const HEX: [u8; 256] = {
    let mut t = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Appends `s` percent-encoded for a query string or form body: every byte except the
/// RFC 3986 unreserved set (`A-Za-z0-9-._~`) becomes `%XX`, so `+`, `@`, `&`, `=`, `%`
/// and spaces survive any decoder.
///
/// Runs of unreserved bytes are copied whole: loadgen encodes every request it
/// sends, and pushing one `char` at a time made this its hottest function (15 %
/// of its CPU under `nacos-1x-report`).
pub fn percent_encode_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let bytes = s.as_bytes();
    out.reserve(bytes.len());
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if is_unreserved(b) {
            continue;
        }
        push_ascii(out, &bytes[run..i]);
        push_ascii(
            out,
            &[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]],
        );
        run = i + 1;
    }
    push_ascii(out, &bytes[run..]);
}

/// RFC 3986's unreserved characters: the bytes a query never needs to escape.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Appends bytes known to be ASCII (an unreserved run or an escape).
fn push_ascii(out: &mut String, ascii: &[u8]) {
    if let Ok(text) = std::str::from_utf8(ascii) {
        out.push_str(text);
    }
}

/// Builds `path?k=v&k=v` into a reusable `String`, percent-encoding every key and value.
///
/// ```
/// let mut s = String::new();
/// registry_proto::params::QueryWriter::new(&mut s, "/x")
///     .param("serviceName", "DEFAULT_GROUP@@demo")
///     .display("port", 8080);
/// assert_eq!(s, "/x?serviceName=DEFAULT_GROUP%40%40demo&port=8080");
/// ```
#[derive(Debug)]
pub struct QueryWriter<'o> {
    out: &'o mut String,
    first: bool,
    question: bool,
}

impl<'o> QueryWriter<'o> {
    /// Appends `path` to `out` and starts a query after it.
    pub fn new(out: &'o mut String, path: &str) -> Self {
        out.push_str(path);
        QueryWriter {
            out,
            first: true,
            question: true,
        }
    }

    /// Starts a bare form body (`k=v&k=v`, no path and no `?`) in `out`.
    pub fn form(out: &'o mut String) -> Self {
        QueryWriter {
            out,
            first: true,
            question: false,
        }
    }

    fn sep(&mut self, key: &str) {
        if self.first {
            if self.question {
                self.out.push('?');
            }
            self.first = false;
        } else {
            self.out.push('&');
        }
        percent_encode_into(self.out, key);
        self.out.push('=');
    }

    /// Appends `key=value`, both encoded.
    pub fn param(&mut self, key: &str, value: &str) -> &mut Self {
        self.sep(key);
        percent_encode_into(self.out, value);
        self
    }

    /// Appends `key=value` where the value is `parts` joined, encoded part by
    /// part: a grouped service name (`group`, `@@`, `name`) without first
    /// building it in a scratch string, as `display` would.
    pub fn param_concat(&mut self, key: &str, parts: &[&str]) -> &mut Self {
        self.sep(key);
        for part in parts {
            percent_encode_into(self.out, part);
        }
        self
    }

    /// Appends `key=value` for a value rendered with `Display` (numbers, booleans).
    pub fn display(&mut self, key: &str, value: impl fmt::Display) -> &mut Self {
        use fmt::Write;
        self.sep(key);
        let start = self.out.len();
        // Writing into a String cannot fail.
        let _ = write!(self.out, "{value}");
        if !self.out[start..].bytes().all(is_unreserved) {
            let raw = self.out.split_off(start);
            percent_encode_into(self.out, &raw);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_occurrence_wins_query_before_body() {
        let p = Params::parse("a=1&b=&a=2", Some(b"a=3&c=x+y%21")).unwrap();
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.get("b"), Some(""));
        assert_eq!(p.optional("b"), None);
        assert_eq!(p.get("c"), Some("x y!"));
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn borrows_when_nothing_to_decode() {
        let p = Params::parse("serviceName=svc&ip=1.2.3.4", None).unwrap();
        assert!(p
            .pairs
            .iter()
            .all(|(k, v)| matches!(k, Cow::Borrowed(_)) && matches!(v, Cow::Borrowed(_))));
    }

    #[test]
    fn required_and_trim() {
        let p = Params::parse("x=+%20v%09+&e=&blank=+", None).unwrap();
        assert_eq!(p.required("x"), Ok("v"));
        assert_eq!(
            p.required("e").unwrap_err().to_string(),
            "Param 'e' is required."
        );
        assert_eq!(p.required("blank"), Err(ProtoError::Required("blank")));
        assert_eq!(p.required("missing"), Err(ProtoError::Required("missing")));
    }

    #[test]
    fn booleans_like_java() {
        for t in ["true", "True", "TRUE", "tRuE"] {
            assert!(parse_bool(t));
        }
        for f in ["false", "False", "1", "yes", "", "true "] {
            assert!(!parse_bool(f));
        }
        let p = Params::parse("a=True&b=False&c=", None).unwrap();
        assert!(p.bool_or("a", false));
        assert!(!p.bool_or("b", true));
        assert!(p.bool_or("c", true));
    }

    #[test]
    fn decoding_errors() {
        assert_eq!(
            Params::parse("a=%zz", None),
            Err(ProtoError::PercentEncoding)
        );
        assert_eq!(
            Params::parse("a=%f", None),
            Err(ProtoError::PercentEncoding)
        );
        assert_eq!(Params::parse("a=%ff", None), Err(ProtoError::Utf8));
        assert_eq!(Params::parse("", Some(b"a=\xff")), Err(ProtoError::Utf8));
        assert_eq!(
            Params::parse("a=%E4%BD%A0", None).unwrap().get("a"),
            Some("你")
        );
    }

    #[test]
    fn beat_is_held_apart_and_checked_in_order() {
        let p = Params::parse("beat=%7B%7D&a=1", Some(b"beat=%7B%22ip%22%7D&b=2")).unwrap();
        assert_eq!(p.get("beat"), None);
        assert_eq!(p.beat().unwrap().text(), "{}");
        assert_eq!((p.len(), p.get("b")), (2, Some("2")));
        // A value the beat reader declines is decoded where it stands.
        let p = Params::parse("", Some(b"beat=+x%21")).unwrap();
        assert_eq!(p.beat().unwrap().text(), " x!");
        // The key is `beat` however it is spelt, in a body as in a query.
        for (query, body) in [
            ("", &b"be%61t=%7B%7D&beat=1"[..]),
            ("", b"beat=%7B%7D&be%61t=1"),
            ("b%65at=%7B%7D", b"beat=1"),
            ("beat=%7B%7D", b"be%61t=1"),
        ] {
            let p = Params::parse(query, Some(body)).unwrap();
            assert_eq!((p.beat().unwrap().text(), p.len()), ("{}".into(), 0));
        }
        let p = Params::parse("", Some(b"beat2=1&bea=2&Beat=3&beat%20=4")).unwrap();
        assert_eq!((p.beat(), p.len()), (None, 4));
        // Every value is checked, the first error in arrival order wins...
        for (body, error) in [
            (&b"beat=%zz&a=%ff"[..], ProtoError::PercentEncoding),
            (b"beat=%7B%7D&beat=%zz", ProtoError::PercentEncoding),
            (b"beat=%ff&a=%zz", ProtoError::Utf8),
            (b"a=%ff&beat=%zz", ProtoError::Utf8),
            // ...but a body that is not UTF-8 fails as such, as when it was
            // checked whole before its pairs.
            (b"a=%zz&beat=%7B%7D\xff", ProtoError::Utf8),
            (b"beat=%zz&\xff", ProtoError::Utf8),
            (b"beat=%7B%7D\xc3", ProtoError::Utf8),
        ] {
            assert_eq!(Params::parse("", Some(body)), Err(error), "{body:?}");
        }
        assert_eq!(
            Params::parse("a=%zz", Some(b"\xff")),
            Err(ProtoError::PercentEncoding)
        );
    }

    #[test]
    fn encode_decode_round_trip() {
        let original = "G@@svc name+&=%/ü";
        let mut s = String::new();
        QueryWriter::form(&mut s)
            .param("k", original)
            .display("n", -1.5);
        assert_eq!(
            s,
            format!("k={}&n=-1.5", {
                let mut e = String::new();
                percent_encode_into(&mut e, original);
                e
            })
        );
        let p = Params::parse(&s, None).unwrap();
        assert_eq!(p.get("k"), Some(original));
        assert_eq!(p.get("n"), Some("-1.5"));
    }

    /// The encoder as RFC 3986 reads, one byte at a time: `percent_encode_into`
    /// must agree with it on every input.
    fn reference_encode(s: &str) -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    }

    proptest::proptest! {
        #[test]
        fn encoding_agrees_with_the_reference_and_decodes_back(
            s in "[a-zA-Z0-9._~@&=+% /ü你-]{0,24}",
            prefix in "[a-z?=&]{0,4}",
        ) {
            let mut out = prefix.clone();
            percent_encode_into(&mut out, &s);
            proptest::prop_assert_eq!(&out, &format!("{prefix}{}", reference_encode(&s)));
            let decoded = percent_decode(&out.as_bytes()[prefix.len()..]).map(|c| c.into_owned());
            proptest::prop_assert_eq!(decoded, Ok(s));
        }
    }

    /// The decoder as the form spec reads, byte by byte, without the fast
    /// paths: `percent_decode` must agree with it on every input.
    fn reference_decode(raw: &[u8]) -> Result<String, ProtoError> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < raw.len() {
            match raw[i] {
                b'%' => {
                    let digit = |j: usize| {
                        raw.get(j)
                            .and_then(|&b| char::from(b).to_digit(16))
                            .ok_or(ProtoError::PercentEncoding)
                    };
                    out.push((digit(i + 1)? * 16 + digit(i + 2)?) as u8);
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| ProtoError::Utf8)
    }

    /// The parameters as the reader before the one-pass split read them:
    /// split on `&` and the first `=`, every key and value decoded whole, a
    /// body checked as UTF-8 whole (a body that is not fails as such). The
    /// pairs, then the first `beat` value's text.
    #[allow(clippy::type_complexity)]
    fn reference_params(
        query: &str,
        body: Option<&[u8]>,
    ) -> Result<(Vec<(String, String)>, Option<String>), ProtoError> {
        let mut pairs = Vec::new();
        let mut beat = None;
        let mut push = |raw: &str| -> Result<(), ProtoError> {
            for segment in raw.split('&').filter(|s| !s.is_empty()) {
                let (k, v) = segment.split_once('=').unwrap_or((segment, ""));
                let k = reference_decode(k.as_bytes())?;
                let v = reference_decode(v.as_bytes())?;
                if k == "beat" {
                    beat.get_or_insert(v);
                } else {
                    pairs.push((k, v));
                }
            }
            Ok(())
        };
        push(query)?;
        if let Some(body) = body {
            push(std::str::from_utf8(body).map_err(|_| ProtoError::Utf8)?)?;
        }
        Ok((pairs, beat))
    }

    fn params_strategy() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let part = prop_oneof![
            proptest::sample::select(KNOWN.to_vec()).prop_map(str::to_owned),
            Just("beat".to_owned()),
            Just("be%61t".to_owned()),
            Just("%69p".to_owned()),
            "[a-z%+=&4@F0Gü]{0,10}",
            "[a-zA-Z0-9._@]{8,20}",
        ];
        proptest::collection::vec((part.clone(), "[=&]{0,2}", part), 0..6).prop_map(|parts| {
            parts
                .into_iter()
                .map(|(k, sep, v)| format!("{k}{sep}{v}&"))
                .collect()
        })
    }

    proptest::proptest! {
        /// The one-pass reader against the reference: the same pairs in the
        /// same order, the same first `beat`, the same first value for every
        /// name (known or not), or the same error.
        #[test]
        fn one_pass_reader_agrees_with_the_reference(
            query in params_strategy(),
            body in proptest::option::of(params_strategy()),
            bad_byte in proptest::option::of(0usize..64),
        ) {
            let mut body = body.map(String::into_bytes);
            if let (Some(b), Some(at)) = (body.as_mut(), bad_byte) {
                if !b.is_empty() {
                    let at = at % b.len();
                    b[at] = 0xff;
                }
            }
            let ours = Params::parse(&query, body.as_deref());
            let reference = reference_params(&query, body.as_deref());
            match (&ours, &reference) {
                (Ok(p), Ok((pairs, beat))) => {
                    let got: Vec<(String, String)> =
                        p.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
                    proptest::prop_assert_eq!(&got, pairs);
                    proptest::prop_assert_eq!(
                        p.beat().map(|b| b.text().into_owned()),
                        beat.clone()
                    );
                    for name in KNOWN.iter().copied().chain(["a", "beat", "x y"]) {
                        let first = pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
                        proptest::prop_assert_eq!(p.get(name), first, "{}", name);
                    }
                }
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a, b),
                _ => proptest::prop_assert!(false, "{:?} vs {:?}", ours, reference),
            }
        }
    }

    #[test]
    fn known_names_have_their_slots() {
        for (i, name) in KNOWN.iter().enumerate() {
            assert_eq!(known_slot(name.as_bytes()), Some(i), "{name}");
        }
        assert_eq!(known_slot(b"beat"), None);
        // Escaped spellings of a known name find it, first occurrence first.
        let p = Params::parse("%69p=1&ip=2&s%65rviceName=a+b", None).unwrap();
        assert_eq!(p.get("ip"), Some("1"));
        assert_eq!(p.get("serviceName"), Some("a b"));
        assert_eq!(java_trim(" \t x y\u{1} "), "x y");
        assert_eq!(java_trim(" ü "), "ü");
        assert_eq!(java_trim("  "), "");
    }

    #[test]
    fn escape_free_prefixes() {
        let word = |b: &[u8; 8]| u64::from_le_bytes(*b);
        assert_eq!(escape_free_prefix(word(b"abcdefgh")), 8);
        assert_eq!(escape_free_prefix(word(b"%bcdefgh")), 0);
        assert_eq!(escape_free_prefix(word(b"abc+e%gh")), 3);
        assert_eq!(escape_free_prefix(word(b"abcdefg%")), 7);
        // A byte one above a needle, after a needle: no false flag below.
        assert_eq!(escape_free_prefix(word(b"a\x01%&,+\xff\x00")), 2);
    }

    proptest::proptest! {
        #[test]
        fn decoding_agrees_with_the_reference(
            raw in proptest::collection::vec(proptest::sample::select(
                b"%+aZ09fF\x80\xc3\xa9&=Gg%%".to_vec()), 0..40),
        ) {
            let fast = percent_decode(&raw).map(|c| c.into_owned());
            proptest::prop_assert_eq!(fast, reference_decode(&raw));
        }
    }
}
