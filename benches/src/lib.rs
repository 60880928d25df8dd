//! Shared fixtures for the criterion benches and the footprint programs:
//! registries shaped like Nacos's published capacity profile.
//!
//! # Layout
//! - [`profile`]: deterministic service names, addresses and metadata.
//! - [`flags`]: `--name value` flags of the footprint programs.
//! - [`measure`]: process resident memory, read from `/proc`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod flags;
pub mod measure;
pub mod profile;
