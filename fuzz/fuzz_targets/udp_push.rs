//! Arbitrary datagrams as push packets (plain or gzip): `decode_push` must never panic
//! and must stay within its inflate bound; an accepted packet's `data` re-encodes to a
//! packet that decodes to the same data.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::udp::push::{decode_push, encode_push};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode_push(data) {
        let _ = p.service_info();
        let mut out = Vec::new();
        encode_push(p.data.as_bytes(), p.last_ref_time, &mut out);
        let again = decode_push(&out).expect("re-encoded push decodes");
        assert_eq!((again.data, again.last_ref_time), (p.data, p.last_ref_time));
    }
});
