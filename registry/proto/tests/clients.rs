//! The exact requests the real clients send (captured on the wire, nacos-clients.md),
//! re-encoded the way each client's library encodes them, framed by `parse_request`
//! and read into typed requests.

use registry_proto::http1::{parse_request, Limits, Method, Request};
use registry_proto::naming::beat::BeatRequest;
use registry_proto::naming::instance::{InstanceKey, InstanceRequest};
use registry_proto::naming::list::ListRequest;
use registry_proto::naming::route::{route, Route};
use registry_proto::naming::service::ServiceListRequest;
use registry_proto::naming::ParseLimits;
use registry_proto::params::Params;

/// Python's `urllib.parse.urlencode` (`quote_plus`: space is `+`, safe `_.-~`).
fn python_urlencode(pairs: &[(&str, &str)]) -> String {
    encode(
        pairs,
        |b| b.is_ascii_alphanumeric() || b"_.-~".contains(&b),
        true,
    )
}

/// Node's `querystring.stringify` (`encodeURIComponent`-like, safe `-_.!~*'()`).
fn node_stringify(pairs: &[(&str, &str)]) -> String {
    encode(
        pairs,
        |b| b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b),
        false,
    )
}

fn encode(pairs: &[(&str, &str)], safe: impl Fn(u8) -> bool, plus: bool) -> String {
    let enc = |s: &str| {
        let mut o = String::new();
        for b in s.bytes() {
            if safe(b) {
                o.push(b as char);
            } else if plus && b == b' ' {
                o.push('+');
            } else {
                o.push_str(&format!("%{b:02X}"));
            }
        }
        o
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Frames `wire` as one request and hands it to `f`.
fn with_request<R>(wire: &[u8], f: impl FnOnce(&Request<'_>) -> R) -> R {
    let (req, used) = parse_request(wire, &Limits::default())
        .expect("frames")
        .expect("complete");
    assert_eq!(used, wire.len());
    f(&req)
}

fn python_request(method: &str, path: &str, pairs: &[(&str, &str)]) -> Vec<u8> {
    format!(
        "{method} {path}?{} HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: 127.0.0.1:8848\r\n\
User-Agent: Nacos-Python-Client:v1.0.0\r\nConnection: close\r\n\r\n",
        python_urlencode(pairs)
    )
    .into_bytes()
}

fn node_request(method: &str, path: &str, pairs: &[(&str, &str)]) -> Vec<u8> {
    format!(
        "{method} {path}?{} HTTP/1.1\r\nUser-Agent: Nacos-Java-Client:v1.0.0\r\n\
Client-Version: Nacos-Java-Client:v1.0.0\r\nRequest-Module: Naming\r\n\
Accept-Encoding: gzip,deflate,sdch\r\nRequestId: 1b4e28ba-2fa1-11d2-883f-0016d3cca427\r\n\
Host: 127.0.0.1:8848\r\nConnection: keep-alive\r\n\r\n",
        node_stringify(pairs)
    )
    .into_bytes()
}

fn limits() -> ParseLimits {
    ParseLimits::default()
}

#[test]
fn python_register_default_cluster() {
    let wire = python_request(
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("ip", "127.0.0.1"),
            ("port", "8080"),
            ("serviceName", "demo"),
            ("weight", "1.0"),
            ("enable", "True"),
            ("healthy", "True"),
            ("clusterName", "None"),
            ("ephemeral", "True"),
            ("groupName", "DEFAULT_GROUP"),
            ("metadata", r#"{"k": "v"}"#),
            ("namespaceId", "public"),
        ],
    );
    with_request(&wire, |req| {
        assert!(!req.keep_alive, "Python closes every connection");
        assert_eq!(req.user_agent(), Some("Nacos-Python-Client:v1.0.0"));
        assert_eq!(route(req.method, req.path), Ok(Route::InstanceRegister));
        let p = Params::from_request(req).unwrap();
        let r = InstanceRequest::parse(&p, &limits()).unwrap();
        assert_eq!(r.key.service.to_string(), "DEFAULT_GROUP@@demo");
        assert_eq!(r.key.cluster, "DEFAULT", "clusterName=None means DEFAULT");
        assert_eq!((r.key.ip, r.key.port), ("127.0.0.1", 8080));
        assert_eq!(r.key.ephemeral, Some(true));
        assert_eq!((r.weight, r.enabled, r.healthy), (1.0, true, true));
        assert_eq!(r.metadata.iter().collect::<Vec<_>>(), [("k", "v")]);
        assert_eq!(r.key.namespace_id, "public");
    });
}

#[test]
fn python_register_grouped_persistent() {
    let wire = python_request(
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("ip", "127.0.0.1"),
            ("port", "8081"),
            ("serviceName", "demo"),
            ("weight", "1.0"),
            ("enable", "False"),
            ("healthy", "False"),
            ("clusterName", "c1"),
            ("ephemeral", "False"),
            ("groupName", "G1"),
            ("namespaceId", "public"),
        ],
    );
    with_request(&wire, |req| {
        let p = Params::from_request(req).unwrap();
        let r = InstanceRequest::parse(&p, &limits()).unwrap();
        assert_eq!(r.key.service.to_string(), "G1@@demo");
        assert_eq!(r.key.cluster, "c1");
        assert_eq!(r.key.ephemeral, Some(false));
        assert!(!r.enabled && !r.healthy);
        assert!(r.metadata.is_empty());
        assert_eq!(r.key.instance_id(), "127.0.0.1#8081#c1#G1@@demo");
    });
}

#[test]
fn python_deregister_modify_and_detail() {
    let del = python_request(
        "DELETE",
        "/nacos/v1/ns/instance",
        &[
            ("ip", "127.0.0.1"),
            ("port", "8080"),
            ("serviceName", "demo"),
            ("ephemeral", "True"),
            ("groupName", "DEFAULT_GROUP"),
            ("namespaceId", "public"),
        ],
    );
    with_request(&del, |req| {
        assert_eq!(route(req.method, req.path), Ok(Route::InstanceDeregister));
        let p = Params::from_request(req).unwrap();
        let k = InstanceKey::parse(&p, &limits()).unwrap();
        assert_eq!(
            k.instance_id(),
            "127.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@demo"
        );
    });
    let modify = python_request(
        "PUT",
        "/nacos/v1/ns/instance",
        &[
            ("ip", "127.0.0.1"),
            ("port", "8080"),
            ("serviceName", "demo"),
            ("ephemeral", "True"),
            ("groupName", "DEFAULT_GROUP"),
            ("weight", "2.0"),
            ("namespaceId", "public"),
        ],
    );
    with_request(&modify, |req| {
        assert_eq!(route(req.method, req.path), Ok(Route::InstanceUpdate));
        let p = Params::from_request(req).unwrap();
        let r = InstanceRequest::parse(&p, &limits()).unwrap();
        assert_eq!(r.weight, 2.0);
        assert!(r.enabled, "absent enabled/enable means true");
    });
    let detail = python_request(
        "GET",
        "/nacos/v1/ns/instance",
        &[
            ("serviceName", "demo"),
            ("ip", "127.0.0.1"),
            ("port", "8080"),
            ("namespaceId", "public"),
            ("cluster", "X"),
            ("clusterName", "X"),
        ],
    );
    with_request(&detail, |req| {
        assert_eq!(route(req.method, req.path), Ok(Route::InstanceDetail));
        let p = Params::from_request(req).unwrap();
        assert_eq!(InstanceKey::parse(&p, &limits()).unwrap().cluster, "X");
    });
}

#[test]
fn python_list_and_beat() {
    let list = python_request(
        "GET",
        "/nacos/v1/ns/instance/list",
        &[
            ("serviceName", "demo"),
            ("healthyOnly", "False"),
            ("namespaceId", "public"),
            ("groupName", "DEFAULT_GROUP"),
        ],
    );
    with_request(&list, |req| {
        let p = Params::from_request(req).unwrap();
        let l = ListRequest::parse(&p, &limits()).unwrap();
        assert_eq!(l.service.to_string(), "DEFAULT_GROUP@@demo");
        assert!(!l.healthy_only);
        assert_eq!((l.udp_port, l.clusters), (0, ""));
    });
    let beat_json = r#"{"serviceName": "DEFAULT_GROUP@@demo", "ip": "127.0.0.1", "port": 8080, "weight": 1.0, "ephemeral": true, "metadata": {"k": "v"}}"#;
    let beat = python_request(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        &[
            ("serviceName", "DEFAULT_GROUP@@demo"),
            ("beat", beat_json),
            ("groupName", "DEFAULT_GROUP"),
            ("namespaceId", "public"),
        ],
    );
    with_request(&beat, |req| {
        assert_eq!(route(req.method, req.path), Ok(Route::InstanceBeat));
        let p = Params::from_request(req).unwrap();
        let b = BeatRequest::parse(&p, &limits()).unwrap();
        assert_eq!(b.service.to_string(), "DEFAULT_GROUP@@demo");
        assert_eq!(
            (&*b.ip, b.port, &*b.cluster),
            ("127.0.0.1", 8080, "DEFAULT")
        );
        let info = b.beat.unwrap().info(&Default::default()).unwrap();
        assert_eq!((info.weight, info.ephemeral), (1.0, true));
        assert_eq!(info.metadata.get("k"), Some("v"));
        assert_eq!(info.service_name, "DEFAULT_GROUP@@demo");
    });
}

#[test]
fn node_register_deregister_subscribe() {
    let reg = node_request(
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("namespaceId", "public"),
            ("serviceName", "DEFAULT_GROUP@@demo"),
            ("groupName", "DEFAULT_GROUP"),
            ("clusterName", "DEFAULT"),
            ("ip", "127.0.0.1"),
            ("port", "8080"),
            ("weight", "1"),
            ("enable", "true"),
            ("healthy", "true"),
            ("ephemeral", "true"),
            ("metadata", r#"{"k":"v"}"#),
        ],
    );
    with_request(&reg, |req| {
        assert!(req.keep_alive);
        let p = Params::from_request(req).unwrap();
        let r = InstanceRequest::parse(&p, &limits()).unwrap();
        assert_eq!(r.key.service.to_string(), "DEFAULT_GROUP@@demo");
        assert_eq!(r.weight, 1.0);
        assert_eq!(r.metadata.get("k"), Some("v"));
    });
    let del = node_request(
        "DELETE",
        "/nacos/v1/ns/instance",
        &[
            ("namespaceId", "public"),
            ("serviceName", "DEFAULT_GROUP@@demo"),
            ("clusterName", "DEFAULT"),
            ("ip", "127.0.0.1"),
            ("port", "8081"),
            ("ephemeral", "true"),
        ],
    );
    with_request(&del, |req| {
        let p = Params::from_request(req).unwrap();
        let k = InstanceKey::parse(&p, &limits()).unwrap();
        assert_eq!(
            k.service.to_string(),
            "DEFAULT_GROUP@@demo",
            "no groupName needed"
        );
        assert_eq!(k.port, 8081);
    });
    for (clusters, want) in [("DEFAULT", "DEFAULT"), ("", "")] {
        let sub = node_request(
            "GET",
            "/nacos/v1/ns/instance/list",
            &[
                ("namespaceId", "public"),
                ("serviceName", "DEFAULT_GROUP@@demo"),
                ("clusters", clusters),
                ("udpPort", "47319"),
                ("clientIP", "192.0.2.2"),
                ("healthyOnly", "false"),
            ],
        );
        with_request(&sub, |req| {
            let p = Params::from_request(req).unwrap();
            let l = ListRequest::parse(&p, &limits()).unwrap();
            assert_eq!(l.clusters, want, "echoed exactly");
            assert_eq!((l.udp_port, l.client_ip), (47319, "192.0.2.2"));
        });
    }
}

#[test]
fn node_beat_metrics_and_service_list() {
    let beat = node_request(
        "PUT",
        "/nacos/v1/ns/instance/beat",
        &[
            (
                "beat",
                r#"{"serviceName":"G1@@demo","ip":"127.0.0.1","port":9090,"cluster":"c1","weight":1,"metadata":{},"scheduled":true}"#,
            ),
            ("namespaceId", "public"),
            ("serviceName", "G1@@demo"),
        ],
    );
    with_request(&beat, |req| {
        let p = Params::from_request(req).unwrap();
        let b = BeatRequest::parse(&p, &limits()).unwrap();
        assert_eq!((b.service.group, b.service.name), ("G1", "demo"));
        assert_eq!((&*b.ip, b.port, &*b.cluster), ("127.0.0.1", 9090, "c1"));
        assert!(b.beat.unwrap().info(&Default::default()).unwrap().scheduled);
    });
    let metrics = node_request(
        "GET",
        "/nacos/v1/ns/operator/metrics",
        &[("namespaceId", "public")],
    );
    with_request(&metrics, |req| {
        assert_eq!(route(req.method, req.path), Ok(Route::OperatorMetrics));
    });
    let list = node_request(
        "GET",
        "/nacos/v1/ns/service/list",
        &[
            ("pageNo", "1"),
            ("pageSize", "10"),
            ("namespaceId", "public"),
            ("groupName", "DEFAULT_GROUP"),
        ],
    );
    with_request(&list, |req| {
        let p = Params::from_request(req).unwrap();
        let l = ServiceListRequest::parse(&p, &limits()).unwrap();
        assert_eq!((l.page_no, l.page_size, l.group), (1, 10, "DEFAULT_GROUP"));
    });
}

#[test]
fn java_style_beat_with_form_body() {
    let body = format!(
        "beat={}",
        node_stringify(&[("", r#"{"cluster":"c1","ip":"127.0.0.1","metadata":{},"port":8080,"scheduled":true,"serviceName":"DEFAULT_GROUP@@svc","weight":1,"period":5000,"stopped":false}"#)])
            .trim_start_matches('=')
    );
    let wire = format!(
        "PUT /nacos/v1/ns/instance/beat?namespaceId=public&serviceName=DEFAULT_GROUP%40%40svc&clusterName=c1 HTTP/1.1\r\n\
Content-Type: application/x-www-form-urlencoded;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    with_request(wire.as_bytes(), |req| {
        assert_eq!(req.method, Method::Put);
        let p = Params::from_request(req).unwrap();
        let b = BeatRequest::parse(&p, &limits()).unwrap();
        assert_eq!((&*b.ip, b.port, &*b.cluster), ("127.0.0.1", 8080, "c1"));
        assert_eq!(
            b.beat.unwrap().info(&Default::default()).unwrap().period,
            5000
        );
    });
}

#[test]
fn metadata_kv_form() {
    let wire = python_request(
        "POST",
        "/nacos/v1/ns/instance",
        &[
            ("ip", "10.0.0.1"),
            ("port", "1"),
            ("serviceName", "svc"),
            ("metadata", "a=1,b=x y"),
        ],
    );
    with_request(&wire, |req| {
        let p = Params::from_request(req).unwrap();
        let r = InstanceRequest::parse(&p, &limits()).unwrap();
        assert_eq!(
            r.metadata.iter().collect::<Vec<_>>(),
            [("a", "1"), ("b", "x y")]
        );
    });
}

#[test]
fn body_parameters_are_ignored_unless_form() {
    let wire = b"POST /nacos/v1/ns/instance?serviceName=s HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\nip=1.1.1.1&port=8080&x";
    with_request(wire, |req| {
        let p = Params::from_request(req).unwrap();
        assert_eq!(
            InstanceRequest::parse(&p, &limits())
                .unwrap_err()
                .to_string(),
            "Param 'ip' is required."
        );
    });
}
