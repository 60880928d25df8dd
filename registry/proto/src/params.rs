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
    /// The first `beat` value (never in `pairs`).
    beat: Option<BeatParam<'a>>,
}

impl<'a> Params<'a> {
    /// Decodes a raw query string and, if given, a form body.
    pub fn parse(query: &'a str, form_body: Option<&'a [u8]>) -> Result<Self, ProtoError> {
        let mut params = Params {
            pairs: Vec::with_capacity(12),
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
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_ref())
    }

    /// The first value of `name`, trimmed as Java's `String.trim` does, or `None` when
    /// it is absent or blank (Nacos `WebUtils.optional`).
    pub fn optional(&self, name: &str) -> Option<&str> {
        self.get(name).map(java_trim).filter(|v| !v.is_empty())
    }

    /// Like [`Params::optional`], but falls back to `default`.
    pub fn optional_or<'s>(&'s self, name: &str, default: &'s str) -> &'s str {
        self.optional(name).unwrap_or(default)
    }

    /// The trimmed value of `name`, or `Param '<name>' is required.` when it is absent
    /// or blank (Nacos `WebUtils.required`).
    pub fn required(&self, name: &'static str) -> Result<&str, ProtoError> {
        self.optional(name).ok_or(ProtoError::Required(name))
    }

    /// A boolean parameter read like Java's `Boolean.parseBoolean`: `true` in any case
    /// is true, any other value false; absent or blank gives `default`.
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
        // Separators and escapes are found with `memchr` (several bytes per
        // instruction), not a byte-at-a-time loop: a beat's query is ~170 bytes and
        // a JSON beat's form body ~330, and both are read for every beat.
        let bytes = raw.bytes();
        let mut start = 0;
        while start <= bytes.len() {
            let end = memchr::memchr(b'&', &bytes[start..]).map_or(bytes.len(), |i| start + i);
            if end > start {
                let (k, v) = match memchr::memchr(b'=', &bytes[start..end]) {
                    Some(e) => (start..start + e, start + e + 1..end),
                    None => (start..end, end..end),
                };
                // In a form body, `beat` as sent (ASCII, nothing to decode) is
                // known from its bytes: a JSON beat's key then needs no UTF-8
                // check or escape search. Any other key, or spelling of it, is
                // decoded first and compared after. A query's keys are slices
                // of checked text, and are not compared twice.
                if R::UNCHECKED && bytes[k.clone()] == *b"beat" {
                    self.push_beat(raw, v)?;
                } else {
                    let k = decode_str(raw.text(k)?)?;
                    if k == "beat" {
                        self.push_beat(raw, v)?;
                    } else {
                        self.pairs.push((k, decode_str(raw.text(v)?)?));
                    }
                }
            }
            start = end + 1;
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
    s.trim_matches(|c: char| c <= ' ')
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
