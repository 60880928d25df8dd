//! [`SharedStr`]: an immutable, reference-counted string behind one
//! pointer, for the strings every instance holds (its cluster name, its
//! metadata buffer).
//!
//! An `Arc<str>` is a fat pointer: 16 bytes. An instance holds two such
//! strings, and a registry at Nacos's scale holds a million instances in
//! lists of one or two, where 16 bytes more per instance decide the
//! allocator's size class of the whole list (64 or 80 bytes for one
//! instance, 128 or 160 for two). The strings themselves are interned per
//! shard, so the extra indirection is paid once per distinct value in
//! memory, and reads follow one more pointer into a line every instance of
//! the shard shares.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable shared string, 8 bytes wide. Cloning is a reference-count
/// increment; equality tests the pointer first, then the text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharedStr(Arc<Box<str>>);

impl SharedStr {
    /// A new shared copy of `s` (not interned: the shard's interner makes
    /// equal strings share one).
    pub fn new(s: &str) -> SharedStr {
        SharedStr(Arc::new(Box::from(s)))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `a` and `b` are one allocation.
    pub fn ptr_eq(a: &SharedStr, b: &SharedStr) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// Holders of this allocation, for the interner's collection.
    pub(crate) fn holders(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl From<String> for SharedStr {
    fn from(s: String) -> SharedStr {
        SharedStr(Arc::new(s.into_boxed_str()))
    }
}

impl From<&str> for SharedStr {
    fn from(s: &str) -> SharedStr {
        SharedStr::new(s)
    }
}

impl Deref for SharedStr {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Hash and equality agree with `str`'s (the derives hash and compare the
/// text), so sets of `SharedStr` are looked up by `&str`.
impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        **self.0 == *other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        **self.0 == **other
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn one_pointer_wide_and_looked_up_by_str() {
        assert_eq!(std::mem::size_of::<SharedStr>(), 8);
        assert_eq!(std::mem::size_of::<Option<SharedStr>>(), 8);
        let a = SharedStr::new("DEFAULT");
        let set: HashSet<SharedStr> = [a.clone()].into();
        assert!(SharedStr::ptr_eq(set.get("DEFAULT").unwrap(), &a));
        assert_eq!(a, SharedStr::from("DEFAULT".to_string()));
        assert!(a == "DEFAULT" && a != "OTHER");
        assert_eq!(
            (a.to_string(), format!("{a:?}")),
            ("DEFAULT".into(), "\"DEFAULT\"".into())
        );
        assert_eq!(a.holders(), 2);
    }
}
