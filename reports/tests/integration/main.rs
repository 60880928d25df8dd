//! Integration tests of the `reports` library and the `report` binary.
//!
//! One test binary (instead of one per file) links the crate once, which matters
//! on a 2-core machine. Run the headless-browser test alone with
//! `cargo test -p reports --test integration html_chromium`.

mod cli;
mod common;
mod compare;
mod gates;
mod generator_limited;
mod html_chromium;
mod merge;
mod reasons;
mod schema;
