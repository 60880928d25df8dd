//! Arbitrary text as a `beat` JSON: the allocation-free reader of the common shape
//! (`BeatIdentity::scan`) must never panic, and whatever it accepts, serde's full
//! decode (`BeatInfo::parse`) must accept with the same identity: the reader is a
//! fast path, never a second opinion. `BeatIdentity::read` must agree with both.
//!
//! The same check runs on stable Rust, bounded, in
//! `registry/proto/tests/fuzz_smoke.rs` (`beat_json_pipeline`); keep the two in step.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::naming::beat::{BeatIdentity, BeatInfo};
use registry_proto::naming::ParseLimits;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let limits = ParseLimits::default();
    let slow = BeatInfo::parse(text, &limits);
    let read = BeatIdentity::read(text, &limits);
    assert_eq!(read.is_ok(), slow.is_ok(), "{text:?}");
    if let Some(fast) = BeatIdentity::scan(text, &limits) {
        let info = slow.expect("the fast path accepted what serde refuses");
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref());
        assert_eq!(fast.port, info.port);
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref());
    }
});
