//! Hand-written JSON text for hot paths, and lenient scalar readers.
//!
//! The beat replies, the service list and the push envelope are written here byte by
//! byte (no serde, no `format!`), because they are produced hundreds of thousands of
//! times a second. The readers accept a scalar the way Jackson coerces it (a number
//! where a string is expected and the other way round), since Nacos clients differ in
//! what they quote.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

/// Appends `n` in decimal.
pub(crate) fn write_u64(out: &mut Vec<u8>, n: u64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(n).as_bytes());
}

/// Appends `s` as a quoted JSON string. `s` must be UTF-8; bytes >= 0x80 are copied.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    write_escaped(out, s);
    out.push(b'"');
}

/// Appends the JSON-escaped content of `s`, without quotes.
pub(crate) fn write_escaped(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => &[],
            _ => continue,
        };
        out.extend_from_slice(&s[start..i]);
        if esc.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0xf)]);
        } else {
            out.extend_from_slice(esc);
        }
        start = i + 1;
    }
    out.extend_from_slice(&s[start..]);
}

/// Formats an `f64` the way Jackson writes a Java `double` for the values we emit
/// (`1.0`, `0.5`): through serde_json, which always keeps a fractional part.
pub(crate) fn f64_text(v: f64) -> String {
    match serde_json::Number::from_f64(v) {
        Some(n) => n.to_string(),
        None => "null".to_owned(),
    }
}

/// Deserializes a `u64` from a JSON number, an integral float, or a string of digits.
pub(crate) fn lenient_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a non-negative integer or a string of digits")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom("negative integer"))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
            // Clients that hold the sequence as a double (JavaScript) may print `1e3`.
            if v.fract() == 0.0 && (0.0..1.8e19).contains(&v) {
                Ok(v as u64)
            } else {
                Err(E::custom("not an integer"))
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom("string is not an integer"))
        }
    }
    d.deserialize_any(V)
}

/// A JSON scalar as a Jackson `String` field would accept it.
pub(crate) enum Scalar {
    /// A string, or a number/bool rendered as text.
    Text(String),
    /// JSON `null`.
    Null,
}

impl<'de> serde::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number, boolean or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Text(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Text(if v { "true" } else { "false" }.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Text(f64_text(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
        }
        d.deserialize_any(V)
    }
}

/// Deserializes an `f64` from a JSON number or a numeric string.
pub(crate) fn lenient_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = f64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a number")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<f64, E> {
            Ok(v)
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<f64, E> {
            Ok(v as f64)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom("string is not a number"))
        }
    }
    d.deserialize_any(V)
}

/// Deserializes an `i64` from a JSON integer or a string of digits.
pub(crate) fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom("integer too large"))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            if v.fract() == 0.0 && v.abs() < 9.0e15 {
                Ok(v as i64)
            } else {
                Err(E::custom("not an integer"))
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
            v.trim()
                .parse()
                .map_err(|_| E::custom("string is not an integer"))
        }
    }
    d.deserialize_any(V)
}

/// Deserializes a `bool` from a JSON boolean or the strings `true`/`false` (any case).
pub(crate) fn lenient_bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a boolean")
        }
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
            Ok(v)
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
            if v.eq_ignore_ascii_case("true") {
                Ok(true)
            } else if v.eq_ignore_ascii_case("false") {
                Ok(false)
            } else {
                Err(E::custom("string is not a boolean"))
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
            Err(E::custom("null is not a boolean"))
        }
    }
    d.deserialize_any(V)
}

/// An `i64` read with [`lenient_i64`]; `Option<LenientI64>` also accepts `null`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LenientI64(pub i64);

impl<'de> serde::Deserialize<'de> for LenientI64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient_i64(d).map(LenientI64)
    }
}

/// An `f64` read with [`lenient_f64`]; `Option<LenientF64>` also accepts `null`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LenientF64(pub f64);

impl<'de> serde::Deserialize<'de> for LenientF64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient_f64(d).map(LenientF64)
    }
}

/// A `bool` read with [`lenient_bool`]; `Option<LenientBool>` also accepts `null`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LenientBool(pub bool);

impl<'de> serde::Deserialize<'de> for LenientBool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lenient_bool(d).map(LenientBool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        let mut out = Vec::new();
        write_str(&mut out, b"a\"b\\c\nd\x01\xc3\xa9");
        assert_eq!(out, b"\"a\\\"b\\\\c\\nd\\u0001\xc3\xa9\"");
        let back: String = serde_json::from_slice(&out).unwrap();
        assert_eq!(back, "a\"b\\c\nd\u{1}é");
    }

    #[test]
    fn writes_numbers() {
        let mut out = Vec::new();
        write_u64(&mut out, 0);
        out.push(b',');
        write_u64(&mut out, u64::MAX);
        assert_eq!(out, b"0,18446744073709551615");
        assert_eq!(f64_text(1.0), "1.0");
        assert_eq!(f64_text(0.5), "0.5");
    }

    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(deserialize_with = "lenient_u64")]
        n: u64,
    }

    #[test]
    fn lenient_u64_accepts_string_and_number() {
        for text in [r#"{"n":42}"#, r#"{"n":"42"}"#, r#"{"n":42.0}"#] {
            let p: Probe = serde_json::from_str(text).unwrap();
            assert_eq!(p.n, 42, "{text}");
        }
        for text in [
            r#"{"n":-1}"#,
            r#"{"n":"x"}"#,
            r#"{"n":1.5}"#,
            r#"{"n":null}"#,
        ] {
            assert!(serde_json::from_str::<Probe>(text).is_err(), "{text}");
        }
    }
}
