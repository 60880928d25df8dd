//! Arbitrary text as a `beat` JSON: the allocation-free reader of the common shape
//! (`BeatIdentity::scan`) must never panic, and whatever it accepts, serde's full
//! decode (`BeatInfo::parse`) must accept with the same identity: the reader is a
//! fast path, never a second opinion. `BeatIdentity::read` must agree with both.
//! The same bytes as a URL-encoded form value: whatever the reader accepts in place
//! (`BeatIdentity::scan_form`) must decode and then pass serde with the same identity,
//! and a beat request carrying them must read as decoding them first would.
//!
//! The same check runs on stable Rust, bounded, in
//! `registry/proto/tests/fuzz_smoke.rs` (`beat_json_pipeline`); keep the two in step.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::error::ProtoError;
use registry_proto::naming::beat::{BeatIdentity, BeatInfo, BeatRequest};
use registry_proto::naming::ParseLimits;
use registry_proto::params::{java_trim, percent_decode, Params};

fuzz_target!(|data: &[u8]| {
    let limits = ParseLimits::default();
    // The bytes as a `beat` form value, read in place: whatever the form reader
    // accepts decodes, and serde accepts the decoded text with the same identity;
    // and a beat request carrying the bytes in its form body reads as checking
    // the body, decoding the value and then reading it would.
    if let Some(fast) = BeatIdentity::scan_form(data, &limits) {
        let decoded = percent_decode(data).expect("the form reader took what does not decode");
        let info = BeatInfo::parse(java_trim(&decoded), &limits)
            .expect("the form reader took what serde refuses");
        assert_eq!(fast.ip.as_deref(), info.ip.as_deref());
        assert_eq!(fast.port, info.port);
        assert_eq!(fast.cluster.as_deref(), info.cluster.as_deref());
    }
    if !data.contains(&b'&') {
        let body = [b"beat=".as_slice(), data].concat();
        let form = Params::parse("serviceName=s&ip=1.1.1.1&port=1", Some(&body))
            .and_then(|p| {
                let r = BeatRequest::parse(&p, &limits)?;
                Ok((r.ip.into_owned(), r.port, r.cluster.into_owned()))
            })
            .map_err(|e| e.to_string());
        let decoded = std::str::from_utf8(data)
            .map_err(|_| ProtoError::Utf8)
            .and_then(|_| percent_decode(data))
            .and_then(|d| {
                let d = java_trim(&d);
                let id = if d.is_empty() {
                    BeatIdentity::default()
                } else {
                    BeatIdentity::read(d, &limits)?
                };
                Ok((
                    id.ip.as_deref().unwrap_or("1.1.1.1").to_owned(),
                    id.port.unwrap_or(1),
                    id.cluster.as_deref().unwrap_or("DEFAULT").to_owned(),
                ))
            });
        assert_eq!(form, decoded.map_err(|e| e.to_string()), "{data:?}");
    }

    // The bytes as the JSON text itself.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
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
