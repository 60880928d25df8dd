//! The requests a simulated 2.x client sends, field for field as the real clients
//! send them (`nacos-sdk-python` 3.2.0 and the Rust `nacos-sdk`; the test
//! `tests/real_client_payloads.rs` captures theirs through a recording proxy and
//! compares).
//!
//! The request bodies are loadgen's own `Serialize` types, not `registry_proto`'s:
//! the proto's request types are the server's reading side, lenient and full of
//! `Option`s, and a `None` there goes out as JSON `null`. No real client sends
//! `"weight": null`, and a server that reads it as a number (r-nacos: "invalid
//! type: null, expected f32") refuses the whole request. Here every field has the
//! value a real client gives it. The instance itself is the proto's
//! [`Host`], which has no `Option`s.

use std::collections::BTreeMap;

use registry_proto::grpc::message::Host;
use registry_proto::grpc::Payload;
use serde::Serialize;

/// What every request carries. The clients send empty headers in the JSON (theirs go
/// in the payload metadata) and name the request's module.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    headers: BTreeMap<String, String>,
    request_id: String,
    /// Left out of the keep-alive, as the Rust client leaves it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'static str>,
}

impl Head {
    fn new(module: &'static str) -> Head {
        Head {
            headers: BTreeMap::new(),
            request_id: String::new(),
            module: Some(module),
        }
    }
}

/// Namespace, service and group of a naming request.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Naming {
    /// Namespace id (empty: `public`).
    pub namespace: String,
    /// The service, ungrouped.
    pub service_name: String,
    /// The group.
    pub group_name: String,
}

/// An instance at `ip:port` in `cluster` as the clients send it: every field set,
/// with the clients' defaults (weight 1.0, healthy, enabled, ephemeral: the 2.x
/// fleet's instances live with their connection; no id and no service name, which
/// the server derives from the request). The proto's [`Host`] has exactly the
/// fields of the clients' `Instance` and no `Option`s, so it serializes as they do.
pub fn instance(ip: String, port: u16, cluster: &str) -> Host {
    Host {
        ip,
        port: i64::from(port),
        cluster_name: cluster.to_owned(),
        ..Host::default()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InstanceBody<'a> {
    #[serde(flatten)]
    head: Head,
    #[serde(flatten)]
    naming: &'a Naming,
    r#type: &'static str,
    instance: &'a Host,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BatchBody<'a> {
    #[serde(flatten)]
    head: Head,
    #[serde(flatten)]
    naming: &'a Naming,
    r#type: &'static str,
    instances: &'a [Host],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubscribeBody<'a> {
    #[serde(flatten)]
    head: Head,
    #[serde(flatten)]
    naming: &'a Naming,
    subscribe: bool,
    clusters: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueryBody<'a> {
    #[serde(flatten)]
    head: Head,
    #[serde(flatten)]
    naming: &'a Naming,
    cluster: &'static str,
    healthy_only: bool,
    udp_port: i64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SetupBody {
    #[serde(flatten)]
    head: Head,
    client_version: String,
    tenant: String,
    labels: BTreeMap<String, String>,
    /// The 2.0-2.2 form of a client's abilities (the Rust client's, with its values).
    abilities: serde_json::Value,
    /// The 2.3+ form (empty: loadgen claims none of the optional ones).
    ability_table: BTreeMap<String, bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckBody<'a> {
    result_code: i32,
    error_code: i32,
    message: &'static str,
    request_id: &'a str,
}

fn payload(type_name: &str, body: &impl Serialize) -> Payload {
    // Plain structs of strings, numbers, booleans and string maps: cannot fail.
    Payload::new(type_name, serde_json::to_vec(body).unwrap_or_default())
}

/// `registerInstance` of one instance.
pub fn register(naming: &Naming, instance: &Host) -> Payload {
    instance_request(naming, "registerInstance", instance)
}

/// `deregisterInstance` of one instance.
pub fn deregister(naming: &Naming, instance: &Host) -> Payload {
    instance_request(naming, "deregisterInstance", instance)
}

fn instance_request(naming: &Naming, r#type: &'static str, instance: &Host) -> Payload {
    let body = InstanceBody {
        head: Head::new("naming"),
        naming,
        r#type,
        instance,
    };
    payload("InstanceRequest", &body)
}

/// `batchRegisterInstance`: the connection's instances of the service become these.
pub fn batch_register(naming: &Naming, instances: &[Host]) -> Payload {
    let body = BatchBody {
        head: Head::new("naming"),
        naming,
        r#type: "batchRegisterInstance",
        instances,
    };
    payload("BatchInstanceRequest", &body)
}

/// Subscribes the connection to the service (all clusters).
pub fn subscribe(naming: &Naming) -> Payload {
    let body = SubscribeBody {
        head: Head::new("naming"),
        naming,
        subscribe: true,
        clusters: "",
    };
    payload("SubscribeServiceRequest", &body)
}

/// One query of the service's instances (all clusters, healthy or not).
pub fn query(naming: &Naming) -> Payload {
    let body = QueryBody {
        head: Head::new("naming"),
        naming,
        cluster: "",
        healthy_only: false,
        udp_port: 0,
    };
    payload("ServiceQueryRequest", &body)
}

/// The first unary call of a connection.
pub fn server_check() -> Payload {
    payload("ServerCheckRequest", &Head::new("internal"))
}

/// The keep-alive.
pub fn health_check() -> Payload {
    let head = Head {
        module: None,
        ..Head::new("internal")
    };
    payload("HealthCheckRequest", &head)
}

/// The first message on the stream.
pub fn connection_setup(namespace: &str) -> Payload {
    let body = SetupBody {
        head: Head::new("internal"),
        client_version: format!("loadgen:{}", env!("CARGO_PKG_VERSION")),
        tenant: namespace.to_owned(),
        labels: [
            ("module".to_owned(), "naming".to_owned()),
            ("source".to_owned(), "sdk".to_owned()),
        ]
        .into(),
        abilities: serde_json::json!({
            "remoteAbility": { "supportRemoteConnection": true },
            "configAbility": { "supportRemoteMetrics": true },
            "namingAbility": { "supportDeltaPush": false, "supportRemoteMetric": false },
        }),
        ability_table: BTreeMap::new(),
    };
    payload("ConnectionSetupRequest", &body)
}

/// The answer on the stream to a server request (`NotifySubscriberResponse`,
/// `ClientDetectionResponse`) with the request's id.
pub fn ack(type_name: &str, request_id: &str) -> Payload {
    let body = AckBody {
        result_code: 200,
        error_code: 0,
        message: "",
        request_id,
    };
    payload(type_name, &body)
}

/// One payload of a kind loadgen sends, for comparing with the real clients'.
pub struct Sample {
    /// Which request it is, for messages (`register`, `deregister`, ...).
    pub what: &'static str,
    /// The payload as loadgen sends it.
    pub payload: Payload,
    /// The `type` field a client's payload of the same message type must have to be
    /// the same request (`InstanceRequest` is both register and deregister).
    pub instance_type: Option<&'static str>,
}

impl Sample {
    /// Whether a client's JSON body of this payload's type is the same request.
    pub fn matches(&self, body: &serde_json::Value) -> bool {
        self.instance_type
            .is_none_or(|t| body.get("type").and_then(|v| v.as_str()) == Some(t))
    }
}

/// One of each request (and stream answer) the 2.x fleet sends.
pub fn samples() -> Vec<Sample> {
    let naming = Naming {
        namespace: String::new(),
        service_name: "svc-0".into(),
        group_name: "DEFAULT_GROUP".into(),
    };
    let one = instance("10.0.0.1".into(), 8080, "DEFAULT");
    let sample = |what, payload, instance_type| Sample {
        what,
        payload,
        instance_type,
    };
    vec![
        sample("server check", server_check(), None),
        sample("health check", health_check(), None),
        sample("connection setup", connection_setup(""), None),
        sample(
            "register",
            register(&naming, &one),
            Some("registerInstance"),
        ),
        sample(
            "deregister",
            deregister(&naming, &one),
            Some("deregisterInstance"),
        ),
        sample(
            "batch register",
            batch_register(&naming, std::slice::from_ref(&one)),
            Some("batchRegisterInstance"),
        ),
        sample("subscribe", subscribe(&naming), None),
        sample("query", query(&naming), None),
        sample("push ack", ack("NotifySubscriberResponse", "1"), None),
    ]
}
