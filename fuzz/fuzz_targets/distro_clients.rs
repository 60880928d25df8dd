//! Arbitrary bytes as the peer messages of 2.x client replication (client
//! sets in parts, their verify and its answer): decoding must never panic,
//! must refuse what exceeds the bound, an accepted message must re-encode
//! to one that decodes to the same value, and the part check must answer
//! for every part without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::distro::{
    decode, decode_answer, encode, encode_answer, ClientSets, ClientVerify, ClientVerifyAnswer,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

const MAX: usize = 64 * 1024;

fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(
    data: &[u8],
) -> Option<T> {
    match decode::<T>(data, MAX) {
        Ok(m) => {
            assert!(data.len() <= MAX);
            assert_eq!(decode::<T>(&encode(&m), usize::MAX).as_ref(), Ok(&m));
            Some(m.body)
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(sets) = round_trip::<ClientSets>(data) {
        for part in &sets.items {
            if let Err(why) = part.check() {
                assert!(!why.is_empty());
            } else {
                assert!(part.part < part.parts);
            }
        }
    }
    round_trip::<ClientVerify>(data);
    if let Ok(answer) = decode_answer::<ClientVerifyAnswer>(data, MAX) {
        let again = encode_answer(&answer);
        assert_eq!(decode_answer::<ClientVerifyAnswer>(&again, usize::MAX), Ok(answer));
    }
});
