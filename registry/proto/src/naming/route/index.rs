//! The index `route()` reads the table through: every declared path (and
//! alias) once, with the route of each method and its `Allow` list, in an
//! open-addressing hash table, all built at compile time from
//! `super::table`'s rows.
//!
//! A lookup compares the path with the hottest paths first (the 1.x beat,
//! register and list: the bulk of a 1.x fleet's requests), one comparison
//! each, then hashes it (two 8-byte loads, a multiply) and compares the path
//! in its slot: O(1), no allocation, whatever the generation. The method is
//! an array index. A binary search over the sorted paths cost three times
//! the old `match` for a v2/v3 path (seven string comparisons); this costs
//! about one.

use super::table::{ALIASES, COUNT, PREFIX_ALIASES, SHARED_WITH_CONSOLE, TABLE};
use super::{Lookup, Route, RouteError};
use crate::http1::Method;

/// One per `Method` variant, indexed by `Method as usize`.
const METHODS: usize = Method::Other as usize + 1;

/// A path of the table and what each method on it resolves to.
#[derive(Clone, Copy)]
pub(super) struct PathEntry {
    path: &'static str,
    /// `Head` is looked up as `Get` (see `Lookup`).
    by_method: [Option<Route>; METHODS],
    /// The methods it serves, as `allow_bit` sets them.
    allow: u8,
    /// A method the table does not list here is a miss, not a 405.
    shared_with_console: bool,
    /// A row on this path is one of the 1.x core's (`Route::is_1x_core`).
    core: bool,
}

const EMPTY: PathEntry = PathEntry {
    path: "",
    by_method: [None; METHODS],
    allow: 0,
    shared_with_console: false,
    core: false,
};

impl PathEntry {
    /// Whether `naming::route::route` resolves this path.
    #[inline]
    pub(super) fn is_1x_core(&self) -> bool {
        self.core
    }

    /// What `request` on this path resolves to.
    #[inline]
    pub(super) fn resolve<'a>(&self, request: Lookup<'a>) -> Result<Route, RouteError<'a>> {
        match self.by_method[request.lookup as usize] {
            Some(route) => Ok(route),
            None if self.shared_with_console => Err(miss(request)),
            None => Err(request.not_allowed(allow_text(self.allow))),
        }
    }
}

/// The entry of `path` (trimmed), declared or aliased; `None` for a path
/// the table does not name exactly (a prefix alias or a template may still
/// match: see [`resolve_rest`]).
#[inline]
pub(super) fn find(path: &str) -> Option<&'static PathEntry> {
    // The hot paths compare whole: a length check, then one memcmp.
    if let Some(hot) = HOT.iter().find(|e| e.path == path) {
        return Some(hot);
    }
    find_bytes(path.as_bytes())
}

/// The hash table's probe for `key`.
#[inline]
fn find_bytes(key: &[u8]) -> Option<&'static PathEntry> {
    if key.len() < MIN_LEN {
        return None;
    }
    let mut slot = hash(key);
    loop {
        let entry = ENTRIES.get(usize::from(SLOTS[slot]))?;
        if entry.path.as_bytes() == key {
            return Some(entry);
        }
        slot = (slot + 1) & (SLOTS_LEN - 1);
    }
}

/// A request [`find`] did not know: a prefix alias, a templated path, or
/// the miss (501 under `/nacos/v1/ns/`, as Nacos's `DistroFilter`; 404
/// elsewhere, as Spring answers an unmapped path).
#[cold]
pub(super) fn resolve_rest(request: Lookup<'_>) -> Result<Route, RouteError<'_>> {
    for (alias, prefix) in PREFIX_ALIASES {
        if let Some(rest) = request.trimmed.strip_prefix(alias) {
            // `prefix + rest`, built on the stack: no declared path is longer.
            let mut key = [0; MAX_LEN];
            if prefix.len() + rest.len() <= MAX_LEN {
                let key = &mut key[..prefix.len() + rest.len()];
                key[..prefix.len()].copy_from_slice(prefix.as_bytes());
                key[prefix.len()..].copy_from_slice(rest.as_bytes());
                if let Some(entry) = find_bytes(key) {
                    return entry.resolve(request);
                }
            }
        }
    }
    for &(prefix, route) in &TEMPLATES {
        // `{key}`: one non-empty path segment, any method.
        if request
            .trimmed
            .strip_prefix(prefix)
            .is_some_and(|key| !key.is_empty() && !key.contains('/'))
        {
            return Ok(route);
        }
    }
    Err(miss(request))
}

/// A path the table does not serve.
pub(super) fn miss(request: Lookup<'_>) -> RouteError<'_> {
    let under_1x = request
        .trimmed
        .strip_prefix(crate::naming::API_PREFIX)
        .is_some_and(|rest| rest.starts_with('/'));
    if under_1x {
        RouteError::NoSuchApi {
            method: request.method,
            path: request.path,
        }
    } else {
        RouteError::NotFound { path: request.path }
    }
}

/// The methods of an `Allow` header, in the order it lists them (`HEAD`
/// with `GET`, as `Lookup` serves it).
const ALLOW_ORDER: [(Method, &str); 5] = [
    (Method::Get, "GET, HEAD"),
    (Method::Post, "POST"),
    (Method::Put, "PUT"),
    (Method::Patch, "PATCH"),
    (Method::Delete, "DELETE"),
];

/// The longest `Allow` value: every method.
const ALLOW_MAX: usize = "GET, HEAD, POST, PUT, PATCH, DELETE".len();

const fn allow_bit(method: Method) -> u8 {
    let mut i = 0;
    while i < ALLOW_ORDER.len() {
        if ALLOW_ORDER[i].0 as u8 == method as u8 {
            return 1 << i;
        }
        i += 1;
    }
    0
}

/// The `Allow` value of each set of methods, built once at compile time:
/// the 405 answer needs a `&'static str`.
static ALLOW_TEXTS: [(usize, [u8; ALLOW_MAX]); 1 << ALLOW_ORDER.len()] = allow_texts();

const fn allow_texts() -> [(usize, [u8; ALLOW_MAX]); 1 << ALLOW_ORDER.len()] {
    let mut out = [(0, [0; ALLOW_MAX]); 1 << ALLOW_ORDER.len()];
    let mut set = 0;
    while set < out.len() {
        let (mut len, mut bytes) = (0, [0; ALLOW_MAX]);
        let mut i = 0;
        while i < ALLOW_ORDER.len() {
            if set & (1 << i) != 0 {
                let word = ALLOW_ORDER[i].1.as_bytes();
                let mut j = 0;
                if len > 0 {
                    bytes[len] = b',';
                    bytes[len + 1] = b' ';
                    len += 2;
                }
                while j < word.len() {
                    bytes[len] = word[j];
                    len += 1;
                    j += 1;
                }
            }
            i += 1;
        }
        out[set] = (len, bytes);
        set += 1;
    }
    out
}

fn allow_text(set: u8) -> &'static str {
    let (len, bytes) = &ALLOW_TEXTS[usize::from(set)];
    // ASCII by construction.
    std::str::from_utf8(&bytes[..*len]).unwrap_or_default()
}

/// Whether a declared path is a template (ends in `{key}`).
const fn is_template(path: &str) -> bool {
    let b = path.as_bytes();
    b.len() >= 5 && b[b.len() - 1] == b'}' && b[b.len() - 5] == b'{'
}

/// A template's path up to its `{key}`.
pub(super) const fn template_prefix(path: &'static str) -> &'static str {
    // Bytes, then back: `str::split_at` is const only past our MSRV.
    let (prefix, _) = path.as_bytes().split_at(path.len() - "{key}".len());
    match std::str::from_utf8(prefix) {
        Ok(prefix) => prefix,
        Err(_) => panic!("a template's prefix is the start of a str"),
    }
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declared (non-template) paths, each once, plus the aliases.
const PATHS: usize = {
    let mut n = ALIASES.len();
    let mut i = 0;
    while i < COUNT {
        let path = TABLE[i].path;
        let mut first = !is_template(path);
        let mut j = 0;
        while j < i {
            first = first && !str_eq(TABLE[j].path, path);
            j += 1;
        }
        if first {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The entry of one declared path, gathered from every row naming it.
const fn entry(path: &'static str) -> PathEntry {
    let mut e = PathEntry { path, ..EMPTY };
    let mut i = 0;
    while i < COUNT {
        let spec = &TABLE[i];
        if str_eq(spec.path, path) {
            e.core |= spec.route.is_1x_core();
        }
        if str_eq(spec.path, path) && spec.any_method {
            e.by_method = [Some(spec.route); METHODS];
            e.allow = u8::MAX >> (8 - ALLOW_ORDER.len());
        } else if str_eq(spec.path, path) {
            e.by_method[spec.method as usize] = Some(spec.route);
            e.allow |= allow_bit(spec.method);
        }
        i += 1;
    }
    let mut k = 0;
    while k < SHARED_WITH_CONSOLE.len() {
        e.shared_with_console |= str_eq(SHARED_WITH_CONSOLE[k], path);
        k += 1;
    }
    e
}

/// Every path's entry. Fails to compile if two rows claim one method of a
/// path, a path is declared twice (as a path and an alias), or an alias
/// names no declared path.
const fn entries() -> [PathEntry; PATHS] {
    let mut out = [EMPTY; PATHS];
    let mut n = 0;
    let mut i = 0;
    while i < COUNT {
        let path = TABLE[i].path;
        let mut seen = is_template(path);
        let mut j = 0;
        while j < n {
            seen = seen || str_eq(out[j].path, path);
            j += 1;
        }
        if !seen {
            out[n] = entry(path);
            n += 1;
        }
        i += 1;
    }
    let mut a = 0;
    while a < ALIASES.len() {
        let (alias, path) = ALIASES[a];
        let canonical = entry(path);
        assert!(canonical.allow != 0, "an alias names no declared path");
        let mut j = 0;
        while j < n {
            assert!(!str_eq(out[j].path, alias), "an alias is a declared path");
            j += 1;
        }
        out[n] = PathEntry {
            path: alias,
            ..canonical
        };
        n += 1;
        a += 1;
    }
    check_methods();
    out
}

/// Two rows on one method of one path would leave one unreachable.
const fn check_methods() {
    let mut i = 0;
    while i < COUNT {
        let mut j = 0;
        while j < i {
            let (a, b) = (&TABLE[i], &TABLE[j]);
            assert!(
                !(str_eq(a.path, b.path) && a.method as u8 == b.method as u8),
                "two rows on one method of one path"
            );
            j += 1;
        }
        i += 1;
    }
}

static ENTRIES: [PathEntry; PATHS] = ENTRIES_CONST;

/// The hash table's size: a power of two, under a third full.
const SLOTS_LEN: usize = 256;
/// A slot no entry holds (`ENTRIES.get` misses it).
const FREE: u8 = u8::MAX;

/// The shortest and longest declared paths: the hash reads 8 bytes from
/// each end, so shorter keys are misses without it.
const MIN_LEN: usize = 8;
const MAX_LEN: usize = {
    let (mut max, mut i) = (0, 0);
    while i < PATHS {
        let len = ENTRIES_CONST[i].path.len();
        assert!(
            len >= MIN_LEN,
            "a declared path shorter than the hash reads"
        );
        if len > max {
            max = len;
        }
        i += 1;
    }
    max
};

const ENTRIES_CONST: [PathEntry; PATHS] = entries();

/// The 8 bytes of `b` from `at` (one load at run time).
const fn load(b: &[u8], at: usize) -> u64 {
    match b.split_at(at).1.first_chunk::<8>() {
        Some(bytes) => u64::from_le_bytes(*bytes),
        None => 0,
    }
}

/// The slot a path of at least `MIN_LEN` bytes starts probing at: its
/// length, its bytes 8 to 16 (the generation and the resource: `1/ns/ins`)
/// and its last 8, multiplied (Fibonacci hashing).
#[inline]
const fn hash(b: &[u8]) -> usize {
    let n = b.len();
    let head = load(b, if n >= 16 { 8 } else { n - 8 });
    let tail = load(b, n - 8);
    let mixed = (tail ^ head.rotate_left(29) ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - SLOTS_LEN.trailing_zeros())) as usize
}

/// Each slot's index into `ENTRIES`, by linear probing from its hash.
static SLOTS: [u8; SLOTS_LEN] = {
    assert!(PATHS * 3 < SLOTS_LEN && PATHS < FREE as usize);
    let mut slots = [FREE; SLOTS_LEN];
    let mut i = 0;
    while i < PATHS {
        let mut slot = hash(ENTRIES_CONST[i].path.as_bytes());
        while slots[slot] != FREE {
            slot = (slot + 1) & (SLOTS_LEN - 1);
        }
        slots[slot] = i as u8;
        i += 1;
    }
    slots
};

/// The paths compared before the search, hottest first.
const HOT_ROUTES: [Route; 3] = [
    Route::InstanceBeat,
    Route::InstanceRegister,
    Route::InstanceList,
];

static HOT: [PathEntry; HOT_ROUTES.len()] = {
    let mut out = [EMPTY; HOT_ROUTES.len()];
    let mut i = 0;
    while i < out.len() {
        out[i] = entry(TABLE[HOT_ROUTES[i] as usize].path);
        i += 1;
    }
    out
};

/// How many rows are templates.
const TEMPLATE_COUNT: usize = {
    let (mut n, mut i) = (0, 0);
    while i < COUNT {
        if is_template(TABLE[i].path) {
            n += 1;
        }
        i += 1;
    }
    n
};

/// `(prefix, route)` of each templated row; any method resolves.
static TEMPLATES: [(&str, Route); TEMPLATE_COUNT] = {
    let mut out = [("", Route::InstanceRegister); TEMPLATE_COUNT];
    let (mut n, mut i) = (0, 0);
    while i < COUNT {
        let spec = &TABLE[i];
        if is_template(spec.path) {
            assert!(spec.any_method, "a template serves every method");
            out[n] = (template_prefix(spec.path), spec.route);
            n += 1;
        }
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_lists_keep_their_order() {
        let all = ALLOW_ORDER.iter().fold(0, |s, (m, _)| s | allow_bit(*m));
        assert_eq!(allow_text(all), "GET, HEAD, POST, PUT, PATCH, DELETE");
        let post_put = allow_bit(Method::Post) | allow_bit(Method::Put);
        assert_eq!(allow_text(post_put), "POST, PUT");
        assert_eq!(allow_text(allow_bit(Method::Get)), "GET, HEAD");
    }

    #[test]
    fn every_declared_path_is_indexed_once() {
        for spec in &TABLE {
            let indexed = ENTRIES.iter().filter(|e| e.path == spec.path).count();
            assert_eq!(
                indexed,
                usize::from(!is_template(spec.path)),
                "{}",
                spec.path
            );
        }
        for e in &ENTRIES {
            assert!(std::ptr::eq(find_bytes(e.path.as_bytes()).unwrap(), e));
        }
        for hot in &HOT {
            assert!(find(hot.path).is_some());
        }
    }
}
