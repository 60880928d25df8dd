//! Arbitrary bytes as peer messages of every kind: decoding must never
//! panic, must refuse what exceeds the bound, and an accepted message must
//! re-encode to one that decodes to the same value; a namespace table's
//! shape check answers for every accepted table without panicking.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::distro::{
    decode, decode_answer, encode, encode_answer, Checksums, Datums, Fetch, NamespaceSet, Report,
    SnapshotPart,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

const MAX: usize = 64 * 1024;

fn round_trip<T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug>(data: &[u8]) {
    match decode::<T>(data, MAX) {
        Ok(m) => {
            assert!(data.len() <= MAX);
            assert_eq!(decode::<T>(&encode(&m), usize::MAX).as_ref(), Ok(&m));
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

fuzz_target!(|data: &[u8]| {
    round_trip::<Report>(data);
    round_trip::<Datums>(data);
    round_trip::<Checksums>(data);
    round_trip::<Fetch>(data);
    round_trip::<SnapshotPart>(data);
    round_trip::<NamespaceSet>(data);
    if let Ok(m) = decode::<NamespaceSet>(data, MAX) {
        if let Err(why) = m.body.check() {
            assert!(!why.is_empty());
        }
    }
    if let Ok(set) = decode_answer::<NamespaceSet>(data, MAX) {
        assert_eq!(
            decode_answer::<NamespaceSet>(&encode_answer(&set), usize::MAX),
            Ok(set)
        );
    }
});
