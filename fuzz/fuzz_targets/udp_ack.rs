//! Arbitrary datagrams as push acks: `parse_ack` must never panic, and an accepted ack
//! must re-encode to one that parses to the same value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::udp::ack::{encode_ack_of, parse_ack};

fuzz_target!(|data: &[u8]| {
    if let Ok(ack) = parse_ack(data) {
        let mut out = Vec::new();
        encode_ack_of(ack.kind, ack.last_ref_time, &mut out);
        assert_eq!(parse_ack(&out), Ok(ack));
    }
});
