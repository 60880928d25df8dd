//! The allocation-free reader of the `beat` JSON's common shape, on the decoded
//! text or in place on the URL-encoded form value.
//!
//! A beat from a known instance needs only the identity fields of its JSON (`ip`,
//! `port`, `cluster`), yet the whole text must still be valid, so that a malformed
//! beat is refused whether or not its instance is known. serde decoding the whole
//! `BeatInfo` (strings, a metadata map, a sort) cost about as much again as the rest
//! of the request; this reader walks the text once, borrows the identity strings and
//! allocates nothing.
//!
//! It reads either the JSON text ([`scan_text`]) or the `beat` value as the form
//! carried it ([`scan_form`]), decoding each `%XX` escape and `+` where it stands:
//! decoding the ~330-byte value into a new string first, then reading that, cost
//! about twice the instructions of the rest of a JSON beat. The two are one reader
//! (`Cursor<FORM>`): a form value is read as the byte stream its decoding would
//! give, so what the form reader accepts is what the text reader accepts on the
//! decoded text. In a form value, a known key spelt as clients spell it
//! (`%22ip%22%3A`) is matched whole, where the general way would scan it as a
//! string and look its name up: ten keys a beat, each read the same either way.
//!
//! It is a *fast path*, not a second parser with its own opinions: it accepts only
//! the shape every client sends (a flat object; strings without `\` escapes; plain
//! unsigned numbers; `true`/`false`/`null`; a metadata object of string values) and
//! only when every value is also valid. Anything else (an escape, an exponent, a
//! quoted number, a nested value, a duplicate field, an invalid value; in a form
//! value also a malformed `%`, a byte outside ASCII, a key or token spelt with
//! escapes) answers `None`, and the caller decodes and uses serde, whose verdict
//! and error message stand. So the rule to keep is one-way: whatever this accepts,
//! decoding and serde accept with the same identity (`fuzz/fuzz_targets/beat_json.rs`
//! and the tests check exactly that).

use std::borrow::Cow;

use super::BeatIdentity;
use crate::naming::{normalize_cluster, validate_ip, ParseLimits, DEFAULT_CLUSTER};
use crate::params::{escape_at, percent_decode};

/// What the reader found: the identity, and the counts that [`ParseLimits`]
/// bound. The reader runs where no limits are known (inside `Params`, for a
/// form value); [`Scan::fits`] applies them after.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan<'t> {
    pub(super) identity: BeatIdentity<'t>,
    /// String entries of `metadata`, duplicates included.
    metadata_entries: usize,
}

impl Scan<'_> {
    /// Whether serde, given the same text (of `len` decoded bytes at most),
    /// stays within `limits`; when not, serde must decide (and give the error).
    pub(super) fn fits(&self, len: usize, limits: &ParseLimits) -> bool {
        len <= limits.max_beat_bytes
            && self.metadata_entries <= limits.max_metadata_entries
            && self
                .identity
                .cluster
                .as_ref()
                .is_none_or(|c| c.len() <= limits.max_name_len)
    }
}

/// Reads the JSON text of a beat. `None`: not the common shape, or not valid.
pub(super) fn scan_text(text: &str) -> Option<Scan<'_>> {
    scan::<false>(text.as_bytes())
}

/// Reads a `beat` form value as sent (`%XX` escapes, `+` for a space), without
/// decoding it first. `None`: not the common shape, not valid, or not decodable.
/// `Some` promises that the value decodes (`percent_decode`) to a text that
/// [`scan_text`] reads the same: a valid, ASCII-only JSON object; so the value
/// itself is ASCII, and needs no UTF-8 check of its own.
pub(super) fn scan_form(raw: &[u8]) -> Option<Scan<'_>> {
    scan::<true>(raw)
}

/// A scalar token, as far as the fast path reads it.
#[derive(Clone, Copy)]
enum Scalar<'t> {
    /// A string without backslash escapes.
    Str(Text<'t>),
    /// An unsigned integer of at most 18 digits.
    Int(i64),
    /// An unsigned number with a fraction and at most 15 significant digits:
    /// its integer part, and whether the fraction is all zeros.
    Frac {
        int: i64,
        zero_fraction: bool,
    },
    Bool,
    Null,
}

/// The content of a string token as it stands in the input.
#[derive(Clone, Copy)]
struct Text<'t> {
    raw: &'t [u8],
    /// Whether `raw` holds a form escape (`%XX` or `+`): it is not its own
    /// decoding. Never set when reading decoded text.
    escaped: bool,
}

impl<'t> Text<'t> {
    /// The decoded content: borrowed unless it held an escape. Only identity
    /// strings are wanted as text: a few bytes to check as UTF-8, not the
    /// whole value.
    fn value(self) -> Option<Cow<'t, str>> {
        if self.escaped {
            // The reader checked every escape and that each decodes to ASCII.
            percent_decode(self.raw).ok()
        } else {
            std::str::from_utf8(self.raw).ok().map(Cow::Borrowed)
        }
    }
}

/// How a string's content bytes are read (see [`Cursor::string`]).
const PLAIN: u8 = 0;
const QUOTE: u8 = 1;
const PERCENT: u8 = 2;
const PLUS: u8 = 3;
/// A control character or `\` (serde's to judge), or, in a form value, a byte
/// outside ASCII (the form reader guarantees an ASCII decoding).
const STOP: u8 = 4;

const fn classes(form: bool) -> [u8; 256] {
    let mut t = [PLAIN; 256];
    let mut i = 0;
    while i < 256 {
        if i < 0x20 || i == b'\\' as usize || (form && i >= 0x80) {
            t[i] = STOP;
        }
        i += 1;
    }
    t[b'"' as usize] = QUOTE;
    if form {
        t[b'%' as usize] = PERCENT;
        t[b'+' as usize] = PLUS;
    }
    t
}

const TEXT_CLASSES: [u8; 256] = classes(false);
const FORM_CLASSES: [u8; 256] = classes(true);

/// Flags (the high bit of a byte) the bytes of `word` (first byte lowest)
/// that are not [`PLAIN`] in a string: the lowest flag is the first such
/// byte. The "has a zero byte" test on `word` XOR each needle, and "has a
/// byte below 0x20" on `word`: each may flag false bytes only above a true
/// one (a borrow runs upwards from a true byte), and only the lowest flag is
/// read.
#[inline(always)]
fn not_plain<const FORM: bool>(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let is = |needle: u8| zero_bytes(word ^ (ONES * u64::from(needle)));
    let control = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let flags = control | is(b'"') | is(b'\\');
    if FORM {
        flags | (word & HIGHS) | is(b'%') | is(b'+')
    } else {
        flags
    }
}

/// A position in the input. With `FORM`, the input is a form value and every
/// read decodes what it reads; without, it is the JSON text itself.
struct Cursor<'t, const FORM: bool> {
    bytes: &'t [u8],
    at: usize,
    /// Input bytes of the token [`Cursor::next_token`] last returned (3 for
    /// an escape).
    len: usize,
}

impl<'t, const FORM: bool> Cursor<'t, FORM> {
    /// The decoded byte at `at` and how many input bytes encode it.
    #[inline(always)]
    fn decoded(&self, at: usize) -> Option<(u8, usize)> {
        let bytes = self.bytes;
        let b = *bytes.get(at)?;
        if FORM {
            match b {
                b'%' => return Some((escape_at(bytes, at)?, 3)),
                b'+' => return Some((b' ', 1)),
                _ => {}
            }
        }
        Some((b, 1))
    }

    /// Skips JSON whitespace and returns the next (decoded) byte, if any,
    /// without consuming it ([`Cursor::bump`] does).
    #[inline(always)]
    fn next_token(&mut self) -> Option<u8> {
        loop {
            let (b, len) = self.decoded(self.at)?;
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                self.len = len;
                return Some(b);
            }
            self.at += len;
        }
    }

    /// Consumes the token `next_token` returned.
    #[inline(always)]
    fn bump(&mut self) {
        self.at += self.len;
    }

    /// In a form value, consumes `byte` if it is next, spelt as clients
    /// spell it (`%XX`, upper case, no whitespace before it). Every `"`, `:`,
    /// `,` and brace of a form value is such an escape: this is the common
    /// case of [`Cursor::next_token`] at a fraction of its cost. `false`
    /// (and nothing consumed) otherwise, and the caller reads the general way.
    #[inline(always)]
    fn skip_escaped(&mut self, byte: u8) -> bool {
        const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
        // Byte by byte, not a comparison with a 3-byte array: `byte` is a
        // constant at every call, so each test is against an immediate (the
        // array was built on the stack at each of ~40 calls a beat).
        let (hi, lo) = (
            DIGITS[usize::from(byte >> 4)],
            DIGITS[usize::from(byte & 0xf)],
        );
        let hit = FORM
            && matches!(self.bytes.get(self.at..self.at + 3),
                Some(&[b'%', h, l]) if h == hi && l == lo);
        if hit {
            self.at += 3;
        }
        hit
    }

    /// In a form value, a known key as clients spell it, with its colon:
    /// `%22`, the name, `%22%3A`, after at most one `+` (Python's `, `).
    /// Consumed, and the key's index returned; `None`, with nothing
    /// consumed, for anything else, which the caller reads the general way.
    /// On these bytes the general way reads the same (whitespace, a quote,
    /// a plain name, a quote, a colon); this is one comparison of a constant
    /// where that was a string scan, a match on the name and the colon, for
    /// each of a beat's ten keys.
    #[inline(always)]
    fn known_key(&mut self) -> Option<usize> {
        if !FORM {
            return None;
        }
        let at = self.at + usize::from(self.bytes.get(self.at) == Some(&b'+'));
        let rest = self.bytes.get(at..)?;
        let [_, _, _, first, second, ..] = rest else {
            return None;
        };
        let (field, len) = match (first, second) {
            (b'i', b'p') => spelt(rest, b"%22ip%22%3A", IP),
            (b'p', b'o') => spelt(rest, b"%22port%22%3A", PORT),
            (b'c', b'l') => spelt(rest, b"%22cluster%22%3A", CLUSTER),
            (b's', b'e') => spelt(rest, b"%22serviceName%22%3A", SERVICE_NAME),
            (b'w', b'e') => spelt(rest, b"%22weight%22%3A", WEIGHT),
            (b'e', b'p') => spelt(rest, b"%22ephemeral%22%3A", EPHEMERAL),
            (b'm', b'e') => spelt(rest, b"%22metadata%22%3A", METADATA),
            (b's', b'c') => spelt(rest, b"%22scheduled%22%3A", SCHEDULED),
            (b'p', b'e') => spelt(rest, b"%22period%22%3A", PERIOD),
            (b's', b't') => spelt(rest, b"%22stopped%22%3A", STOPPED),
            _ => None,
        }?;
        self.at = at + len;
        Some(field)
    }

    /// Consumes `byte` after optional whitespace.
    #[inline(always)]
    fn eat(&mut self, byte: u8) -> Option<()> {
        if self.skip_escaped(byte) {
            return Some(());
        }
        (self.next_token()? == byte).then(|| self.bump())
    }

    /// Consumes the `"` that opens a string, after optional whitespace.
    #[inline(always)]
    fn open_quote(&mut self) -> Option<()> {
        self.eat(b'"')
    }

    /// Consumes a `}` if it is next (an object just opened is empty).
    #[inline(always)]
    fn close_now(&mut self) -> Option<bool> {
        if self.skip_escaped(b'}') {
            return Some(true);
        }
        let close = self.next_token()? == b'}';
        if close {
            self.bump();
        }
        Some(close)
    }

    /// After a member: `Some(true)` for a `,` (another follows), `Some(false)`
    /// for the `}` that closes the object, both consumed.
    #[inline(always)]
    fn comma_or_close(&mut self) -> Option<bool> {
        if self.skip_escaped(b',') {
            return Some(true);
        }
        if self.skip_escaped(b'}') {
            return Some(false);
        }
        let more = match self.next_token()? {
            b',' => true,
            b'}' => false,
            _ => return None,
        };
        self.bump();
        Some(more)
    }

    /// A string without backslash escapes or control characters; its opening
    /// `"` is consumed.
    #[inline(always)]
    fn string(&mut self) -> Option<Text<'t>> {
        let bytes = self.bytes;
        let classes = if FORM { &FORM_CLASSES } else { &TEXT_CLASSES };
        let start = self.at;
        let mut end = start;
        let mut escaped = false;
        loop {
            // Eight bytes at a time to the next byte that is not plain, then
            // that byte by its class. A beat's strings are short, shorter than
            // `memchr`'s set-up pays for, and there are up to six kinds of
            // byte to stop at; a table lookup per byte cost ~9 instructions
            // per byte, most of a JSON beat's reading.
            if let Some(chunk) = bytes.get(end..end + 8) {
                let word = u64::from_le_bytes(chunk.try_into().expect("a slice of 8 bytes"));
                let flags = not_plain::<FORM>(word);
                if flags == 0 {
                    end += 8;
                    continue;
                }
                end += (flags.trailing_zeros() / 8) as usize;
            }
            let b = *bytes.get(end)?;
            match classes[usize::from(b)] {
                PLAIN => end += 1,
                QUOTE => {
                    self.at = end + 1;
                    break;
                }
                PERCENT => {
                    let d = escape_at(bytes, end)?;
                    if d == b'"' {
                        self.at = end + 3;
                        break;
                    }
                    if d < 0x20 || d == b'\\' || d >= 0x80 {
                        return None;
                    }
                    escaped = true;
                    end += 3;
                }
                PLUS => {
                    escaped = true;
                    end += 1;
                }
                _ => return None,
            }
        }
        Some(Text {
            raw: &bytes[start..end],
            escaped,
        })
    }

    /// A literal such as `true`, spelt without escapes. Inlined with its
    /// length known: as a call, the comparison was a `memcmp`.
    #[inline(always)]
    fn literal<const N: usize>(&mut self, word: &[u8; N], value: Scalar<'t>) -> Option<Scalar<'t>> {
        self.bytes[self.at..].starts_with(word).then(|| {
            self.at += N;
            value
        })
    }

    /// An unsigned number in JSON's grammar without an exponent,
    /// `(0|[1-9][0-9]*)(\.[0-9]+)?`, spelt without escapes. A digit or `.`
    /// spelt as an escape ends the number here, and the caller then finds no
    /// `,` or `}` after it: the reader gives up, never misreads. Inlined into
    /// [`Cursor::scalar`], which is inlined: a beat has three numbers.
    #[inline(always)]
    fn number(&mut self) -> Option<Scalar<'t>> {
        let bytes = self.bytes;
        let start = self.at;
        let mut end = start;
        let mut int = 0i64;
        while let Some(&d) = bytes.get(end).filter(|d| d.is_ascii_digit()) {
            // Wrapping: a value of more than 18 digits is refused below.
            int = int.wrapping_mul(10).wrapping_add(i64::from(d - b'0'));
            end += 1;
        }
        let int_len = end - start;
        if int_len == 0 || int_len > 18 || (int_len > 1 && bytes[start] == b'0') {
            return None;
        }
        let mut zero_fraction = true;
        if bytes.get(end) == Some(&b'.') {
            end += 1;
            let frac_start = end;
            while let Some(&d) = bytes.get(end).filter(|d| d.is_ascii_digit()) {
                zero_fraction &= d == b'0';
                end += 1;
            }
            // Up to 15 significant digits, serde's `significand / 10^k` is
            // exact and correctly rounded: the `f64` is on the same side of
            // any integer bound as the decimal (see `read_field`).
            if end == frac_start || int_len + (end - frac_start) > 15 {
                return None;
            }
        }
        // An exponent is valid JSON, but not this path's to read.
        if matches!(bytes.get(end), Some(b'e' | b'E')) {
            return None;
        }
        let fraction = end > start + int_len;
        self.at = end;
        Some(match fraction {
            false => Scalar::Int(int),
            true => Scalar::Frac { int, zero_fraction },
        })
    }

    /// Inlined, as [`read_field`] is: as calls, each of a beat's ~10 values
    /// moved a 32-byte `Scalar` through memory twice.
    #[inline(always)]
    fn scalar(&mut self) -> Option<Scalar<'t>> {
        if self.skip_escaped(b'"') {
            return self.string().map(Scalar::Str);
        }
        match self.next_token()? {
            b'"' => {
                self.bump();
                self.string().map(Scalar::Str)
            }
            // A token spelt as an escape (`len` 3) is not this path's to read.
            _ if FORM && self.len != 1 => None,
            b't' => self.literal(b"true", Scalar::Bool),
            b'f' => self.literal(b"false", Scalar::Bool),
            b'n' => self.literal(b"null", Scalar::Null),
            b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// The `metadata` value: `null`, or an object whose values are strings or
    /// `null` (serde skips null values). Returns the number of string entries,
    /// duplicates included.
    fn metadata(&mut self) -> Option<usize> {
        if !self.skip_escaped(b'{') {
            match self.next_token()? {
                b'n' if self.len == 1 => return self.literal(b"null", Scalar::Null).map(|_| 0),
                b'{' => self.bump(),
                _ => return None,
            }
        }
        let mut entries = 0;
        if self.close_now()? {
            return Some(0);
        }
        loop {
            self.open_quote()?;
            self.string()?;
            self.eat(b':')?;
            match self.scalar()? {
                Scalar::Str(_) => entries += 1,
                Scalar::Null => {}
                // serde renders numbers and booleans as text: its job.
                _ => return None,
            }
            if !self.comma_or_close()? {
                return Some(entries);
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
fn field_index(key: &[u8]) -> Option<usize> {
    Some(match key {
        b"ip" => IP,
        b"port" => PORT,
        b"cluster" => CLUSTER,
        b"serviceName" => SERVICE_NAME,
        b"weight" => WEIGHT,
        b"ephemeral" => EPHEMERAL,
        b"metadata" => METADATA,
        b"scheduled" => SCHEDULED,
        b"period" => PERIOD,
        b"stopped" => STOPPED,
        _ => return None,
    })
}

/// `(field, N)` when `rest` starts with `spelling`; inlined with `N` known,
/// the comparison is a few word loads, not a `memcmp`.
#[inline(always)]
fn spelt<const N: usize>(rest: &[u8], spelling: &[u8; N], field: usize) -> Option<(usize, usize)> {
    rest.starts_with(spelling).then_some((field, N))
}

/// Reads a beat in the common shape, validating every field as
/// `BeatInfo::parse` does except for the limits (see [`Scan::fits`]).
fn scan<const FORM: bool>(bytes: &[u8]) -> Option<Scan<'_>> {
    let mut c = Cursor::<FORM> {
        bytes,
        at: 0,
        len: 0,
    };
    c.eat(b'{')?;
    let mut seen = 0u16;
    let mut out = Scan::default();
    if !c.close_now()? {
        loop {
            let field = match c.known_key() {
                Some(i) => Some(i),
                None => {
                    c.open_quote()?;
                    let key = c.string()?;
                    // A key spelt with escapes is serde's to read.
                    if key.escaped {
                        return None;
                    }
                    c.eat(b':')?;
                    field_index(key.raw)
                }
            };
            if let Some(i) = field {
                if seen & (1 << i) != 0 {
                    return None;
                }
                seen |= 1 << i;
            }
            match field {
                Some(METADATA) => out.metadata_entries = c.metadata()?,
                Some(i) => read_field(i, c.scalar()?, &mut out.identity)?,
                // An unknown field: any scalar is ignored, as serde ignores it.
                None => {
                    c.scalar()?;
                }
            }
            if !c.comma_or_close()? {
                break;
            }
        }
    }
    // serde refuses trailing characters. `next_token` also answers `None` for
    // an escape that does not decode, which is not the end of the value.
    if c.next_token().is_some() || c.at != c.bytes.len() {
        return None;
    }
    Some(out)
}

/// `validate_ip`'s verdict on an address of digits and dots (`is_dotted_quad`),
/// in one pass; `false` for any other byte, and `validate_ip` judges. The usual
/// beat's address is a dotted quad, and this is a third of `validate_ip`.
fn dotted_quad(ip: &[u8]) -> bool {
    let (mut parts, mut digits, mut value) = (1usize, 0usize, 0u16);
    for &b in ip {
        match b {
            // A part ends: 1-3 digits, at most 255 (leading zeros allowed).
            b'.' if digits > 0 && value <= 255 => {
                parts += 1;
                digits = 0;
                value = 0;
            }
            b'0'..=b'9' if digits < 3 => {
                digits += 1;
                value = value * 10 + u16::from(b - b'0');
            }
            _ => return false,
        }
    }
    parts == 4 && digits > 0 && value <= 255
}

/// Whether `java_trim(s)` is empty: every char is `<= ' '`, so every byte is
/// (any byte of a longer UTF-8 char is above). Stops at the first that is not.
fn blank(s: &str) -> bool {
    s.bytes().all(|b| b <= b' ')
}

/// No bounds: [`Scan::fits`] applies the real ones once they are known.
const UNBOUNDED: ParseLimits = ParseLimits {
    max_name_len: usize::MAX,
    max_metadata_bytes: usize::MAX,
    max_metadata_entries: usize::MAX,
    max_beat_bytes: usize::MAX,
};

/// Checks one known scalar field (by its index) the way `BeatInfo::parse`
/// does and keeps the identity fields; `None` for a type or value serde must
/// judge.
#[inline(always)]
fn read_field<'t>(field: usize, value: Scalar<'t>, out: &mut BeatIdentity<'t>) -> Option<()> {
    match (field, value) {
        (_, Scalar::Null) => {}
        (IP, Scalar::Str(ip)) => {
            let usual = !ip.escaped && dotted_quad(ip.raw);
            let ip = ip.value()?;
            if usual {
                out.ip = Some(ip);
            } else if !blank(&ip) {
                validate_ip(&ip).ok()?;
                out.ip = Some(ip);
            }
        }
        (PORT, Scalar::Int(p)) => out.port = Some(u16::try_from(p).ok()?),
        // The default cluster as clients send it: the same text, without a
        // UTF-8 check of the slice.
        (
            CLUSTER,
            Scalar::Str(Text {
                raw: b"DEFAULT", ..
            }),
        ) => {
            out.cluster = Some(Cow::Borrowed(DEFAULT_CLUSTER));
        }
        (CLUSTER, Scalar::Str(cluster)) => {
            let cluster = cluster.value()?;
            if !blank(&cluster) {
                out.cluster = Some(match cluster {
                    Cow::Borrowed(c) => Cow::Borrowed(normalize_cluster(Some(c), &UNBOUNDED).ok()?),
                    Cow::Owned(c) => {
                        Cow::Owned(normalize_cluster(Some(&c), &UNBOUNDED).ok()?.to_owned())
                    }
                });
            }
        }
        (SERVICE_NAME, Scalar::Str(_)) | (PERIOD, Scalar::Int(_)) => {}
        // `check_weight`'s range, `[0, 10000]`, on the exact value.
        (WEIGHT, Scalar::Int(w)) if w <= 10_000 => {}
        (WEIGHT, Scalar::Frac { int, zero_fraction })
            if int < 10_000 || (int == 10_000 && zero_fraction) => {}
        (EPHEMERAL | SCHEDULED | STOPPED, Scalar::Bool) => {}
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::beat::BeatInfo;
    use crate::params::java_trim;

    fn identity<'t>(text: &'t str, limits: &ParseLimits) -> Option<BeatIdentity<'t>> {
        BeatIdentity::scan(text, limits)
    }

    /// Found by `cargo fuzz run beat_json`: a malformed escape after the
    /// object read as the end of the value, so the form reader took a value
    /// that does not decode.
    #[test]
    fn a_malformed_escape_after_the_object_is_not_its_end() {
        let limits = ParseLimits::default();
        for raw in [
            &b"{\"\":\"88\"}\t%\0\r\"k"[..],
            b"%7B%22ip%22%3A%221.1.1.1%22%7D%",
            b"%7B%7D%2",
            b"{}%zz",
        ] {
            assert!(percent_decode(raw).is_err());
            assert_eq!(BeatIdentity::scan_form(raw, &limits), None, "{raw:?}");
        }
        // Trailing whitespace, plain or escaped, is still the end.
        assert!(BeatIdentity::scan_form(b"%7B%7D%20+\t", &limits).is_some());
    }

    /// The one-way rule: what the fast path accepts, serde accepts with the same
    /// identity. Returns whether the fast path took the text. The form reader
    /// must read every form encoding of `text` exactly as the text reader reads
    /// `text` (these texts are ASCII, with keys that need no escape).
    fn agrees(text: &str) -> bool {
        let limits = ParseLimits::default();
        let fast = identity(text, &limits);
        for raw in form_encodings(text) {
            assert_eq!(
                BeatIdentity::scan_form(raw.as_bytes(), &limits),
                fast,
                "{raw}"
            );
        }
        let slow = BeatInfo::parse(text, &limits);
        let Some(fast) = fast else {
            return false;
        };
        let info = slow.unwrap_or_else(|e| panic!("fast path accepted `{text}`, serde: {e}"));
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref(), "{text}");
        assert_eq!(fast.port, info.port, "{text}");
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref(), "{text}");
        true
    }

    /// `text` as clients put it in a form: every reserved byte escaped (Java's
    /// `URLEncoder`, Python's `quote_plus`: a space as `+`), in lower case, and
    /// left as it is where nothing in it needs an escape.
    fn form_encodings(text: &str) -> Vec<String> {
        let mut upper = String::new();
        crate::params::percent_encode_into(&mut upper, text);
        let plus = upper.replace("%20", "+");
        let lower = upper
            .split('%')
            .enumerate()
            .map(|(i, part)| match i {
                0 => part.to_owned(),
                _ => format!(
                    "%{}{}",
                    part.get(..2).unwrap_or("").to_lowercase(),
                    &part[2.min(part.len())..]
                ),
            })
            .collect();
        let mut all = vec![upper, plus, lower];
        if !text.contains(['%', '+']) {
            all.push(text.to_owned());
        }
        all
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
    fn form_values_are_read_in_place() {
        let limits = ParseLimits::default();
        // Identity strings without escapes are borrowed from the form value.
        let raw = "%7B%22ip%22%3A%2210.0.0.1%22%2C%22port%22%3A9%2C%22cluster%22%3A%22c-1%22%7D";
        let id = BeatIdentity::scan_form(raw.as_bytes(), &limits).unwrap();
        assert!(matches!(id.ip, Some(Cow::Borrowed("10.0.0.1"))));
        assert!(matches!(id.cluster, Some(Cow::Borrowed("c-1"))));
        // With escapes (an IPv6 address, `+` as a space), they are decoded.
        let raw = "%7B+%22ip%22+%3A+%22fe80%3A%3A1%22%2C%22cluster%22%3A%22+None+%22%7D+";
        let id = BeatIdentity::scan_form(raw.as_bytes(), &limits).unwrap();
        assert_eq!(id.ip.as_deref(), Some("fe80::1"));
        assert_eq!(id.cluster.as_deref(), Some("DEFAULT"));
        // Raw JSON bytes are read as themselves.
        let id = BeatIdentity::scan_form(br#"{"ip":"1.2.3.4","metadata":{"a=b":"c"}}"#, &limits);
        assert_eq!(id.unwrap().ip.as_deref(), Some("1.2.3.4"));
    }

    /// The form reader's verdict on `raw` is the text reader's on its
    /// decoding, whenever it takes it.
    fn form_reads_as_decoded(raw: &str) -> Option<BeatIdentity<'_>> {
        let limits = ParseLimits::default();
        let fast = BeatIdentity::scan_form(raw.as_bytes(), &limits);
        if let Some(fast) = &fast {
            let text = percent_decode(raw.as_bytes()).expect("decodes");
            let slow = identity(java_trim(&text), &limits).map(BeatIdentity::into_owned);
            assert_eq!(slow.as_ref(), Some(fast), "{raw}");
        }
        fast
    }

    /// A known key spelt as clients spell it (`%22`, name, `%22%3A`) is
    /// matched whole; every near miss is read the general way, to the same
    /// verdict as decoding first.
    #[test]
    fn known_keys_and_near_misses() {
        for (raw, port) in [
            // Java (Jackson), and Python (`, ` and `: ` as `%2C+` and `%3A+`).
            ("%7B%22port%22%3A80%7D", Some(80)),
            (
                "%7B%22ip%22%3A+%221.2.3.4%22%2C+%22port%22%3A+81%7D",
                Some(81),
            ),
            // Not the usual spelling: the general way reads them.
            ("%7B%22port%22%3a82%7D", Some(82)),
            ("%7B%22port%22+%3A83%7D", Some(83)),
            ("%7B++%22port%22%3A84%7D", Some(84)),
            ("%7B%20%22port%22%3A85%7D", Some(85)),
            ("%7B\"port\":86%7D", Some(86)),
            ("%7B%22port\"%3A87%7D", Some(87)),
            // An unknown key that a known one begins, or begins with one.
            ("%7B%22portx%22%3A1%2C%22port%22%3A88%7D", Some(88)),
            ("%7B%22por%22%3A1%2C%22port%22%3A89%7D", Some(89)),
            ("%7B%22ipx%22%3A%22a%20b%22%2C%22port%22%3A90%7D", Some(90)),
        ] {
            let id = form_reads_as_decoded(raw).unwrap_or_else(|| panic!("declined {raw}"));
            assert_eq!(id.port, port, "{raw}");
        }
        for raw in [
            // Duplicates are refused however each is spelt.
            "%7B%22port%22%3A1%2C%22port%22%3A2%7D",
            "%7B%22port%22%3A1%2C%22port%22%3a2%7D",
            "%7B%22port%22%3a1%2C%22port%22%3A2%7D",
            // A key cut short, or the value missing.
            "%7B%22port%22%3A",
            "%7B%22port%22%3",
            "%7B%22port%22",
            "%7B%22po",
            "%7B%22port%22%3A%7D",
            // A known key with the wrong type of value.
            "%7B%22port%22%3A%2280%22%7D",
            "%7B%22ip%22%3A1%7D",
        ] {
            assert_eq!(form_reads_as_decoded(raw), None, "{raw}");
        }
        // Every known key, spelt as clients spell it, with its usual value.
        let all = "%7B%22ip%22%3A%2210.0.0.1%22%2C%22port%22%3A1%2C%22cluster%22%3A%22c%22%2C\
            %22serviceName%22%3A%22s%22%2C%22weight%22%3A1.0%2C%22ephemeral%22%3Atrue%2C\
            %22metadata%22%3A%7B%7D%2C%22scheduled%22%3Afalse%2C%22period%22%3A5000%2C\
            %22stopped%22%3Afalse%7D";
        let id = form_reads_as_decoded(all).expect("taken");
        assert_eq!(
            (id.ip.as_deref(), id.port, id.cluster.as_deref()),
            (Some("10.0.0.1"), Some(1), Some("c"))
        );
    }

    /// `dotted_quad` is `validate_ip`'s verdict wherever it says yes, and on
    /// every text of digits and dots.
    #[test]
    fn dotted_quads_as_validate_ip_judges_them() {
        for ip in [
            "1.2.3.4",
            "0.0.0.0",
            "255.255.255.255",
            "001.02.3.000",
            "256.1.1.1",
            "1.1.1.256",
            "1.1.1.2555",
            "1000.1.1.1",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            ".1.2.3",
            "1.2.3.",
            "",
            "....",
            "1.2.3.4a",
            "fe80::1",
            " 1.2.3.4",
        ] {
            let valid = validate_ip(ip).is_ok();
            assert!(!dotted_quad(ip.as_bytes()) || valid, "{ip}");
            if ip.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
                assert_eq!(dotted_quad(ip.as_bytes()), valid, "{ip}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn dotted_quad_agrees_with_validate_ip(ip in "[0-9.]{0,16}|[0-9]{1,3}(\\.[0-9]{1,3}){3}") {
            let valid = validate_ip(&ip).is_ok();
            proptest::prop_assert_eq!(dotted_quad(ip.as_bytes()), valid, "{}", ip);
        }
    }

    #[test]
    fn form_values_the_reader_declines() {
        let limits = ParseLimits::default();
        for raw in [
            // Not decodable: decoding gives the error.
            "%7B%22ip%22%3A%221.1.1.1%22%7",
            "%7B%22ip%22%3A%221.1.1.1%22%7G",
            "%7B%22k%22%3A%22%zz%22%7D",
            "%7B%22k%22%3A%22%FF%22%7D",
            // Decodable, but not ASCII: serde reads it.
            "%7B%22k%22%3A%22%C3%A9%22%7D",
            "%7B%22k%22%3A%22é%22%7D",
            // Keys, literals and numbers spelt with escapes.
            "%7B%22%69p%22%3A%221.1.1.1%22%7D",
            "%7B%22port%22%3A%38%7D",
            "%7B%22port%22%3A8%30%7D",
            "%7B%22port%22%3A8%2E0%7D",
            "%7B%22stopped%22%3A%74rue%7D",
            "%7B%22metadata%22%3A%6Eull%7D",
            // An escaped backslash or control character in a string.
            "%7B%22k%22%3A%22a%5Cnb%22%7D",
            "%7B%22k%22%3A%22a%0Ab%22%7D",
            // Trailing bytes after the object, decoded.
            "%7B%7D%2C",
            "%7B%7D%00",
        ] {
            assert_eq!(
                BeatIdentity::scan_form(raw.as_bytes(), &limits),
                None,
                "{raw}"
            );
        }
    }

    /// A valid beat JSON, each byte escaped or not at random (as the form
    /// allows), then, in half the cases, mangled a little: whatever the form
    /// reader accepts must decode to a text that serde accepts with the same
    /// identity, and every usual spelling must be accepted.
    fn form_value() -> impl proptest::strategy::Strategy<Value = (String, bool)> {
        use proptest::prelude::*;
        let texts = prop::sample::select(vec![
            r#"{"port":8080,"ip":"10.0.0.1","weight":1.0,"serviceName":"G@@s","cluster":"c","metadata":{"k":"v+%"},"stopped":false}"#,
            r#"{"ip": "fe80::1", "port": 80, "cluster": "None", "metadata": {}, "weight": 10000.00}"#,
            r#"{"ip":" ","cluster":"","period":12,"x":null,"metadata":null}"#,
        ]);
        let edits = prop::option::weighted(
            0.5,
            prop::collection::vec(
                (
                    any::<prop::sample::Index>(),
                    prop::sample::select(b"%+\"0aFz\x7f\xe9 &=".to_vec()),
                ),
                1..4,
            ),
        );
        // In a fifth of the cases, letters and digits (and the `.` of a
        // number) may be spelt as escapes too: no client does that, and the
        // reader declines it.
        let odd = prop::bool::weighted(0.2);
        (texts, prop::collection::vec(any::<u8>(), 200), edits, odd).prop_map(
            |(text, coins, edits, odd)| {
                let mut unusual = edits.is_some();
                let mut raw = Vec::new();
                let mut in_string = false;
                for (b, coin) in text.bytes().zip(coins.into_iter().cycle()) {
                    let escape = |raw: &mut Vec<u8>, lower: bool| match lower {
                        true => raw.extend_from_slice(format!("%{b:02x}").as_bytes()),
                        false => raw.extend_from_slice(format!("%{b:02X}").as_bytes()),
                    };
                    // A byte of a key, literal or number (these texts have no
                    // `\` escapes, so each `"` opens or closes a string).
                    let token = b.is_ascii_alphanumeric() || (b == b'.' && !in_string);
                    in_string ^= b == b'"';
                    match (b, coin % 8) {
                        (b' ', 0) => raw.push(b'+'),
                        (b'%' | b'+', c) => escape(&mut raw, c == 1),
                        (_, 7) if token && odd => {
                            unusual = true;
                            escape(&mut raw, false);
                        }
                        (_, 1..=4) if !token => escape(&mut raw, coin % 8 == 1),
                        _ => raw.push(b),
                    }
                }
                for (at, b) in edits.into_iter().flatten() {
                    let i = at.index(raw.len());
                    raw[i] = b;
                }
                (String::from_utf8_lossy(&raw).into_owned(), unusual)
            },
        )
    }

    proptest::proptest! {
        #[test]
        fn the_form_reader_agrees_with_decoding_and_serde((raw, unusual) in form_value()) {
            let limits = ParseLimits::default();
            let taken = BeatIdentity::scan_form(raw.as_bytes(), &limits);
            // Each text is a valid beat, and every usual encoding of it is read.
            proptest::prop_assert!(unusual || taken.is_some(), "declined `{}`", raw);
            if let Some(fast) = taken {
                let text = crate::params::percent_decode(raw.as_bytes())
                    .unwrap_or_else(|e| panic!("form reader took `{raw}`, decoding: {e}"));
                let text = java_trim(&text);
                proptest::prop_assert_eq!(Some(fast.clone()), identity(text, &limits));
                let info = BeatInfo::parse(text, &limits)
                    .unwrap_or_else(|e| panic!("form reader took `{raw}`, serde: {e}"));
                proptest::prop_assert_eq!(fast.ip.as_deref(), info.ip.as_deref());
                proptest::prop_assert_eq!(fast.port, info.port);
                proptest::prop_assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref());
            }
        }
    }

    #[test]
    fn field_indexes_name_the_fields() {
        for (i, name) in FIELDS.iter().enumerate() {
            assert_eq!(field_index(name.as_bytes()), Some(i));
        }
        assert_eq!(field_index(b"Ip"), None);
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
        // Cut inside escapes and key spellings too.
        for raw in form_encodings(text) {
            for end in 0..=raw.len() {
                form_reads_as_decoded(&raw[..end]);
                form_reads_as_decoded(&raw[end..]);
            }
        }
    }
}
