//! The 2.x gRPC wire formats: payload round trips, the decoder's validation and codes,
//! and properties over generated requests.

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message as _;
use registry_proto::grpc::message::{
    BatchInstanceRequest, InstanceRequest, NamingHead, RequestHead, ResponseHead,
    ServerCheckResponse, SubscribeServiceRequest, WireInstance,
};
use registry_proto::grpc::{code, decode, refusal_payload, ClientMessage, InstanceOp, Payload};
use registry_proto::naming::ParseLimits;

fn limits() -> ParseLimits {
    ParseLimits::default()
}

fn instance_json(instance: &str) -> Vec<u8> {
    format!(
        r#"{{"requestId":"r1","headers":{{}},"namespace":"public","serviceName":"demo","groupName":"G","module":"naming","type":"registerInstance","instance":{instance}}}"#
    )
    .into_bytes()
}

#[test]
fn a_java_shaped_register_decodes_with_defaults() {
    let d = decode(
        "InstanceRequest",
        &instance_json(r#"{"ip":"10.0.0.1","port":8080,"metadata":{"k":"v"},"instanceHeartBeatInterval":5000}"#),
        &limits(),
    )
    .unwrap();
    assert_eq!(d.request_id.as_deref(), Some("r1"));
    let ClientMessage::Instance {
        service,
        op,
        instance,
        ..
    } = d.message
    else {
        panic!("not an instance request: {:?}", d.message);
    };
    assert_eq!(op, InstanceOp::Register);
    assert_eq!(service.grouped(), "G@@demo");
    assert_eq!(service.namespace, "public");
    assert_eq!((instance.ip.as_str(), instance.port), ("10.0.0.1", 8080));
    assert_eq!(instance.cluster, "DEFAULT");
    assert!(instance.ephemeral && instance.healthy && instance.enabled);
    assert_eq!(instance.weight, 1.0);
    assert_eq!(instance.metadata.get("k").map(String::as_str), Some("v"));
}

#[test]
fn refusals_carry_nacos_codes_and_the_request_id() {
    let l = limits();
    let unknown = decode("NoSuchRequest", b"{}", &l).unwrap_err();
    assert_eq!(unknown.code, code::NO_HANDLER);
    assert_eq!(unknown.message, "RequestHandler Not Found");

    let not_json = decode("InstanceRequest", b"{\"requestId\":", &l).unwrap_err();
    assert_eq!(not_json.code, code::BAD_GATEWAY);
    let wrong_shape = decode("InstanceRequest", br#"{"instance":"x"}"#, &l).unwrap_err();
    assert_eq!(wrong_shape.code, code::BAD_GATEWAY);

    for (instance, says) in [
        (r#"{"port":1}"#, "'ip'"),
        (r#"{"ip":"10.0.0.1"}"#, "'port'"),
        (r#"{"ip":"10.0.0.1","port":70000}"#, "between 0 and 65535"),
        (r#"{"ip":"10.0.0.1","port":1,"weight":20000}"#, "weights"),
        (r#"{"ip":"999.1.1.1","port":1}"#, "IP"),
        (
            r#"{"ip":"10.0.0.1","port":1,"clusterName":"a b"}"#,
            "cluster name",
        ),
    ] {
        let r = decode("InstanceRequest", &instance_json(instance), &l).unwrap_err();
        assert_eq!(r.code, code::INVALID_PARAM, "{instance}: {r:?}");
        assert_eq!(r.request_id.as_deref(), Some("r1"));
        assert!(r.message.contains(says), "{instance}: {}", r.message);
    }
    let no_service = decode(
        "SubscribeServiceRequest",
        br#"{"requestId":"9","subscribe":true}"#,
        &l,
    )
    .unwrap_err();
    assert_eq!(no_service.code, code::INVALID_PARAM);
    assert_eq!(no_service.request_id.as_deref(), Some("9"));
}

#[test]
fn a_batch_with_one_bad_instance_is_refused_whole() {
    let r = decode(
        "BatchInstanceRequest",
        br#"{"serviceName":"s","type":"batchRegisterInstance","instances":[{"ip":"10.0.0.1","port":1},{"ip":"10.0.0.2","port":-1}]}"#,
        &limits(),
    )
    .unwrap_err();
    assert_eq!(r.code, code::INVALID_PARAM);
    let too_many: Vec<WireInstance> = (0..1001)
        .map(|i| WireInstance {
            ip: Some("10.0.0.1".into()),
            port: Some(i),
            ..WireInstance::default()
        })
        .collect();
    let body = serde_json::to_vec(&BatchInstanceRequest {
        naming: NamingHead {
            service_name: Some("s".into()),
            ..NamingHead::default()
        },
        r#type: Some("batchRegisterInstance".into()),
        instances: Some(too_many),
        ..BatchInstanceRequest::default()
    })
    .unwrap();
    let r = decode("BatchInstanceRequest", &body, &limits()).unwrap_err();
    assert_eq!(r.code, code::OVER_THRESHOLD);
}

#[test]
fn responses_have_every_field_the_clients_require() {
    let p = Payload::of(&ServerCheckResponse {
        head: ResponseHead::ok(Some("7".into())),
        connection_id: Some("1_127.0.0.1_5".into()),
        support_ability_negotiation: false,
    });
    assert_eq!(p.type_name(), "ServerCheckResponse");
    let v: serde_json::Value = serde_json::from_slice(p.json()).unwrap();
    assert_eq!(v["resultCode"], 200);
    assert_eq!(v["errorCode"], 0);
    assert_eq!(v["requestId"], "7");
    assert_eq!(v["connectionId"], "1_127.0.0.1_5");
    assert_eq!(v["supportAbilityNegotiation"], false);
    // No `null` strings: the Python client's models refuse them.
    assert!(v.get("message").is_none(), "{v}");

    let refusal = decode("Nope", b"{}", &limits()).unwrap_err();
    let e = refusal_payload(&refusal);
    assert_eq!(e.type_name(), "ErrorResponse");
    let v: serde_json::Value = serde_json::from_slice(e.json()).unwrap();
    assert_eq!(v["resultCode"], 500);
    assert_eq!(v["errorCode"], 302);
    assert_eq!(v["success"], false);
}

#[test]
fn payloads_survive_protobuf_round_trips() {
    let body = instance_json(r#"{"ip":"10.0.0.1","port":1}"#);
    let p = Payload::new("InstanceRequest", body.clone());
    let back = Payload::decode(&p.encode_to_vec()[..]).unwrap();
    assert_eq!(back.type_name(), "InstanceRequest");
    assert_eq!(back.json(), &body[..]);
    // An empty payload decodes to an empty type name, which no handler takes.
    let empty = Payload::decode(&[][..]).unwrap();
    assert_eq!(
        decode(empty.type_name(), empty.json(), &limits())
            .unwrap_err()
            .code,
        code::NO_HANDLER
    );
}

fn wire_instance() -> impl Strategy<Value = WireInstance> {
    (
        (1u8..=254, 0u8..=255, 0u8..=255, 1u8..=254),
        0u16..=65535,
        0u32..=10_000,
        any::<(bool, bool, bool)>(),
        prop::option::of("[a-zA-Z0-9-]{1,12}"),
        prop::collection::btree_map("[a-z]{1,8}", "[ -~]{0,16}", 0..4),
    )
        .prop_map(
            |((a, b, c, d), port, weight, (h, e, eph), cluster, metadata)| WireInstance {
                ip: Some(format!("{a}.{b}.{c}.{d}")),
                port: Some(i64::from(port)),
                weight: Some(f64::from(weight)),
                healthy: Some(h),
                enabled: Some(e),
                ephemeral: Some(eph),
                cluster_name: cluster,
                metadata: Some(metadata),
                ..WireInstance::default()
            },
        )
}

proptest! {
    #[test]
    fn every_valid_instance_request_decodes_to_what_was_sent(
        inst in wire_instance(),
        service in "[a-zA-Z0-9_.:-]{1,30}",
        group in prop::option::of("[a-zA-Z0-9_.:-]{1,20}"),
        register in any::<bool>(),
    ) {
        let req = InstanceRequest {
            head: RequestHead { request_id: Some("x".into()), headers: BTreeMap::new() },
            naming: NamingHead {
                namespace: None,
                service_name: Some(service.clone()),
                group_name: group.clone(),
            },
            r#type: Some(if register { "registerInstance" } else { "deregisterInstance" }.into()),
            instance: Some(inst.clone()),
        };
        let d = decode("InstanceRequest", &serde_json::to_vec(&req).unwrap(), &limits()).unwrap();
        let ClientMessage::Instance { service: id, op, instance, .. } = d.message else {
            panic!("wrong message");
        };
        prop_assert_eq!(op, if register { InstanceOp::Register } else { InstanceOp::Deregister });
        prop_assert_eq!(id.name, service);
        prop_assert_eq!(id.group, group.unwrap_or_else(|| "DEFAULT_GROUP".into()));
        prop_assert_eq!(Some(instance.ip), inst.ip);
        prop_assert_eq!(Some(i64::from(instance.port)), inst.port);
        prop_assert_eq!(Some(instance.weight), inst.weight);
        prop_assert_eq!(instance.cluster, inst.cluster_name.unwrap_or_else(|| "DEFAULT".into()));
        prop_assert_eq!(Some(instance.metadata), inst.metadata);
    }

    #[test]
    fn arbitrary_json_values_never_panic_and_refusals_have_codes(
        v in prop::collection::vec(any::<u8>(), 0..256),
        t in prop::sample::select(vec![
            "InstanceRequest", "BatchInstanceRequest", "SubscribeServiceRequest",
            "ServiceQueryRequest", "ServiceListRequest", "ConnectionSetupRequest",
        ]),
    ) {
        if let Err(r) = decode(t, &v, &limits()) {
            prop_assert!(matches!(r.code, 400 | 502 | 503));
        }
    }

    #[test]
    fn subscribe_requests_echo_their_clusters(clusters in "[a-zA-Z0-9,-]{0,20}") {
        let req = SubscribeServiceRequest {
            naming: NamingHead { service_name: Some("s".into()), ..NamingHead::default() },
            subscribe: Some(true),
            clusters: Some(clusters.clone()),
            ..SubscribeServiceRequest::default()
        };
        let d = decode("SubscribeServiceRequest", &serde_json::to_vec(&req).unwrap(), &limits()).unwrap();
        let ClientMessage::Subscribe { clusters: got, subscribe, .. } = d.message else {
            panic!("wrong message");
        };
        prop_assert!(subscribe);
        prop_assert_eq!(got, clusters);
    }
}

/// The decoder borrows text from the body: these are the bodies where it
/// cannot (escapes, bytes that are not UTF-8) or where a field's type is
/// wrong; each decodes, or is refused, as the owned reading of the message
/// types did (the answers were recorded before the change).
#[test]
fn escaped_odd_and_ill_typed_bodies_decode_as_the_owned_reading_did() {
    let l = limits();
    let escaped = br#"{"requestId":"r\u00311","namespace":"p\u0075b","serviceName":"de\u006do","groupName":"G\u0031","type":"deregister\u0049nstance","instance":{"ip":"10.0.0.\u0031","port":1,"clusterName":"c\u0031","metadata":{"k\"":"v\\"}}}"#;
    let d = decode("InstanceRequest", escaped, &l).unwrap();
    assert_eq!(d.request_id.as_deref(), Some("r11"));
    let ClientMessage::Instance {
        service,
        op,
        instance,
        op_name,
        ..
    } = d.message
    else {
        panic!("not an instance request: {:?}", d.message);
    };
    assert_eq!(
        (op, op_name.as_str()),
        (InstanceOp::Deregister, "deregisterInstance")
    );
    assert_eq!(
        (service.namespace.as_str(), service.grouped().as_str()),
        ("pub", "G1@@demo")
    );
    assert_eq!(
        (instance.ip.as_str(), instance.cluster.as_str()),
        ("10.0.0.1", "c1")
    );
    assert_eq!(
        instance.metadata.get("k\"").map(String::as_str),
        Some("v\\")
    );

    // Fields the server does not use are still type-checked.
    let body = |instance: &str| {
        format!(
            r#"{{"requestId":"r1","serviceName":"demo","type":"deregisterInstance","instance":{instance}}}"#
        )
    };
    for (instance, column) in [
        (r#"{"instanceId":5,"ip":"10.0.0.1","port":1}"#, 93),
        (r#"{"serviceName":5,"ip":"10.0.0.1","port":1}"#, 94),
    ] {
        let r = decode("InstanceRequest", body(instance).as_bytes(), &l).unwrap_err();
        assert_eq!(r.code, code::BAD_GATEWAY);
        assert_eq!(
            r.message,
            format!("Invalid request: the payload is not valid JSON of its type: invalid type: integer `5`, expected a string at line 1 column {column}")
        );
    }
    let r = decode(
        "ServiceListRequest",
        br#"{"requestId":"r1","groupName":"g","pageNo":2,"pageSize":5,"selector":3}"#,
        &l,
    )
    .unwrap_err();
    assert_eq!(r.code, code::BAD_GATEWAY);

    // Bytes that are not UTF-8: accepted in a field nobody reads, refused
    // with serde_json's own text in one that is read.
    let odd = b"{\"requestId\":\"r1\",\"module\":\"n\xff\",\"serviceName\":\"demo\",\"type\":\"deregisterInstance\",\"instance\":{\"ip\":\"10.0.0.1\",\"port\":1}}";
    assert_eq!(
        decode("InstanceRequest", odd, &l)
            .unwrap()
            .request_id
            .as_deref(),
        Some("r1")
    );
    let bad = b"{\"requestId\":\"r1\",\"serviceName\":\"de\xffmo\",\"type\":\"deregisterInstance\",\"instance\":{\"ip\":\"10.0.0.1\",\"port\":1}}";
    let r = decode("InstanceRequest", bad, &l).unwrap_err();
    assert_eq!(
        r.message,
        "Invalid request: the payload is not valid JSON of its type: invalid unicode code point at line 1 column 36"
    );
    let dup = br#"{"serviceName":"demo","serviceName":"x","type":"deregisterInstance","instance":{"ip":"10.0.0.1","port":1}}"#;
    let r = decode("InstanceRequest", dup, &l).unwrap_err();
    assert!(
        r.message.contains("duplicate field `serviceName`"),
        "{}",
        r.message
    );
}
