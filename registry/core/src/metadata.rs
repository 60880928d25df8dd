//! Compact, immutable string maps for instance and service metadata.
//!
//! A registry at Nacos's published scale holds over a million instances, most of
//! them carrying the same few metadata entries (`version`, `zone`, ...). A
//! `HashMap<String, String>` per instance would cost several hundred bytes and
//! seven allocations each, which alone breaks the footprint budget. A
//! [`Metadata`] is instead one [`SharedStr`](crate::shared_str::SharedStr)
//! (8 bytes) holding the sorted entries separated by NUL bytes; identical
//! maps are shared through the shard's [`Interner`](crate::intern::Interner),
//! so the common case costs one pointer.

use std::fmt;

use crate::error::RegistryError;
use crate::shared_str::SharedStr;

/// Separator between keys and values inside the encoded buffer. NUL never
/// appears in a valid entry: construction rejects it.
const SEP: char = '\0';

/// An immutable, sorted string map. Cloning is a reference-count increment;
/// the empty map allocates nothing.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Metadata(Option<SharedStr>);

impl Metadata {
    /// The empty map.
    pub const fn empty() -> Self {
        Metadata(None)
    }

    /// Builds a map from `(key, value)` pairs. Later duplicates win, as in a
    /// Java `HashMap.put` sequence.
    ///
    /// # Errors
    /// [`RegistryError::InvalidMetadata`] if a key or value contains a NUL
    /// byte, or a key is empty.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Result<Self, RegistryError>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut entries: Vec<(K, V)> = pairs.into_iter().collect();
        for (k, v) in &entries {
            if k.as_ref().is_empty() || k.as_ref().contains(SEP) || v.as_ref().contains(SEP) {
                return Err(RegistryError::InvalidMetadata);
            }
        }
        // Stable sort keeps insertion order among equal keys, so keeping the
        // last of each run implements "later duplicates win".
        entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut buf = String::new();
        let mut i = 0;
        while i < entries.len() {
            let mut j = i;
            while j + 1 < entries.len() && entries[j + 1].0.as_ref() == entries[i].0.as_ref() {
                j += 1;
            }
            if !buf.is_empty() {
                buf.push(SEP);
            }
            buf.push_str(entries[j].0.as_ref());
            buf.push(SEP);
            buf.push_str(entries[j].1.as_ref());
            i = j + 1;
        }
        Ok(Self::from_encoded(buf))
    }

    fn from_encoded(buf: String) -> Self {
        if buf.is_empty() {
            Metadata(None)
        } else {
            Metadata(Some(SharedStr::from(buf)))
        }
    }

    /// The encoded form, used as the interning key.
    pub(crate) fn encoded(&self) -> &str {
        self.0.as_deref().unwrap_or("")
    }

    pub(crate) fn from_shared(buf: SharedStr) -> Self {
        Metadata(Some(buf))
    }

    pub(crate) fn shared(&self) -> Option<&SharedStr> {
        self.0.as_ref()
    }

    /// True when the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// The value for `key`, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Entries in key order.
    pub fn iter(&self) -> MetadataIter<'_> {
        MetadataIter {
            parts: self.0.as_deref().map(|s| s.split(SEP)),
        }
    }

    /// Bytes of string data held (keys and values), for size limits.
    pub fn byte_len(&self) -> usize {
        self.0.as_ref().map_or(0, |s| s.len())
    }

    /// Returns a copy with the entries of `other` applied on top.
    pub fn merged(&self, other: &Metadata) -> Result<Metadata, RegistryError> {
        Metadata::from_pairs(self.iter().chain(other.iter()))
    }
}

/// Iterator over the `(key, value)` entries of a [`Metadata`], in key order.
pub struct MetadataIter<'a> {
    parts: Option<std::str::Split<'a, char>>,
}

impl<'a> Iterator for MetadataIter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        let parts = self.parts.as_mut()?;
        let k = parts.next()?;
        let v = parts.next()?;
        Some((k, v))
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_and_last_duplicate_wins() {
        let m = Metadata::from_pairs([("b", "2"), ("a", "1"), ("b", "3")]).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("a", "1"), ("b", "3")]);
        assert_eq!(m.get("b"), Some("3"));
        assert_eq!(m.get("c"), None);
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn empty_values_survive_encoding() {
        let m = Metadata::from_pairs([("a", ""), ("b", "")]).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![("a", ""), ("b", "")]);
    }

    #[test]
    fn empty_map_allocates_nothing() {
        let m = Metadata::from_pairs(Vec::<(&str, &str)>::new()).unwrap();
        assert!(m.is_empty());
        assert_eq!(m, Metadata::empty());
        assert_eq!(m.iter().count(), 0);
    }

    #[test]
    fn rejects_nul_and_empty_key() {
        assert_eq!(
            Metadata::from_pairs([("a\0", "1")]),
            Err(RegistryError::InvalidMetadata)
        );
        assert_eq!(
            Metadata::from_pairs([("a", "1\0")]),
            Err(RegistryError::InvalidMetadata)
        );
        assert_eq!(
            Metadata::from_pairs([("", "1")]),
            Err(RegistryError::InvalidMetadata)
        );
    }

    #[test]
    fn merged_overrides() {
        let a = Metadata::from_pairs([("a", "1"), ("b", "2")]).unwrap();
        let b = Metadata::from_pairs([("b", "9"), ("c", "3")]).unwrap();
        let m = a.merged(&b).unwrap();
        assert_eq!(
            m.iter().collect::<Vec<_>>(),
            vec![("a", "1"), ("b", "9"), ("c", "3")]
        );
    }
}
