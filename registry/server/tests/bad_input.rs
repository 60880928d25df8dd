//! Malformed requests: every one gets a clear Nacos-style error (status and
//! exact text), changes nothing, and never stops the server. Ends with a
//! bounded random test (xorshift, fixed seeds) over real sockets.

use crate::common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::TestServer;
use registry_proto::http1::{parse_response, Method};
use registry_proto::params::percent_encode_into;
use registry_server::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "/nacos/v1/ns";

fn enc(s: &str) -> String {
    let mut out = String::new();
    percent_encode_into(&mut out, s);
    out
}

/// Limits small enough to cross cheaply.
fn small_limits() -> Config {
    Config {
        max_url_bytes: 1024,
        max_header_bytes: 2048,
        max_body_bytes: 4096,
        max_metadata_bytes: 64,
        ..Config::for_test()
    }
}

/// Everything a bad request must leave alone: the counts, every service
/// name, and the seeded service's full list (minus `lastRefTime`).
async fn fingerprint(server: &TestServer) -> String {
    let m = server
        .call(Method::Get, &format!("{NS}/operator/metrics"))
        .await
        .json();
    let names = server
        .call(
            Method::Get,
            &format!("{NS}/service/list?pageNo=1&pageSize=1000&groupName=*"),
        )
        .await
        .body;
    let mut l = server
        .call(Method::Get, &format!("{NS}/instance/list?serviceName=seed"))
        .await
        .json();
    l.as_object_mut().unwrap().remove("lastRefTime");
    let svc = server
        .call(Method::Get, &format!("{NS}/service?serviceName=seed"))
        .await
        .body;
    format!(
        "services={} instances={} names={names} seed={l} detail={svc}",
        m["serviceCount"], m["instanceCount"]
    )
}

/// A server with one known service `seed` holding 10.0.0.1:80.
async fn seeded(config: Config) -> (TestServer, String) {
    let server = TestServer::with(config).await;
    let r = server
        .call(
            Method::Post,
            &format!("{NS}/service?serviceName=seed&protectThreshold=0.2&metadata=s%3D1"),
        )
        .await;
    assert_eq!(r.body, "ok");
    let r = server
        .call(
            Method::Post,
            &format!("{NS}/instance?serviceName=seed&ip=10.0.0.1&port=80&weight=2&metadata=k%3Dv"),
        )
        .await;
    assert_eq!(r.body, "ok");
    let fp = fingerprint(&server).await;
    (server, fp)
}

/// A good request still works.
async fn still_serves(server: &TestServer) {
    let r = server
        .call(
            Method::Get,
            &format!("{NS}/instance?serviceName=seed&ip=10.0.0.1&port=80"),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["weight"], 2.0);
}

/// How a case's body must match.
enum Text {
    Exact(&'static str),
    Prefix(&'static str),
}

struct Case {
    method: Method,
    target: String,
    form: Option<String>,
    status: u16,
    text: Text,
}

fn case(method: Method, target: impl Into<String>, status: u16, text: &'static str) -> Case {
    Case {
        method,
        target: target.into(),
        form: None,
        status,
        text: Text::Exact(text),
    }
}

/// Runs every case on its own connection and reports all mismatches at once.
async fn run_cases(server: &TestServer, before: &str, cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let r = match &c.form {
            Some(f) => server.call_form(c.method, &c.target, f).await,
            None => server.call(c.method, &c.target).await,
        };
        let text_ok = match &c.text {
            Text::Exact(t) => r.body == *t,
            Text::Prefix(t) => r.body.starts_with(t),
        };
        if r.status != c.status || !text_ok {
            let (Text::Exact(want) | Text::Prefix(want)) = &c.text;
            failures.push(format!(
                "{:?} {}: got {} {:?}, want {} {:?}",
                c.method, c.target, r.status, r.body, c.status, want
            ));
        }
        let after = fingerprint(server).await;
        if after != before {
            failures.push(format!(
                "{:?} {} changed state:\n  before {before}\n  after  {after}",
                c.method, c.target
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    still_serves(server).await;
}

// ----- parameters ------------------------------------------------------------

const REQ_SERVICE: &str = "Param 'serviceName' is required.";
const REQ_IP: &str = "Param 'ip' is required.";
const REQ_PORT: &str = "Param 'port' is required.";
const BAD_IP: &str = "instance format invalid: Your IP address is spelled incorrectly";
const BAD_WEIGHT: &str = "instance format invalid: The weights range from 0.0 to 10000.0";
const BAD_TIMEOUT: &str =
    "metadata preserved.heart.beat.timeout must be a positive number of milliseconds";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_and_update_parameters() {
    let (server, before) = seeded(small_limits()).await;
    let mut cases = Vec::new();
    // Register (POST) and the upserting/strict update (PUT) validate alike.
    for m in [Method::Post, Method::Put] {
        let t = |q: &str| format!("{NS}/instance?{q}");
        cases.extend([
            case(m, t("ip=10.0.0.2&port=80"), 400, REQ_SERVICE),
            case(m, t("serviceName=&ip=10.0.0.2&port=80"), 400, REQ_SERVICE),
            case(m, t("serviceName=+&ip=10.0.0.2&port=80"), 400, REQ_SERVICE),
            case(m, t("serviceName=seed&port=80"), 400, REQ_IP),
            case(m, t("serviceName=seed&ip=&port=80"), 400, REQ_IP),
            case(m, t("serviceName=seed&ip=10.0.0.2"), 400, REQ_PORT),
            case(m, t("serviceName=seed&ip=10.0.0.2&port="), 400, REQ_PORT),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=abc"),
                400,
                "For input string: \"abc\"",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=8080.0"),
                400,
                "For input string: \"8080.0\"",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=99999999999"),
                400,
                "For input string: \"99999999999\"",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=70000"),
                400,
                "Param 'port' is illegal, it should be between 0 and 65535, current: 70000",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=-1"),
                400,
                "Param 'port' is illegal, it should be between 0 and 65535, current: -1",
            ),
            case(m, t("serviceName=seed&ip=999.1.1.1&port=80"), 400, BAD_IP),
            case(m, t("serviceName=seed&ip=1.2.3&port=80"), 400, BAD_IP),
            case(m, t("serviceName=seed&ip=1.2.3.4.5&port=80"), 400, BAD_IP),
            case(m, t("serviceName=seed&ip=a%23b&port=80"), 400, BAD_IP),
            case(m, t("serviceName=seed&ip=1%3A2%3A3&port=80"), 400, BAD_IP),
            case(m, t("serviceName=seed&ip=10.0.0.1&port=80&weight=NaN"), 400, BAD_WEIGHT),
            case(m, t("serviceName=seed&ip=10.0.0.1&port=80&weight=-1"), 400, BAD_WEIGHT),
            case(m, t("serviceName=seed&ip=10.0.0.1&port=80&weight=10001"), 400, BAD_WEIGHT),
            case(m, t("serviceName=seed&ip=10.0.0.1&port=80&weight=Infinity"), 400, BAD_WEIGHT),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=80&weight=heavy"),
                400,
                "For input string: \"heavy\"",
            ),
            case(
                m,
                t("serviceName=a%20b&ip=10.0.0.2&port=80"),
                400,
                "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a b",
            ),
            case(
                m,
                t("serviceName=a%2Fb&ip=10.0.0.2&port=80"),
                400,
                "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a/b",
            ),
            case(
                m,
                t("serviceName=s&groupName=g%2Fh&ip=10.0.0.2&port=80"),
                400,
                "dom name can only have these characters: 0-9a-zA-Z-._:, current: g/h@@s",
            ),
            case(
                m,
                t("serviceName=G%40%40&ip=10.0.0.2&port=80"),
                400,
                "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
            ),
            case(
                m,
                t("serviceName=%40%40&ip=10.0.0.2&port=80"),
                400,
                "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
            ),
            case(
                m,
                t("serviceName=%40%40svc&ip=10.0.0.2&port=80"),
                400,
                "Param 'serviceName' is illegal, groupName can't be empty",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=80&clusterName=c_1"),
                400,
                "cluster name can only have these characters: 0-9a-zA-Z-, current: c_1",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=80&metadata=abc"),
                400,
                "metadata format incorrect:abc",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=80&metadata=k%3Dv%2Cbad"),
                400,
                "metadata format incorrect:k=v,bad",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=80&metadata=%7B%22k%22"),
                400,
                "metadata format incorrect:{\"k\"",
            ),
            case(
                m,
                t(&format!(
                    "serviceName=seed&ip=10.0.0.1&port=80&metadata={}",
                    enc(r#"{"preserved.heart.beat.timeout":"abc"}"#)
                )),
                400,
                BAD_TIMEOUT,
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=80&metadata=preserved.heart.beat.timeout%3D0"),
                400,
                BAD_TIMEOUT,
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.9&port=80&metadata=preserved.heart.beat.timeout%3D-5"),
                400,
                BAD_TIMEOUT,
            ),
            case(
                m,
                t(&format!(
                    "serviceName=seed&ip=10.0.0.1&port=80&metadata={}",
                    enc(&format!(r#"{{"k":"{}"}}"#, "v".repeat(100)))
                )),
                400,
                "Param 'metadata' is too long: 108 bytes, the limit is 64",
            ),
            case(
                m,
                t(&format!("serviceName={}&ip=10.0.0.2&port=80", "x".repeat(600))),
                400,
                "Param 'serviceName' is too long: 615 bytes, the limit is 512",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=80&metadata=%zz"),
                400,
                "request parameters have an invalid percent-encoding",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.2&port=8%"),
                400,
                "request parameters have an invalid percent-encoding",
            ),
            case(
                m,
                t("serviceName=seed%ff&ip=10.0.0.2&port=80"),
                400,
                "request parameters are not valid UTF-8",
            ),
        ]);
        // The same mistakes in a form body.
        for (form, text) in [
            ("serviceName=seed&ip=10.0.0.2", REQ_PORT),
            ("serviceName=seed&ip=999.1.1.1&port=80", BAD_IP),
            (
                "serviceName=seed&ip=10.0.0.1&port=80&weight=%zz",
                "request parameters have an invalid percent-encoding",
            ),
        ] {
            cases.push(Case {
                form: Some(form.to_owned()),
                ..case(m, format!("{NS}/instance"), 400, text)
            });
        }
        cases.push(Case {
            form: Some("serviceName=seed&ip=10.0.0.1&port=80&x=\u{7f}%ff".to_owned()),
            ..case(
                m,
                format!("{NS}/instance"),
                400,
                "request parameters are not valid UTF-8",
            )
        });
    }
    run_cases(&server, &before, cases).await;
}

/// A metadata key the core refuses (empty) still gets a Nacos-style text that
/// echoes the input, not a Rust `Debug` dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_with_an_empty_key_is_refused_with_a_readable_text() {
    let (server, before) = seeded(small_limits()).await;
    let r = server
        .call(
            Method::Post,
            &format!("{NS}/instance?serviceName=seed&ip=10.0.0.1&port=80&metadata=%3Dv"),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.starts_with("metadata format incorrect:"),
        "{}",
        r.body
    );
    assert!(
        !r.body.contains("Metadata(") && !r.body.contains("[(\""),
        "error text leaks a Rust Debug dump: {}",
        r.body
    );
    assert_eq!(fingerprint(&server).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_parameters_of_delete_get_and_patch() {
    let (server, before) = seeded(small_limits()).await;
    let mut cases = Vec::new();
    for m in [Method::Delete, Method::Get, Method::Patch] {
        let t = |q: &str| format!("{NS}/instance?{q}");
        cases.extend([
            case(m, t("ip=10.0.0.1&port=80"), 400, REQ_SERVICE),
            case(m, t("serviceName=seed&port=80"), 400, REQ_IP),
            case(m, t("serviceName=seed&ip=10.0.0.1"), 400, REQ_PORT),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=abc"),
                400,
                "For input string: \"abc\"",
            ),
            case(
                m,
                t("serviceName=seed&ip=10.0.0.1&port=70000"),
                400,
                "Param 'port' is illegal, it should be between 0 and 65535, current: 70000",
            ),
            case(m, t("serviceName=seed&ip=999.1.1.1&port=80"), 400, BAD_IP),
            case(
                m,
                t("serviceName=%40%40seed&ip=10.0.0.1&port=80"),
                400,
                "Param 'serviceName' is illegal, groupName can't be empty",
            ),
        ]);
    }
    let t = |q: &str| format!("{NS}/instance?{q}");
    cases.extend([
        case(
            Method::Patch,
            t("serviceName=seed&ip=10.0.0.1&port=80&weight=10001"),
            400,
            BAD_WEIGHT,
        ),
        case(
            Method::Patch,
            t("serviceName=seed&ip=10.0.0.1&port=80&weight=NaN"),
            400,
            BAD_WEIGHT,
        ),
        case(
            Method::Patch,
            t("serviceName=seed&ip=10.0.0.1&port=80&metadata=preserved.heart.beat.timeout%3Dsoon"),
            400,
            BAD_TIMEOUT,
        ),
        case(
            Method::Patch,
            t("serviceName=seed&ip=10.0.0.1&port=80&metadata=abc"),
            400,
            "metadata format incorrect:abc",
        ),
    ]);
    run_cases(&server, &before, cases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beat_parameters() {
    let (server, before) = seeded(small_limits()).await;
    let t = |q: &str| format!("{NS}/instance/beat?{q}");
    let beat = |json: &str| t(&format!("serviceName=seed&beat={}", enc(json)));
    let cases = vec![
        case(Method::Put, t("ip=10.0.0.1&port=80"), 400, REQ_SERVICE),
        case(Method::Put, t("serviceName=seed&port=80"), 400, REQ_IP),
        case(
            Method::Put,
            t("serviceName=seed&ip=10.0.0.1"),
            400,
            REQ_PORT,
        ),
        case(
            Method::Put,
            t("serviceName=seed&ip=10.0.0.1&port=x"),
            400,
            "For input string: \"x\"",
        ),
        case(
            Method::Put,
            t("serviceName=seed&ip=999.1.1.1&port=80"),
            400,
            BAD_IP,
        ),
        Case {
            text: Text::Prefix("Param 'beat' is illegal: "),
            ..case(Method::Put, beat("{"), 400, "")
        },
        Case {
            text: Text::Prefix("Param 'beat' is illegal: "),
            ..case(
                Method::Put,
                beat(r#"{"ip":"10.0.0.2","port":"eighty"}"#),
                400,
                "",
            )
        },
        case(
            Method::Put,
            beat("[1,2]"),
            400,
            "Param 'beat' is illegal: expected a JSON object",
        ),
        case(
            Method::Put,
            beat(r#"{"ip":"999.1.1.1","port":80}"#),
            400,
            BAD_IP,
        ),
        case(
            Method::Put,
            beat(r#"{"ip":"10.0.0.2","port":70000}"#),
            400,
            "Param 'port' is illegal, it should be between 0 and 65535, current: 70000",
        ),
        case(
            Method::Put,
            beat(r#"{"ip":"10.0.0.2","port":80,"weight":10001}"#),
            400,
            BAD_WEIGHT,
        ),
        case(
            Method::Put,
            beat(r#"{"ip":"10.0.0.2","port":80,"cluster":"c_1"}"#),
            400,
            "cluster name can only have these characters: 0-9a-zA-Z-, current: c_1",
        ),
        // An unknown instance would be registered from the body: a bad
        // preserved timeout must refuse it, not half-register it.
        case(
            Method::Put,
            beat(
                r#"{"ip":"10.0.0.2","port":80,"metadata":{"preserved.heart.beat.timeout":"abc"}}"#,
            ),
            400,
            BAD_TIMEOUT,
        ),
        case(
            Method::Put,
            t("serviceName=seed&ip=10.0.0.1&port=80&beat=%zz"),
            400,
            "request parameters have an invalid percent-encoding",
        ),
        Case {
            form: Some("beat=%7B%22ip%22%3A%22999.1.1.1%22%2C%22port%22%3A80%7D".to_owned()),
            ..case(Method::Put, t("serviceName=seed"), 400, BAD_IP)
        },
    ];
    run_cases(&server, &before, cases).await;
    // A valid light beat for the seeded instance changes nothing visible either.
    let r = server
        .call(Method::Put, &t("serviceName=seed&ip=10.0.0.1&port=80"))
        .await;
    assert!(r.body.contains("10200"), "{}", r.body);
    assert_eq!(fingerprint(&server).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_service_and_service_list_parameters() {
    let (server, before) = seeded(small_limits()).await;
    let l = |q: &str| format!("{NS}/instance/list?{q}");
    let s = |q: &str| format!("{NS}/service?{q}");
    let sl = |q: &str| format!("{NS}/service/list?{q}");
    let cases = vec![
        case(Method::Get, l(""), 400, REQ_SERVICE),
        case(Method::Get, l("serviceName="), 400, REQ_SERVICE),
        case(
            Method::Get,
            l("serviceName=seed&udpPort=abc"),
            400,
            "For input string: \"abc\"",
        ),
        case(
            Method::Get,
            l("serviceName=seed&udpPort=70000"),
            400,
            "Param 'udpPort' is illegal, it should be between 0 and 65535, current: 70000",
        ),
        case(
            Method::Get,
            l("serviceName=G%40%40"),
            400,
            "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
        ),
        case(
            Method::Get,
            l("serviceName=%ff"),
            400,
            "request parameters are not valid UTF-8",
        ),
        case(Method::Post, s(""), 400, REQ_SERVICE),
        case(
            Method::Post,
            s("serviceName=new&protectThreshold=abc"),
            400,
            "For input string: \"abc\"",
        ),
        case(
            Method::Post,
            s("serviceName=new&protectThreshold=2"),
            400,
            "protectThreshold must be within [0.0, 1.0]",
        ),
        case(
            Method::Post,
            s("serviceName=new&protectThreshold=-0.5"),
            400,
            "protectThreshold must be within [0.0, 1.0]",
        ),
        case(
            Method::Post,
            s("serviceName=new&metadata=abc"),
            400,
            "metadata format incorrect:abc",
        ),
        case(
            Method::Post,
            s(&format!(
                "serviceName=new&selector={}",
                enc(r#"{"type":"foo"}"#)
            )),
            400,
            "not match any type of selector!",
        ),
        case(
            Method::Post,
            s("serviceName=new&selector=xyz"),
            400,
            "selector format incorrect:xyz",
        ),
        case(
            Method::Post,
            s(&format!(
                "serviceName=new&selector={}",
                enc(r#"{"type":"label"}"#)
            )),
            400,
            "selector format incorrect:{\"type\":\"label\"}",
        ),
        case(
            Method::Post,
            s("serviceName=a%20b"),
            400,
            "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a b",
        ),
        case(
            Method::Put,
            s("serviceName=seed"),
            400,
            "Param 'protectThreshold' is required.",
        ),
        case(
            Method::Put,
            s("serviceName=seed&protectThreshold="),
            400,
            "Param 'protectThreshold' is required.",
        ),
        case(
            Method::Put,
            s("serviceName=seed&protectThreshold=NaN"),
            400,
            "For input string: \"NaN\"",
        ),
        case(
            Method::Put,
            s("serviceName=seed&protectThreshold=1.5"),
            400,
            "protectThreshold must be within [0.0, 1.0]",
        ),
        case(
            Method::Put,
            s("serviceName=seed&protectThreshold=0.5&metadata=abc"),
            400,
            "metadata format incorrect:abc",
        ),
        case(Method::Delete, s(""), 400, REQ_SERVICE),
        case(
            Method::Get,
            s("serviceName=%40%40x"),
            400,
            "Param 'serviceName' is illegal, groupName can't be empty",
        ),
        case(
            Method::Get,
            sl("pageSize=10"),
            400,
            "Param 'pageNo' is required.",
        ),
        case(
            Method::Get,
            sl("pageNo=1"),
            400,
            "Param 'pageSize' is required.",
        ),
        case(
            Method::Get,
            sl("pageNo=0&pageSize=10"),
            400,
            "Param 'pageNo' is illegal, it should be between 1 and 2147483647, current: 0",
        ),
        case(
            Method::Get,
            sl("pageNo=1&pageSize=-3"),
            400,
            "Param 'pageSize' is illegal, it should be between 1 and 2147483647, current: -3",
        ),
        case(
            Method::Get,
            sl("pageNo=abc&pageSize=10"),
            400,
            "For input string: \"abc\"",
        ),
    ];
    run_cases(&server, &before, cases).await;
}

// ----- routing ---------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_and_wrong_methods() {
    let (server, before) = seeded(small_limits()).await;
    let cases = vec![
        case(
            Method::Get,
            format!("{NS}/nope"),
            501,
            "no such api:GET:/nacos/v1/ns/nope",
        ),
        case(
            Method::Post,
            format!("{NS}/instance/nope?serviceName=seed"),
            501,
            "no such api:POST:/nacos/v1/ns/instance/nope",
        ),
        case(
            Method::Get,
            format!("{NS}/"),
            404,
            "Not Found: /nacos/v1/ns/",
        ),
        case(Method::Get, "/foo", 404, "Not Found: /foo"),
        case(Method::Get, "/", 404, "Not Found: /"),
        case(
            Method::Get,
            "/nacos/v1/nsx",
            404,
            "Not Found: /nacos/v1/nsx",
        ),
        case(
            Method::Get,
            format!("{NS}/instance/beat?serviceName=seed&ip=10.0.0.1&port=80"),
            405,
            "no such api:GET:/nacos/v1/ns/instance/beat",
        ),
        case(
            Method::Post,
            format!("{NS}/instance/list?serviceName=seed"),
            405,
            "no such api:POST:/nacos/v1/ns/instance/list",
        ),
        case(
            Method::Delete,
            format!("{NS}/service/list?pageNo=1&pageSize=1"),
            405,
            "no such api:DELETE:/nacos/v1/ns/service/list",
        ),
        case(
            Method::Patch,
            format!("{NS}/service?serviceName=seed"),
            405,
            "no such api:PATCH:/nacos/v1/ns/service",
        ),
        case(Method::Post, "/metrics", 405, "no such api:POST:/metrics"),
        case(
            Method::Get,
            "/nacos/v1/auth/login",
            405,
            "no such api:GET:/nacos/v1/auth/login",
        ),
    ];
    run_cases(&server, &before, cases).await;
    // A 405 keeps the connection: the stream is still in sync.
    let rs = common::raw_expect(
        server.http_addr,
        format!(
            "GET {NS}/instance/beat HTTP/1.1\r\nHost: t\r\n\r\nGET {NS}/operator/metrics HTTP/1.1\r\nHost: t\r\n\r\n"
        )
        .as_bytes(),
        2,
    )
    .await;
    assert_eq!(rs.iter().map(|r| r.status).collect::<Vec<_>>(), [405, 200]);
}

/// RFC 9110 §15.5.6: a 405 MUST carry `Allow` (the route table has it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn method_not_allowed_says_which_methods_are() {
    let server = TestServer::spawn().await;
    let head = raw_text(
        server.http_addr,
        format!("GET {NS}/instance/beat HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 405 "), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("\r\nallow: put\r\n"),
        "405 without an Allow header:\n{head}"
    );
}

/// The error names the method the client sent (Nacos: `req.getMethod()`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_method_is_named_in_the_error() {
    let server = TestServer::spawn().await;
    let text = raw_text(
        server.http_addr,
        format!("OPTIONS {NS}/instance HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(text.starts_with("HTTP/1.1 405 "), "{text}");
    assert!(
        text.ends_with("no such api:OPTIONS:/nacos/v1/ns/instance"),
        "{text}"
    );
}

// ----- framing -----------------------------------------------------------------

/// Writes `bytes`, half-closes, and returns everything the server sends
/// until it closes (5 s at most).
async fn raw_text(addr: SocketAddr, bytes: &[u8]) -> String {
    String::from_utf8_lossy(&exchange(addr, bytes).await.expect("server closed in time"))
        .into_owned()
}

/// Writes `bytes`, half-closes the write side, and reads until the server
/// closes. `None` if it does not close within 5 s. A reset after data counts
/// as the close.
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    // The server may already have answered and closed (a refused head).
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(out),
            Ok(Ok(n)) => out.extend_from_slice(&chunk[..n]),
            Err(_) => return None,
        }
    }
}

/// Every response in `bytes`, or why the bytes are not a sequence of
/// complete responses.
fn try_responses(bytes: &[u8]) -> Result<Vec<(u16, String, String)>, String> {
    let mut rest = bytes;
    let mut out = Vec::new();
    while !rest.is_empty() {
        match parse_response(rest) {
            Ok(Some((r, used))) => {
                let head = String::from_utf8_lossy(&rest[..used - r.body.len()]).into_owned();
                out.push((
                    r.status,
                    head,
                    String::from_utf8_lossy(&r.body).into_owned(),
                ));
                rest = &rest[used..];
            }
            other => {
                return Err(format!(
                    "not a complete HTTP response ({other:?}): {:?}",
                    String::from_utf8_lossy(rest)
                ))
            }
        }
    }
    Ok(out)
}

fn responses(bytes: &[u8]) -> Vec<(u16, String, String)> {
    try_responses(bytes).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_errors_answer_and_close() {
    let (server, before) = seeded(small_limits()).await;
    let long_url = format!(
        "GET {NS}/instance/list?serviceName=seed&x={} HTTP/1.1\r\nHost: t\r\n\r\n",
        "a".repeat(1100)
    );
    let big_header = format!(
        "GET {NS}/operator/metrics HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "v".repeat(2100)
    );
    let many_headers = format!(
        "GET {NS}/operator/metrics HTTP/1.1\r\nHost: t\r\n{}\r\n",
        (0..70).map(|i| format!("X-{i}: 1\r\n")).collect::<String>()
    );
    let big_body = format!(
        "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4097\r\n\r\n"
    );
    let big_chunked = format!(
        "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n{}\r\n1000\r\n{}\r\n0\r\n\r\n",
        "a".repeat(4096),
        "b".repeat(4096)
    );
    let big_continue = format!(
        "POST {NS}/instance HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n"
    );
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("URL over max_url_bytes", long_url.into_bytes(), 414, "request URI too long"),
        (
            "URL still streaming past the limit",
            format!("GET /{}", "a".repeat(1200)).into_bytes(),
            414,
            "request URI too long",
        ),
        ("header over max_header_bytes", big_header.into_bytes(), 431, "request header fields too large"),
        ("too many headers", many_headers.into_bytes(), 431, "too many header fields"),
        ("Content-Length over max_body_bytes", big_body.into_bytes(), 413, "payload too large"),
        ("chunked body over max_body_bytes", big_chunked.into_bytes(), 413, "payload too large"),
        ("Expect: 100-continue for a body over the limit", big_continue.into_bytes(), 413, "payload too large"),
        (
            "garbage",
            b"\x00\x01\x02garbage\xff\r\n\r\n".to_vec(),
            400,
            "malformed HTTP message: invalid token",
        ),
        (
            "TLS client hello",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03rest-of-hello\r\n\r\n".to_vec(),
            400,
            "malformed HTTP message: invalid token",
        ),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 505, "HTTP version not supported"),
        ("HTTP/1.2", b"GET / HTTP/1.2\r\n\r\n".to_vec(), 505, "HTTP version not supported"),
        (
            "Transfer-Encoding gzip",
            format!("POST {NS}/instance HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").into_bytes(),
            501,
            "transfer-encoding not implemented, only chunked is supported",
        ),
        (
            "conflicting Content-Length",
            format!("POST {NS}/instance HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab").into_bytes(),
            400,
            "malformed HTTP message: conflicting Content-Length",
        ),
        (
            "Content-Length and chunked",
            format!("POST {NS}/instance HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").into_bytes(),
            400,
            "malformed HTTP message: both Content-Length and Transfer-Encoding",
        ),
        (
            "negative Content-Length",
            format!("POST {NS}/instance HTTP/1.1\r\nContent-Length: -1\r\n\r\n").into_bytes(),
            400,
            "malformed HTTP message: invalid Content-Length",
        ),
        (
            "header without a colon",
            b"GET / HTTP/1.1\r\nBad Header\r\n\r\n".to_vec(),
            400,
            "malformed HTTP message: invalid header name",
        ),
        (
            "bad chunk size",
            format!("POST {NS}/instance HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").into_bytes(),
            400,
            "",
        ),
    ];
    let mut failures = Vec::new();
    for (what, bytes, status, text) in cases {
        let Some(got) = exchange(server.http_addr, &bytes).await else {
            failures.push(format!("{what}: the server did not close"));
            continue;
        };
        let rs = responses(&got);
        match rs.as_slice() {
            [(s, head, body)] => {
                let body_ok = if text.is_empty() {
                    body.starts_with("malformed HTTP message: ")
                } else {
                    body == text
                };
                if *s != status || !body_ok {
                    failures.push(format!("{what}: got {s} {body:?}, want {status} {text:?}"));
                }
                if !head.contains("\r\nConnection: close\r\n") {
                    failures.push(format!("{what}: no Connection: close in\n{head}"));
                }
            }
            other => failures.push(format!("{what}: want one response, got {other:?}")),
        }
        let after = fingerprint(&server).await;
        if after != before {
            failures.push(format!("{what}: changed state\n  {before}\n  {after}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // A request that fails framing after a good one in the same write: the
    // good one is answered, then the error, then the close.
    let mut two = format!("GET {NS}/operator/metrics HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes();
    two.extend_from_slice(b"\x00garbage\r\n\r\n");
    let rs = responses(&exchange(server.http_addr, &two).await.expect("closed"));
    assert_eq!(rs.iter().map(|r| r.0).collect::<Vec<_>>(), [200, 400]);
    // An incomplete request followed by EOF is dropped without an answer.
    let got = exchange(
        server.http_addr,
        format!("GET {NS}/operator/metrics HTTP/1.1\r\nHo").as_bytes(),
    )
    .await
    .expect("closed");
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    assert_eq!(fingerprint(&server).await, before);
    still_serves(&server).await;
}

// ----- random requests -----------------------------------------------------------

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Valid requests to mutate: (method, path, query or form).
const TEMPLATES: &[(&str, &str, &str)] = &[
    ("POST", "/instance", "serviceName=fz&ip=10.1.0.1&port=80&weight=1&metadata=k%3Dv&clusterName=c1"),
    ("PUT", "/instance/beat", "serviceName=DEFAULT_GROUP%40%40fz&ip=10.1.0.1&port=80&clusterName=c1"),
    ("PUT", "/instance/beat", "serviceName=fz&beat=%7B%22ip%22%3A%2210.1.0.2%22%2C%22port%22%3A81%2C%22metadata%22%3A%7B%7D%7D"),
    ("GET", "/instance/list", "serviceName=fz&clusters=c1%2CDEFAULT&healthyOnly=true"),
    ("GET", "/instance", "serviceName=fz&ip=10.1.0.1&port=80&clusterName=c1"),
    ("PATCH", "/instance", "serviceName=fz&ip=10.1.0.1&port=80&clusterName=c1&weight=3&enabled=true"),
    ("PUT", "/instance", "serviceName=fz&ip=10.1.0.1&port=80&clusterName=c1&weight=2"),
    ("DELETE", "/instance", "serviceName=fz&ip=10.1.0.3&port=82"),
    ("POST", "/service", "serviceName=fz2&protectThreshold=0.5&metadata=a%3Db&selector=%7B%22type%22%3A%22none%22%7D"),
    ("PUT", "/service", "serviceName=fz&protectThreshold=0.1"),
    ("GET", "/service", "serviceName=fz"),
    ("GET", "/service/list", "pageNo=1&pageSize=10&groupName=*"),
    ("GET", "/operator/metrics", ""),
];

/// Values that are wrong in interesting ways.
const JUNK: &[&str] = &[
    "",
    "+",
    "%",
    "%2",
    "%zz",
    "%ff",
    "%C3%28",
    "%00",
    "abc",
    "-1",
    "0",
    "70000",
    "2147483648",
    "NaN",
    "-Infinity",
    "1e309",
    "999.1.1.1",
    "1.2.3",
    "%40%40",
    "G%40%40",
    "%40%40s",
    "a%20b",
    "None",
    "%7B",
    "%7B%22k%22%3A1%7D",
    "k%3Dv%2C",
    "%3D",
    "%5B1%5D",
    "true",
    "TRUE",
    "%E4%BD%A0",
    "..",
    "a%23b",
    "preserved.heart.beat.timeout%3D0",
];

fn random_value(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => {
            // Random bytes, percent-encoded: printable ASCII mostly, and
            // now and then any byte (which may not be UTF-8).
            let any = rng.below(4) == 0;
            let n = rng.below(12);
            (0..n)
                .map(|_| {
                    let b = if any {
                        rng.next() as u8
                    } else {
                        0x20 + rng.below(0x5f) as u8
                    };
                    format!("%{b:02X}")
                })
                .collect()
        }
        1 => "x".repeat(rng.below(700)),
        _ => (*rng.pick(JUNK)).to_owned(),
    }
}

/// A mutation that keeps the framing valid: exactly one response is due.
fn mutate_params(rng: &mut Rng, query: &str) -> String {
    let mut pairs: Vec<(String, String)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    for _ in 0..=rng.below(3) {
        let n = pairs.len();
        match rng.below(5) {
            0 | 1 if n > 0 => {
                let i = rng.below(n);
                pairs[i].1 = random_value(rng);
            }
            2 if n > 0 => {
                pairs.remove(rng.below(n));
            }
            3 => {
                let name = *rng.pick(&[
                    "serviceName",
                    "ip",
                    "port",
                    "weight",
                    "metadata",
                    "beat",
                    "clusterName",
                    "groupName",
                    "namespaceId",
                    "udpPort",
                    "protectThreshold",
                    "pageNo",
                    "enabled",
                    "healthy",
                    "ephemeral",
                    "selector",
                    "%ff",
                    "",
                ]);
                let v = random_value(rng);
                let at = rng.below(n + 1);
                pairs.insert(at, (name.to_owned(), v));
            }
            _ => {
                if n > 1 {
                    let (a, b) = (rng.below(n), rng.below(n));
                    pairs.swap(a, b);
                }
            }
        }
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn request(method: &str, path: &str, query: &str, form: bool) -> Vec<u8> {
    if form {
        format!(
            "{method} {NS}{path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{query}",
            query.len()
        )
        .into_bytes()
    } else {
        format!("{method} {NS}{path}?{query} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
    }
}

/// A mutation at the byte level: any number of responses may be due.
fn mutate_bytes(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    match rng.below(6) {
        0 => {
            for _ in 0..=rng.below(4) {
                let i = rng.below(bytes.len());
                bytes[i] = rng.next() as u8;
            }
        }
        1 => {
            let i = rng.below(bytes.len() + 1);
            let junk: Vec<u8> = (0..rng.below(16)).map(|_| rng.next() as u8).collect();
            bytes.splice(i..i, junk);
        }
        2 => bytes.truncate(rng.below(bytes.len() + 1)),
        3 => {
            let copy = bytes.clone();
            bytes.extend_from_slice(&copy);
            let i = rng.below(bytes.len());
            bytes[i] = rng.next() as u8;
        }
        4 => {
            let i = rng.below(bytes.len());
            bytes.insert(i, *rng.pick(b"\r\n\0 :%@\t"));
        }
        _ => bytes = (0..rng.below(200)).map(|_| rng.next() as u8).collect(),
    }
    bytes
}

static WORKER_PANICS: AtomicUsize = AtomicUsize::new(0);

const ALLOWED: [u16; 9] = [200, 400, 404, 405, 413, 414, 431, 501, 505];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_requests_always_get_well_formed_answers() {
    // Count panics on runtime workers (the server's tasks); a panicking
    // connection task would otherwise just drop the connection.
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("tokio-runtime-worker"))
        {
            WORKER_PANICS.fetch_add(1, Ordering::SeqCst);
        }
        previous(info);
    }));
    let (server, _) = seeded(Config {
        max_url_bytes: 2048,
        max_header_bytes: 4096,
        max_body_bytes: 4096,
        ..Config::for_test()
    })
    .await;
    let mut failures = Vec::new();
    for seed in 1..=600u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let (method, path, query) = *rng.pick(TEMPLATES);
        let form = method != "GET" && rng.below(4) == 0;
        let structural = rng.below(3) != 0;
        let bytes = if structural {
            let method = if rng.below(8) == 0 {
                *rng.pick(&["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE"])
            } else {
                method
            };
            request(method, path, &mutate_params(&mut rng, query), form)
        } else {
            mutate_bytes(&mut rng, request(method, path, query, form))
        };
        if bytes.starts_with(b"HEAD ") {
            continue; // a HEAD answer has no body; the framing check below would misread it
        }
        let Some(got) = exchange(server.http_addr, &bytes).await else {
            failures.push(format!(
                "seed {seed}: no close within 5 s for {:?}",
                String::from_utf8_lossy(&bytes)
            ));
            continue;
        };
        let rs = match try_responses(&got) {
            Ok(rs) => rs,
            Err(e) => {
                failures.push(format!(
                    "seed {seed}: {e} in answer to {:?}",
                    String::from_utf8_lossy(&bytes)
                ));
                continue;
            }
        };
        if structural && rs.len() != 1 {
            failures.push(format!(
                "seed {seed}: {} responses to one well-framed request {:?}",
                rs.len(),
                String::from_utf8_lossy(&bytes)
            ));
        }
        for (status, _, body) in &rs {
            eprintln!(
                "HIST {structural} {status} {}",
                body.chars().take(40).collect::<String>()
            );
            if !ALLOWED.contains(status) {
                failures.push(format!(
                    "seed {seed}: status {status} {body:?} for {:?}",
                    String::from_utf8_lossy(&bytes)
                ));
            }
            if *status != 200 && body.is_empty() {
                failures.push(format!("seed {seed}: {status} without a reason text"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(
        WORKER_PANICS.load(Ordering::SeqCst),
        0,
        "server tasks panicked"
    );
    still_serves(&server).await;
    let m = server
        .call(Method::Get, &format!("{NS}/operator/metrics"))
        .await
        .json();
    assert_eq!(m["status"], "UP");
}
