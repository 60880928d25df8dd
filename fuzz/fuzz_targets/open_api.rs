//! Arbitrary bytes as requests to the v2/v3 APIs, the v1 completion and the
//! namespace endpoints: framing, the route table of every generation, and every
//! form reader of `registry_proto::openapi` and of the shared v1 forms they use
//! (metadata batch, health) must never panic; every refusal, put in the `Result`
//! envelope, must be one JSON object with a nonzero `code`, a `message` and the
//! detail as `data` (what v2/v3 clients parse).
//!
//! The same check runs on stable Rust, bounded, in
//! `registry/proto/tests/fuzz_smoke.rs` (`open_api_pipeline`); keep the two in step.

#![no_main]

use libfuzzer_sys::fuzz_target;
use registry_proto::http1::{parse_request, Limits};
use registry_proto::naming::batch::MetadataBatch;
use registry_proto::naming::health::HealthUpdate;
use registry_proto::naming::ParseLimits;
use registry_proto::openapi::envelope::{ApiError, Envelope};
use registry_proto::openapi::{admin, instance, namespace, route, service};
use registry_proto::params::Params;
use registry_proto::ProtoError;

fn envelope_is_json(e: ApiError) {
    let mut out = Vec::new();
    e.encode(&mut out);
    let v = Envelope::parse(&out).expect("an envelope is JSON");
    assert!(v.code != 0 && v.message.is_some());
    assert_eq!(v.data.as_str(), Some(&*e.detail));
}

fn check<T>(r: Result<T, ProtoError>) {
    if let Err(e) = r {
        envelope_is_json(ApiError::from(e));
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits::default();
    let pl = ParseLimits::default();
    let Ok(Some((req, _))) = parse_request(data, &limits) else {
        return;
    };
    let _ = route::route(req.method, req.path).map_err(|e| e.to_string());
    let Ok(p) = Params::from_request(&req) else {
        return;
    };
    for kind in [instance::ListKind::V2, instance::ListKind::V3Client, instance::ListKind::V3Admin] {
        check(instance::ListForm::parse(&p, &pl, kind));
    }
    for kind in [service::ListKind::V2, service::ListKind::V3] {
        if let Err(e) = service::ListForm::parse(&p, &pl, kind) {
            envelope_is_json(e);
        }
    }
    for door in [namespace::Door::V1, namespace::Door::Open] {
        check(namespace::NamespaceForm::parse_create(&p, door));
        check(namespace::NamespaceForm::parse_update(&p, door));
    }
    if let Err(e) = namespace::namespace_id_param(&p) {
        envelope_is_json(e);
    }
    check(MetadataBatch::parse(&p, &pl));
    check(HealthUpdate::parse(&p, &pl));
    let _ = instance::heart_beat(&p);
    // The admin forms (cluster, client views, log, distro, statuses, paging).
    for r in [
        admin::ClusterForm::parse(&p, &pl).err(),
        admin::ClientServiceForm::parse(&p, &pl).err(),
        admin::client_id(&p).err(),
        admin::log_form(&p).err(),
        admin::distro_form(&p).err(),
        admin::SubscriberPage::parse(&p).err(),
    ]
    .into_iter()
    .flatten()
    {
        envelope_is_json(r);
    }
    if let Some(key) = req.path.strip_prefix(route::STATUSES_PREFIX) {
        if let Err(e) = admin::statuses_key(key) {
            envelope_is_json(e);
        }
    }
});
