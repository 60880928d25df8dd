//! Arbitrary bytes as a gRPC `Payload` (protobuf) and as the JSON body of every request
//! type: decoding must never panic, and a refusal always carries a Nacos error code.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::grpc::{decode, Payload};
use registry_proto::naming::ParseLimits;

const TYPES: &[&str] = &[
    "ServerCheckRequest",
    "ConnectionSetupRequest",
    "HealthCheckRequest",
    "InstanceRequest",
    "PersistentInstanceRequest",
    "BatchInstanceRequest",
    "SubscribeServiceRequest",
    "ServiceQueryRequest",
    "ServiceListRequest",
    "NotifySubscriberResponse",
    "ClientDetectionResponse",
    "NoSuchRequest",
];

fuzz_target!(|data: &[u8]| {
    let limits = ParseLimits::default();
    if let Ok(p) = <Payload as prost::Message>::decode(data) {
        if let Err(r) = decode(p.type_name(), p.json(), &limits) {
            assert!(matches!(r.code, 300..=302 | 400 | 500 | 502 | 503));
        }
    }
    for t in TYPES {
        if let Err(r) = decode(t, data, &limits) {
            assert!(matches!(r.code, 300..=302 | 400 | 500 | 502 | 503));
        }
    }
});
