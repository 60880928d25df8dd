//! Arbitrary bytes as a pipelined HTTP connection: frame every request, route it, read
//! its parameters and run every naming parser over them. Nothing may panic, and the
//! framing must never claim more bytes than it was given.
//!
//! The same pipeline runs on stable Rust, bounded, in
//! `registry/proto/tests/fuzz_smoke.rs` (`http_pipeline`); keep the two in step.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::http1::{parse_request, parse_request_with_httparse, Limits};
use registry_proto::naming::beat::BeatRequest;
use registry_proto::naming::instance::{InstanceKey, InstancePatch, InstanceRequest};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::route::route;
use registry_proto::naming::service::{ServiceListRequest, ServiceRequest};
use registry_proto::naming::{Metadata, ParseLimits};
use registry_proto::params::Params;

/// `get` finds the first value of every name, whether the reader noted its
/// first occurrence while splitting (the names requests look up) or not.
fn check_first_values(p: &Params<'_>) {
    for (name, _) in p.iter().take(64) {
        let first = p.iter().find(|(k, _)| *k == name).map(|(_, v)| v);
        assert_eq!(p.get(name), first, "{name:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let pl = ParseLimits::default();
    // The reader of plain heads answers as httparse does, at every offset
    // a pipelined connection would parse from.
    let mut rest = data;
    loop {
        let parsed = parse_request(rest, &limits);
        assert_eq!(parsed, parse_request_with_httparse(rest, &limits));
        let Ok(Some((req, used))) = parsed else {
            break;
        };
        assert!(used > 0 && used <= rest.len());
        let _ = route(req.method, req.path).map_err(|e| e.to_string());
        if let Ok(p) = Params::from_request(&req) {
            check_first_values(&p);
            let _ = InstanceRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = InstanceKey::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = InstancePatch::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = BeatRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = ListRequest::parse(&p, &pl).map_err(|e| e.to_string());
            let _ = ServiceRequest::parse_update(&p, &pl).map_err(|e| e.to_string());
            let _ = ServiceListRequest::parse(&p, &pl).map_err(|e| e.to_string());
        }
        rest = &rest[used..];
    }
    // The same bytes as a form body, and as raw metadata text.
    if let Ok(p) = Params::parse("", Some(data)) {
        check_first_values(&p);
        let _ = InstanceRequest::parse(&p, &pl);
        let _ = BeatRequest::parse(&p, &pl);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Metadata::parse(text, &pl);
    }
});
