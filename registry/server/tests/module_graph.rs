//! No module cycle in `registry-server`, checked over its sources.
//!
//! The nodes are the crate's top-level modules (`http`, `cluster`,
//! `state`, …) and the crate root (`lib.rs`); an edge `a -> b` is a path
//! in a file of `a` that names `b`: `crate::b::…`, `use crate::{b, …}`,
//! `super::…` resolving into `b`, or a bare `b::…` in `lib.rs`. A
//! re-export in `lib.rs` (`pub use state::App`) is an alias, not a use:
//! `crate::App` counts as naming `state`. Paths inside one top-level
//! module (a folder's files naming each other) are not edges: a folder is
//! one module with one owner, and `mod.rs` and its children naming each
//! other is how Rust folders are built. Unit tests (`#[cfg(test)] mod
//! …`) are left out: the graph is that of the code that ships, and a unit
//! test may drive its module through the parts above it (the namespace
//! quota's race test goes through `write::Writer`).
//!
//! A source check rather than `cargo metadata`: metadata only knows
//! crates, and the cycle this guards against is between modules of one
//! crate. Comments and string literals are stripped first, so a doc that
//! names a module is no dependency.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which files (with line) make each edge.
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with comments, string and char literals blanked (newlines kept,
/// so line numbers stay right).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    // Blanks `b[from..to]`, keeping newlines.
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        out.extend(
            b[from..to]
                .iter()
                .map(|&c| if c == b'\n' { b'\n' } else { b' ' }),
        );
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let mut depth = 0;
            let mut j = i;
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if let Some(hashes) = raw_string_start(b, i) {
            let body = i + 1 + hashes + 1;
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p + 1)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => {
                    out.push(b[i]);
                    i += 1;
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("stripping keeps UTF-8")
}

/// `r"`, `r#"`, `br"`…: the number of `#`s when a raw string starts at `i`.
fn raw_string_start(b: &[u8], i: usize) -> Option<usize> {
    if b[i] != b'r' || (i > 0 && is_ident(b[i - 1]) && b[i - 1] != b'b') {
        return None;
    }
    if i > 1 && b[i - 1] == b'b' && is_ident(b[i - 2]) {
        return None;
    }
    let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + 1 + hashes) == Some(&b'"')).then_some(hashes)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The module path of a file under `src/` (`http/conn.rs` -> `[http, conn]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The inline modules (`mod tests { … }`) enclosing each byte offset:
/// `(start, end, name)` of every inline module's braces.
fn inline_modules(code: &str) -> Vec<(usize, usize, String)> {
    inline_modules_marked(code)
        .into_iter()
        .map(|(s, e, n, _)| (s, e, n))
        .collect()
}

/// [`inline_modules`], each with whether it is a unit test module
/// (`#[cfg(test)]` right before it).
fn inline_modules_marked(code: &str) -> Vec<(usize, usize, String, bool)> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(p) = code[at..].find("mod ") {
        let start = at + p;
        at = start + 4;
        if start > 0 && is_ident(b[start - 1]) {
            continue;
        }
        let name: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = code[at + name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = code.len() - after.len();
        let mut depth = 0;
        let mut end = code.len();
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let test = code[..start].trim_end().ends_with("#[cfg(test)]");
        found.push((open, end, name, test));
    }
    found
}

/// The first segment of each path in a `use` tree that starts at `at`
/// (just after `crate::` or `super::`): `x::…` gives `[x]`, `{x, y::z}`
/// gives `[x, y]`, `*` gives `[*]`.
fn heads(code: &str, at: usize) -> Vec<String> {
    let rest = code[at..].trim_start();
    if let Some(group) = rest.strip_prefix('{') {
        let mut depth = 1;
        let mut items = Vec::new();
        let mut item = String::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 || (c == ',' && depth == 1) {
                items.push(std::mem::take(&mut item));
                if depth == 0 {
                    break;
                }
            } else {
                item.push(c);
            }
        }
        return items
            .iter()
            .filter_map(|i| first_segment(i.trim()))
            .collect();
    }
    first_segment(rest).into_iter().collect()
}

fn first_segment(path: &str) -> Option<String> {
    if path.starts_with('*') {
        return Some("*".into());
    }
    let seg: String = path
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!seg.is_empty()).then_some(seg)
}

/// The top-level modules and what `lib.rs` re-exports (`App` -> `state`;
/// an external crate's alias maps to `None`).
fn crate_root(src: &Path) -> (BTreeSet<String>, BTreeMap<String, Option<String>>) {
    let lib = code_only(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let mut modules = BTreeSet::new();
    let mut aliases = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        if let Some(m) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
        {
            modules.insert(m.trim_end_matches(';').trim().to_owned());
        } else if let Some(u) = line.strip_prefix("pub use ") {
            let u = u.trim_end_matches(';');
            if let Some((from, alias)) = u.split_once(" as ") {
                let from_module = from.split("::").next().unwrap_or("");
                aliases.insert(alias.trim().to_owned(), Some(from_module.to_owned()));
            } else if let Some((module, name)) = u.rsplit_once("::") {
                let module = module.split("::").next().unwrap_or("").to_owned();
                aliases.insert(name.to_owned(), Some(module));
            }
        }
    }
    // An alias for something outside the crate is no module of ours.
    for target in aliases.values_mut() {
        if target.as_ref().is_some_and(|m| !modules.contains(m)) {
            *target = None;
        }
    }
    (modules, aliases)
}

/// The top-level module graph of the crate whose sources are `src`.
fn module_graph(src: &Path) -> Graph {
    let (modules, aliases) = crate_root(src);
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut graph = Graph::new();
    for file in files {
        // `main.rs` is the binary, a crate of its own on top of the library.
        if file == src.join("main.rs") {
            continue;
        }
        let module = module_of(src, &file);
        let from = module.first().cloned().unwrap_or_else(|| "crate".into());
        let text = std::fs::read_to_string(&file).expect("readable source");
        let code = code_only(&text);
        let inline = inline_modules(&code);
        let tests: Vec<(usize, usize)> = inline_modules_marked(&code)
            .into_iter()
            .filter(|m| m.3)
            .map(|(s, e, _, _)| (s, e))
            .collect();
        for (at, base) in path_starts(&code, &module, &inline, module.is_empty(), &modules) {
            if tests.iter().any(|(s, e)| *s < at && at < *e) {
                continue;
            }
            for head in heads(&code, at) {
                let mut path = base.clone();
                path.push(head);
                let to = match path.first().map(String::as_str) {
                    Some(m) if modules.contains(m) => m.to_owned(),
                    Some(name) if path.len() == 1 => match aliases.get(name) {
                        Some(Some(m)) => m.clone(),
                        Some(None) => continue,
                        None if name == "*" || name == "self" || name == "super" => continue,
                        None => "crate".into(),
                    },
                    _ => continue,
                };
                if to != from {
                    let line = code[..at].matches('\n').count() + 1;
                    let rel = file
                        .strip_prefix(src)
                        .unwrap_or(&file)
                        .display()
                        .to_string();
                    let site = format!("{rel}:{line}");
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_default()
                        .push(site);
                }
            }
        }
    }
    graph
}

/// Where a path into the crate begins, with the module it is relative to:
/// after `crate::` (the root), after a run of `super::` (resolved from the
/// enclosing module, inline ones included), and in `lib.rs` at a bare
/// `module::`.
fn path_starts(
    code: &str,
    module: &[String],
    inline: &[(usize, usize, String)],
    is_root: bool,
    modules: &BTreeSet<String>,
) -> Vec<(usize, Vec<String>)> {
    let b = code.as_bytes();
    let mut starts = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let boundary = i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b':');
        if !boundary {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        if rest.starts_with("crate::") {
            starts.push((i + 7, Vec::new()));
            i += 7;
        } else if rest.starts_with("super::") {
            let mut here: Vec<String> = module.to_vec();
            here.extend(
                inline
                    .iter()
                    .filter(|(s, e, _)| *s < i && i < *e)
                    .map(|(_, _, n)| n.clone()),
            );
            let mut j = i;
            while code[j..].starts_with("super::") {
                here.pop();
                j += 7;
            }
            starts.push((j, here));
            i = j;
        } else if is_root {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let in_inline = inline.iter().any(|(s, e, _)| *s < i && i < *e);
            let line_start = code[..i].rfind('\n').map_or(0, |p| p + 1);
            let reexport = code[line_start..i].trim_start().starts_with("pub use");
            if !in_inline
                && !reexport
                && modules.contains(&word)
                && code[i + word.len()..].starts_with("::")
            {
                starts.push((i, Vec::new()));
            }
            i += word.len().max(1);
        } else {
            i += 1;
        }
    }
    starts
}

/// Every strongly connected component of more than one node (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                loop {
                    let w = self.stack.pop().expect("on the stack");
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found
}

fn edges(graph: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    graph
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect()
}

/// A cycle, with the places that make each of its edges.
fn describe(graph: &Graph, component: &[String]) -> String {
    let mut text = format!("cycle over {{{}}}:\n", component.join(", "));
    for from in component {
        for (to, sites) in graph.get(from).into_iter().flatten() {
            if component.contains(to) {
                text += &format!("  {from} -> {to}: {}\n", sites.join(", "));
            }
        }
    }
    text
}

fn server_graph() -> Graph {
    module_graph(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn the_server_modules_form_no_cycle() {
    let graph = server_graph();
    let found = cycles(&edges(&graph));
    let text: Vec<String> = found.iter().map(|c| describe(&graph, c)).collect();
    assert!(found.is_empty(), "module cycles:\n{}", text.join("\n"));
}

#[test]
fn the_scan_sees_the_edges_it_should() {
    // Controls: edges the server certainly has, found through each kind of
    // path (`use crate::x::…`, a grouped `use crate::{…}`, a root alias).
    let graph = edges(&server_graph());
    for (from, to) in [
        ("http", "write"),
        ("sweeper", "write"),
        ("health", "write"),
        ("crate", "http"),
    ] {
        assert!(
            graph.get(from).is_some_and(|t| t.contains(to)),
            "{from} -> {to} not seen: the scan is broken\n{graph:#?}"
        );
    }
}

#[test]
fn the_long_lived_tasks_see_their_views_not_the_server_state() {
    // The health checker, the notifier and the sweeper take a view of
    // their own (`HealthChecks`, `Pushes`, `Sweeps`), never `App`, and the
    // notifier reaches no door: what it pushes is below both.
    let graph = edges(&server_graph());
    for (task, never) in [
        ("health", "state"),
        ("notifier", "state"),
        ("sweeper", "state"),
        ("notifier", "http"),
        ("notifier", "grpc"),
    ] {
        let reaches = graph.get(task).is_some_and(|t| t.contains(never));
        assert!(!reaches, "{task} -> {never}: {:?}", graph.get(task));
    }
}

#[test]
fn a_door_sees_the_seam_not_the_server_state() {
    // The DNS door, the first one added through the door seam, takes the
    // views `door::Views` hands it, never `App`, and no other door; the
    // seam itself names no door (they are registered in `lib.rs`).
    let graph = edges(&server_graph());
    assert!(
        graph.get("dns").is_some_and(|t| t.contains("door")),
        "dns -> door not seen: the scan is broken\n{graph:#?}"
    );
    for (from, never) in [
        ("dns", "state"),
        ("dns", "http"),
        ("dns", "grpc"),
        ("dns", "udp"),
        ("door", "http"),
        ("door", "grpc"),
        ("door", "dns"),
        ("door", "udp"),
    ] {
        let reaches = graph.get(from).is_some_and(|t| t.contains(never));
        assert!(!reaches, "{from} -> {never}: {:?}", graph.get(from));
    }
}

#[test]
fn a_cycle_is_found_and_named() {
    // A synthetic crate: a -> b -> c -> a through three kinds of paths,
    // d -> a outside the cycle, and mentions in comments, strings and a
    // unit test module that are no edges.
    let dir = std::env::temp_dir().join(format!("module-graph-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).expect("temp dir");
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub use c::Thing;\nuse a::start;\n"),
        ("a.rs", "use crate::b::inner::f;\n// crate::d::x\nconst S: &str = \"crate::d::y\";\n"),
        ("b/mod.rs", "pub mod inner;\n"),
        ("b/inner.rs", "use crate::{Thing, self as _};\nfn g() { super::super::a::h() }\n"),
        ("c.rs", "pub struct Thing;\nfn k() { crate::a::h(); }\n#[cfg(test)]\nmod tests { use super::*; }\n"),
        ("d.rs", "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::c::Thing;\n}\n"),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).expect("write");
    }
    let graph = module_graph(&src);
    std::fs::remove_dir_all(&dir).expect("clean up");
    let e = edges(&graph);
    let expect: BTreeMap<String, BTreeSet<String>> = [
        ("crate", vec!["a"]),
        ("a", vec!["b"]),
        ("b", vec!["a", "c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(f, t)| (f.to_owned(), t.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(e, expect);
    let found = cycles(&e);
    assert_eq!(
        found,
        vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
    );
    let text = describe(&graph, &found[0]);
    assert!(text.contains("b -> c: b/inner.rs:1"), "{text}");
    assert!(text.contains("c -> a: c.rs:2"), "{text}");
}
