//! Every malformed request gets the right status and the exact Nacos error text.
//!
//! `answer` plays the server's request path (frame → route → params → typed parse)
//! and returns the status and plain-text body it would send for a rejection.

use registry_proto::http1::{parse_request, Limits};
use registry_proto::naming::beat::BeatRequest;
use registry_proto::naming::instance::{InstanceKey, InstancePatch, InstanceRequest};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::route::{route, Route};
use registry_proto::naming::service::{ServiceKey, ServiceListRequest, ServiceRequest};
use registry_proto::naming::ParseLimits;
use registry_proto::params::Params;
use registry_proto::ProtoError;

fn answer_with(wire: &[u8], limits: &Limits, pl: &ParseLimits) -> (u16, String) {
    let (req, _) = match parse_request(wire, limits) {
        Ok(Some(r)) => r,
        Ok(None) => panic!("incomplete request"),
        Err(e) => return (e.status(), e.to_string()),
    };
    let r = match route(req.method, req.path) {
        Ok(r) => r,
        Err(e) => return (e.status(), e.to_string()),
    };
    let p = match Params::from_request(&req) {
        Ok(p) => p,
        Err(e) => return (e.status(), e.to_string()),
    };
    let res: Result<(), ProtoError> = match r {
        Route::InstanceRegister | Route::InstanceUpdate => InstanceRequest::parse(&p, pl).map(drop),
        Route::InstanceDeregister | Route::InstanceDetail => InstanceKey::parse(&p, pl).map(drop),
        Route::InstancePatch => InstancePatch::parse(&p, pl).map(drop),
        Route::InstanceBeat => BeatRequest::parse(&p, pl).map(drop),
        Route::InstanceList => ListRequest::parse(&p, pl).map(drop),
        Route::ServiceCreate => ServiceRequest::parse_create(&p, pl).map(drop),
        Route::ServiceUpdate => ServiceRequest::parse_update(&p, pl).map(drop),
        Route::ServiceDelete | Route::ServiceDetail => ServiceKey::parse(&p, pl).map(drop),
        Route::ServiceList => ServiceListRequest::parse(&p, pl).map(drop),
        _ => Ok(()),
    };
    match res {
        Ok(()) => (200, "ok".to_owned()),
        Err(e) => (e.status(), e.to_string()),
    }
}

fn answer(method: &str, path: &str, query: &str) -> (u16, String) {
    let wire = format!("{method} {path}?{query} HTTP/1.1\r\nHost: h\r\n\r\n");
    answer_with(wire.as_bytes(), &Limits::default(), &ParseLimits::default())
}

const INSTANCE: &str = "/nacos/v1/ns/instance";
const OK_ID: &str = "serviceName=svc&ip=1.2.3.4&port=80";

#[track_caller]
fn check(method: &str, path: &str, query: &str, status: u16, text: &str) {
    assert_eq!(
        answer(method, path, query),
        (status, text.to_owned()),
        "{method} {path}?{query}"
    );
}

#[test]
fn baseline_is_accepted() {
    for m in ["POST", "PUT", "PATCH", "DELETE", "GET"] {
        check(m, INSTANCE, OK_ID, 200, "ok");
    }
}

#[test]
fn missing_and_empty_parameters() {
    for q in [
        "ip=1.2.3.4&port=80",
        "serviceName=&ip=1.2.3.4&port=80",
        "serviceName=+&ip=1.2.3.4&port=80",
    ] {
        check("POST", INSTANCE, q, 400, "Param 'serviceName' is required.");
    }
    for q in ["serviceName=s&port=80", "serviceName=s&ip=&port=80"] {
        check("POST", INSTANCE, q, 400, "Param 'ip' is required.");
    }
    check(
        "DELETE",
        INSTANCE,
        "serviceName=s&ip=1.1.1.1",
        400,
        "Param 'port' is required.",
    );
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "ip=1.1.1.1&port=1",
        400,
        "Param 'serviceName' is required.",
    );
    check(
        "PUT",
        "/nacos/v1/ns/service",
        "serviceName=s",
        400,
        "Param 'protectThreshold' is required.",
    );
    check(
        "GET",
        "/nacos/v1/ns/service/list",
        "pageSize=1",
        400,
        "Param 'pageNo' is required.",
    );
}

#[test]
fn bad_ports() {
    check(
        "POST",
        INSTANCE,
        "serviceName=s&ip=1.1.1.1&port=abc",
        400,
        "For input string: \"abc\"",
    );
    check(
        "POST",
        INSTANCE,
        "serviceName=s&ip=1.1.1.1&port=70000",
        400,
        "Param 'port' is illegal, it should be between 0 and 65535, current: 70000",
    );
    check(
        "POST",
        INSTANCE,
        "serviceName=s&ip=1.1.1.1&port=-1",
        400,
        "Param 'port' is illegal, it should be between 0 and 65535, current: -1",
    );
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "serviceName=s&ip=1.1.1.1&port=8o",
        400,
        "For input string: \"8o\"",
    );
}

#[test]
fn bad_ip() {
    check(
        "POST",
        INSTANCE,
        "serviceName=s&ip=999.1.1.1&port=1",
        400,
        "instance format invalid: Your IP address is spelled incorrectly",
    );
}

#[test]
fn bad_weights() {
    for w in ["NaN", "-1", "10001"] {
        check(
            "POST",
            INSTANCE,
            &format!("{OK_ID}&weight={w}"),
            400,
            "instance format invalid: The weights range from 0.0 to 10000.0",
        );
    }
    check(
        "PATCH",
        INSTANCE,
        &format!("{OK_ID}&weight=x"),
        400,
        "For input string: \"x\"",
    );
}

#[test]
fn bad_service_names() {
    check(
        "POST",
        INSTANCE,
        "serviceName=a+b&ip=1.1.1.1&port=1",
        400,
        "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a b",
    );
    check(
        "GET",
        "/nacos/v1/ns/instance/list",
        "serviceName=%E6%9C%8D%E5%8A%A1",
        400,
        "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@服务",
    );
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "serviceName=G%40%40&ip=1.1.1.1&port=1",
        400,
        "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
    );
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "serviceName=%40%40svc&ip=1.1.1.1&port=1",
        400,
        "Param 'serviceName' is illegal, groupName can't be empty",
    );
    check(
        "POST",
        INSTANCE,
        &format!("{OK_ID}&clusterName=c_1"),
        400,
        "cluster name can only have these characters: 0-9a-zA-Z-, current: c_1",
    );
}

#[test]
fn bad_metadata() {
    for m in ["k", "a%3Db%3Dc", "%7B%22a%22%3A%7B%7D%7D"] {
        let decoded = Params::parse(&format!("m={m}"), None)
            .unwrap()
            .get("m")
            .unwrap()
            .to_owned();
        check(
            "POST",
            INSTANCE,
            &format!("{OK_ID}&metadata={m}"),
            400,
            &format!("metadata format incorrect:{decoded}"),
        );
    }
}

#[test]
fn malformed_beat_json() {
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "serviceName=s&beat=%7B%22ip%22%3A",
        400,
        "Param 'beat' is illegal: EOF while parsing a value at line 1 column 6",
    );
    check(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        "serviceName=s&beat=%7B%22port%22%3Atrue%7D",
        400,
        "Param 'beat' is illegal: invalid type: boolean `true`, expected an integer at line 1 column 12",
    );
}

#[test]
fn bad_encodings() {
    check(
        "POST",
        INSTANCE,
        "serviceName=%zz",
        400,
        "request parameters have an invalid percent-encoding",
    );
    check(
        "POST",
        INSTANCE,
        "serviceName=%ff",
        400,
        "request parameters are not valid UTF-8",
    );
    check(
        "POST",
        INSTANCE,
        "serviceName=%",
        400,
        "request parameters have an invalid percent-encoding",
    );
}

#[test]
fn routing_errors() {
    check(
        "GET",
        "/nacos/v1/ns/instance/nope",
        "",
        501,
        "no such api:GET:/nacos/v1/ns/instance/nope",
    );
    check(
        "POST",
        "/nacos/v1/ns/instance/list",
        "",
        405,
        "no such api:POST:/nacos/v1/ns/instance/list",
    );
    check("GET", "/elsewhere", "", 404, "Not Found: /elsewhere");
}

#[test]
fn oversized_inputs() {
    let limits = Limits::default();
    let pl = ParseLimits::default();
    let long_url = format!(
        "GET /nacos/v1/ns/instance/list?serviceName={} HTTP/1.1\r\n\r\n",
        "s".repeat(9000)
    );
    assert_eq!(answer_with(long_url.as_bytes(), &limits, &pl).0, 414);
    let big_body = "POST /nacos/v1/ns/instance HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n";
    assert_eq!(
        answer_with(big_body.as_bytes(), &limits, &pl),
        (413, "payload too large".to_owned())
    );
    let big_head = format!("GET / HTTP/1.1\r\nCookie: {}\r\n\r\n", "c".repeat(20_000));
    assert_eq!(answer_with(big_head.as_bytes(), &limits, &pl).0, 431);

    // Metadata over the configured bound, sent in a form body (the URL would be 414).
    let meta = "k=".to_owned() + &"v".repeat(17 * 1024);
    let body = format!("{OK_ID}&metadata={meta}");
    let wire = format!(
        "POST /nacos/v1/ns/instance HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(
        answer_with(wire.as_bytes(), &limits, &pl),
        (
            400,
            format!(
                "Param 'metadata' is too long: {} bytes, the limit is 16384",
                meta.len()
            )
        )
    );
    let many = (0..200)
        .map(|i| format!("k{i}=v"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        answer("POST", INSTANCE, &format!("{OK_ID}&metadata={many}")),
        (
            400,
            "metadata has too many entries: 200, the limit is 128".to_owned()
        )
    );
    let long_name = "s".repeat(600);
    assert_eq!(
        answer(
            "POST",
            INSTANCE,
            &format!("serviceName={long_name}&ip=1.1.1.1&port=1")
        ),
        (
            400,
            "Param 'serviceName' is too long: 615 bytes, the limit is 512".to_owned()
        )
    );
}
