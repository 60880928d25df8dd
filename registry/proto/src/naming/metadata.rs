//! Instance and service metadata: the `metadata` parameter and its JSON form.
//!
//! Nacos (`UtilsAndCommons.parseMetadata`) first reads the text as a JSON object of
//! strings (Jackson turns numbers and booleans into their text), and when that fails
//! reads it as `k=v,k=v` with Java `split` semantics: every item needs exactly one `=`
//! and a non-empty value after Java drops trailing empty parts. Anything else is
//! `metadata format incorrect:<input>`. A JSON `null` value has no string form here;
//! such entries are skipped.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;

use super::ParseLimits;
use crate::error::ProtoError;
use crate::json::Scalar;

/// Metadata entries sorted by key, keys unique (a later duplicate replaces an earlier
/// one, as `HashMap::put` does). Serializes as a JSON object of strings; deserializes
/// leniently (scalar values become their text, `null` values are skipped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Metadata(Vec<(String, String)>);

impl Metadata {
    /// No entries.
    pub fn new() -> Self {
        Metadata(Vec::new())
    }

    /// Builds from pairs in arrival order; the last value of a duplicate key wins.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut v: Vec<(String, String)> = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // Stable sort keeps arrival order among equal keys, so the last one is kept.
        v.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => out.push((k, val)),
            }
        }
        Metadata(out)
    }

    /// Parses a `metadata` parameter (JSON object or `k=v,k=v`); blank gives empty.
    pub fn parse(input: &str, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let input = crate::params::java_trim(input);
        if input.is_empty() {
            return Ok(Metadata::new());
        }
        if input.len() > limits.max_metadata_bytes {
            return Err(ProtoError::TooLong {
                param: "metadata",
                len: input.len(),
                max: limits.max_metadata_bytes,
            });
        }
        let pairs = match serde_json::from_str::<Pairs>(input) {
            Ok(Pairs(p)) => p,
            Err(_) => parse_kv(input)?,
        };
        if pairs.len() > limits.max_metadata_entries {
            return Err(ProtoError::MetadataEntries {
                len: pairs.len(),
                max: limits.max_metadata_entries,
            });
        }
        Ok(Metadata::from_pairs(pairs))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.0[i].1.as_str())
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The entries as a sorted slice.
    pub fn as_slice(&self) -> &[(String, String)] {
        &self.0
    }

    /// The entries as a sorted vector.
    pub fn into_vec(self) -> Vec<(String, String)> {
        self.0
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The JSON object text, as clients send it in `metadata` and `beat`.
    pub fn to_json(&self) -> String {
        // Serializing strings into a String cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// `k=v,k=v` with Java `String.split` semantics.
fn parse_kv(input: &str) -> Result<Vec<(String, String)>, ProtoError> {
    let incorrect = || ProtoError::MetadataFormat(input.into());
    let mut pairs = Vec::new();
    for item in java_split(input, ',') {
        let kv = java_split(item, '=');
        if kv.len() != 2 {
            return Err(incorrect());
        }
        pairs.push((kv[0].to_owned(), kv[1].to_owned()));
    }
    Ok(pairs)
}

/// Java's `String.split` for a one-char literal: no occurrence gives `[s]`; otherwise
/// all parts with trailing empty parts removed.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    if !s.contains(sep) {
        return vec![s];
    }
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// A JSON object read leniently into pairs (the shape Jackson's `Map<String,String>`
/// accepts).
struct Pairs(Vec<(String, String)>);

impl<'de> serde::Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(4).min(64));
                while let Some((k, v)) = map.next_entry::<String, Scalar>()? {
                    if let Scalar::Text(v) = v {
                        out.push((k, v));
                    }
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl serde::Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> serde::Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Pairs::deserialize(d).map(|Pairs(p)| Metadata::from_pairs(p))
    }
}

/// Serializes any slice of string pairs as a JSON object, for response views built
/// from the server's own metadata storage without copying it into [`Metadata`].
#[derive(Debug, Clone, Copy)]
pub struct MetadataPairs<'a, K, V>(pub &'a [(K, V)]);

impl<K: AsRef<str>, V: AsRef<str>> serde::Serialize for MetadataPairs<'_, K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k.as_ref(), v.as_ref())?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Metadata, ProtoError> {
        Metadata::parse(s, &ParseLimits::default())
    }

    #[test]
    fn json_with_spaces_and_scalars() {
        let m = parse(r#"{"k": "v", "n": 1, "f": 1.5, "b": true, "z": null}"#).unwrap();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            [("b", "true"), ("f", "1.5"), ("k", "v"), ("n", "1")]
        );
        assert_eq!(m.get("k"), Some("v"));
        assert_eq!(m.get("z"), None);
    }

    #[test]
    fn kv_form_with_java_split_rules() {
        let m = parse("a=1,b=2,a=3").unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "3"), ("b", "2")]);
        assert_eq!(
            parse("a=1,").unwrap().len(),
            1,
            "trailing empty item dropped"
        );
        assert_eq!(
            parse("a=b=").unwrap().get("a"),
            Some("b"),
            "trailing empty part dropped"
        );
        assert_eq!(parse("=v").unwrap().get(""), Some("v"));
        for bad in ["a", "a=", "a=b=c", ",a=1", "=", r#"{"a":{"b":"c"}}"#, "[1]"] {
            assert_eq!(
                parse(bad).unwrap_err().to_string(),
                format!("metadata format incorrect:{bad}"),
                "{bad}"
            );
        }
        assert_eq!(
            parse("{a=b}").unwrap().get("{a"),
            Some("b}"),
            "not JSON, so k=v"
        );
        assert!(parse("  ").unwrap().is_empty());
    }

    #[test]
    fn bounded() {
        let limits = ParseLimits {
            max_metadata_bytes: 20,
            max_metadata_entries: 2,
            ..ParseLimits::default()
        };
        assert!(matches!(
            Metadata::parse(&"a=b,".repeat(10), &limits),
            Err(ProtoError::TooLong {
                param: "metadata",
                ..
            })
        ));
        assert_eq!(
            Metadata::parse("a=1,b=2,c=3", &limits),
            Err(ProtoError::MetadataEntries { len: 3, max: 2 })
        );
    }

    #[test]
    fn json_round_trip() {
        let m = Metadata::from_pairs([("x", "1\"2"), ("a", "")]);
        let json = m.to_json();
        assert_eq!(json, r#"{"a":"","x":"1\"2"}"#);
        assert_eq!(parse(&json).unwrap(), m);
        assert_eq!(serde_json::from_str::<Metadata>(&json).unwrap(), m);
    }
}
