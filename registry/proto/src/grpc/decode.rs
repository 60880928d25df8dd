//! From (type name, JSON bytes) to a validated [`ClientMessage`], or a [`Refusal`]
//! carrying the Nacos error code and text to answer with.
//!
//! Two stages, so a refusal can still echo the request id: the JSON is read into the
//! lenient wire types of [`super::message`], then names, addresses, weights and sizes
//! are checked with the same rules (and texts) as the 1.x HTTP parameters.
//! Nothing here panics on any input; the fuzz target `grpc_payload` holds it to that.

use std::collections::BTreeMap;

use serde::Deserialize;

use self::flat::{owned, text};
use super::code;
use super::message::{
    BatchInstanceRequest, ClientDetectionResponse, ConnectionSetupRequest, HealthCheckRequest,
    InstanceRequest, Message, NotifySubscriberResponse, PersistentInstanceRequest, ResponseHead,
    ServerCheckRequest, ServiceListRequest, ServiceQueryRequest, SubscribeServiceRequest,
};
use crate::error::ProtoError;
use crate::naming::{
    check_weight, normalize_cluster, validate_ip, ParseLimits, ServiceName, DEFAULT_NAMESPACE_ID,
};

/// Why a payload is refused: Nacos's error code and the text to answer with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Nacos's `errorCode` (see [`super::code`]).
    pub code: i32,
    /// The `message`.
    pub message: String,
    /// The request's id when it could be read, so the answer matches it.
    pub request_id: Option<String>,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            request_id: None,
        }
    }

    fn invalid(e: &ProtoError, request_id: &Option<String>) -> Self {
        Refusal {
            code: code::INVALID_PARAM,
            message: e.to_string(),
            request_id: request_id.clone(),
        }
    }
}

/// A service named by a request: namespace, group, name (all validated).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceId {
    /// Namespace id, `public` when the client sent none.
    pub namespace: String,
    /// The group.
    pub group: String,
    /// The name, ungrouped.
    pub name: String,
}

impl ServiceId {
    /// `group@@name`, the store's key.
    pub fn grouped(&self) -> String {
        // Not `format!`: its machinery costs more than the copies (per request).
        let mut s = String::with_capacity(self.group.len() + 2 + self.name.len());
        s.push_str(&self.group);
        s.push_str("@@");
        s.push_str(&self.name);
        s
    }
}

/// A validated instance.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceSpec {
    /// IP literal or host name (validated like 1.x `ip`).
    pub ip: String,
    /// Port.
    pub port: u16,
    /// Weight in `[0, 10000]`.
    pub weight: f64,
    /// Healthy.
    pub healthy: bool,
    /// Enabled.
    pub enabled: bool,
    /// Ephemeral.
    pub ephemeral: bool,
    /// Cluster, `DEFAULT` when absent.
    pub cluster: String,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
}

/// What an instance request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceOp {
    /// `registerInstance` (and `batchRegisterInstance`).
    Register,
    /// `deregisterInstance` (and `batchDeregisterInstance`).
    Deregister,
}

/// A validated message from a client.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientMessage {
    /// `ServerCheckRequest`.
    ServerCheck,
    /// `ConnectionSetupRequest`.
    ConnectionSetup {
        /// `clientVersion`.
        client_version: String,
    },
    /// `HealthCheckRequest`.
    HealthCheck,
    /// `InstanceRequest` / `PersistentInstanceRequest`.
    Instance {
        /// The service.
        service: ServiceId,
        /// Register or deregister.
        op: InstanceOp,
        /// The instance (`ephemeral` forced false for the persistent request).
        instance: InstanceSpec,
        /// The request's `type`, echoed in the response.
        op_name: String,
        /// Which request type it came as.
        persistent_request: bool,
    },
    /// `BatchInstanceRequest`.
    BatchInstance {
        /// The service.
        service: ServiceId,
        /// Register or deregister.
        op: InstanceOp,
        /// The instances.
        instances: Vec<InstanceSpec>,
        /// The request's `type`.
        op_name: String,
    },
    /// `SubscribeServiceRequest`.
    Subscribe {
        /// The service.
        service: ServiceId,
        /// Subscribe or unsubscribe.
        subscribe: bool,
        /// `clusters`, trimmed, echoed in the answer.
        clusters: String,
    },
    /// `ServiceQueryRequest`.
    Query {
        /// The service.
        service: ServiceId,
        /// `cluster`, trimmed.
        clusters: String,
        /// `healthyOnly`.
        healthy_only: bool,
    },
    /// `ServiceListRequest`.
    ServiceList {
        /// Namespace id.
        namespace: String,
        /// The group.
        group: String,
        /// From 1.
        page_no: usize,
        /// At least 1.
        page_size: usize,
    },
    /// A client's ack of a push.
    NotifyAck(ResponseHead),
    /// A client's answer to a detection.
    DetectionAck(ResponseHead),
}

/// A decoded message and its request id.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The request id, echoed in the answer.
    pub request_id: Option<String>,
    /// What it asks.
    pub message: ClientMessage,
}

/// Largest page a service list may ask for (Nacos pages are small; bounded work).
pub const MAX_PAGE_SIZE: usize = 10_000;
/// Most instances in one batch request.
pub const MAX_BATCH: usize = 1_000;

/// Decodes and validates one client payload.
///
/// # Errors
/// A [`Refusal`]: [`code::NO_HANDLER`] for an unknown type, [`code::BAD_GATEWAY`] for
/// a body that is not JSON of the type's shape (Nacos's answer to a parse failure),
/// [`code::INVALID_PARAM`] for values the 1.x API would refuse too.
///
/// One arm per request type, each a few lines: the match is the table of
/// what the door accepts, longer than 80 lines because the table is.
pub fn decode(type_name: &str, json: &[u8], limits: &ParseLimits) -> Result<Decoded, Refusal> {
    match type_name {
        ServerCheckRequest::TYPE => {
            let r: flat::Head<'_> = read(json)?;
            Ok(decoded(owned(r.request_id), ClientMessage::ServerCheck))
        }
        ConnectionSetupRequest::TYPE => {
            let r: flat::Setup<'_> = read(json)?;
            let client_version = owned(r.client_version).unwrap_or_default();
            Ok(decoded(
                owned(r.request_id),
                ClientMessage::ConnectionSetup { client_version },
            ))
        }
        HealthCheckRequest::TYPE => {
            let r: flat::Head<'_> = read(json)?;
            Ok(decoded(owned(r.request_id), ClientMessage::HealthCheck))
        }
        InstanceRequest::TYPE => instance(read(json)?, false, limits),
        PersistentInstanceRequest::TYPE => instance(read(json)?, true, limits),
        BatchInstanceRequest::TYPE => batch(read(json)?, limits),
        SubscribeServiceRequest::TYPE => {
            let r: flat::Subscribe<'_> = read(json)?;
            let id = owned(r.request_id);
            let service = service(naming(&r.namespace, &r.service_name, &r.group_name), limits)
                .map_err(|e| Refusal::invalid(&e, &id))?;
            let clusters = clusters(text(&r.clusters), limits, &id)?;
            Ok(decoded(
                id,
                ClientMessage::Subscribe {
                    service,
                    subscribe: r.subscribe.unwrap_or(true),
                    clusters,
                },
            ))
        }
        ServiceQueryRequest::TYPE => {
            let r: flat::Query<'_> = read(json)?;
            let id = owned(r.request_id);
            let service = service(naming(&r.namespace, &r.service_name, &r.group_name), limits)
                .map_err(|e| Refusal::invalid(&e, &id))?;
            let clusters = clusters(text(&r.cluster), limits, &id)?;
            Ok(decoded(
                id,
                ClientMessage::Query {
                    service,
                    clusters,
                    healthy_only: r.healthy_only.unwrap_or(false),
                },
            ))
        }
        ServiceListRequest::TYPE => service_list(read(json)?, limits),
        NotifySubscriberResponse::TYPE => {
            // The response types only add a flattened head: read the head.
            let head: ResponseHead = read(json)?;
            Ok(decoded(
                head.request_id.clone(),
                ClientMessage::NotifyAck(head),
            ))
        }
        ClientDetectionResponse::TYPE => {
            let head: ResponseHead = read(json)?;
            Ok(decoded(
                head.request_id.clone(),
                ClientMessage::DetectionAck(head),
            ))
        }
        _ => Err(Refusal::new(code::NO_HANDLER, code::NO_HANDLER_TEXT)),
    }
}

fn decoded(request_id: Option<String>, message: ClientMessage) -> Decoded {
    Decoded {
        request_id,
        message,
    }
}

/// Reads `json` as `T`, borrowing its text.
///
/// A body that is UTF-8 as a whole (every client's) is checked once and read
/// as text: read as bytes, serde_json checks each string on its own, a third
/// of a deregister's parse. One that is not is read as bytes, as before, so it
/// gets the same answer (its odd bytes may sit in a field nobody reads).
fn read<'a, T: Deserialize<'a>>(json: &'a [u8]) -> Result<T, Refusal> {
    let parsed = match std::str::from_utf8(json) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(json),
    };
    parsed.map_err(|e| {
        Refusal::new(
            code::BAD_GATEWAY,
            format!("Invalid request: the payload is not valid JSON of its type: {e}"),
        )
    })
}

fn bounded(param: &'static str, v: &str, limits: &ParseLimits) -> Result<(), ProtoError> {
    if v.len() > limits.max_name_len {
        return Err(ProtoError::TooLong {
            param,
            len: v.len(),
            max: limits.max_name_len,
        });
    }
    Ok(())
}

/// The naming head of a request: namespace, service name, group.
#[derive(Clone, Copy)]
struct Naming<'b> {
    namespace: Option<&'b str>,
    service_name: Option<&'b str>,
    group_name: Option<&'b str>,
}

fn naming<'b>(
    namespace: &'b flat::Text<'_>,
    service_name: &'b flat::Text<'_>,
    group_name: &'b flat::Text<'_>,
) -> Naming<'b> {
    Naming {
        namespace: text(namespace),
        service_name: text(service_name),
        group_name: text(group_name),
    }
}

fn service(head: Naming<'_>, limits: &ParseLimits) -> Result<ServiceId, ProtoError> {
    let namespace = match head.namespace.map(str::trim) {
        None | Some("") => DEFAULT_NAMESPACE_ID,
        Some(ns) => ns,
    };
    bounded("namespace", namespace, limits)?;
    let raw = head.service_name.unwrap_or("").trim();
    if raw.is_empty() {
        return Err(ProtoError::Required("serviceName"));
    }
    let name = ServiceName::parse(raw, head.group_name, limits)?;
    Ok(ServiceId {
        namespace: namespace.to_owned(),
        group: name.group.to_owned(),
        name: name.name.to_owned(),
    })
}

fn clusters(
    raw: Option<&str>,
    limits: &ParseLimits,
    id: &Option<String>,
) -> Result<String, Refusal> {
    let c = raw.unwrap_or("").trim();
    bounded("clusters", c, limits).map_err(|e| Refusal::invalid(&e, id))?;
    Ok(c.to_owned())
}

fn op(name: Option<&str>, id: &Option<String>) -> Result<InstanceOp, Refusal> {
    match name.unwrap_or("") {
        "registerInstance" | "batchRegisterInstance" => Ok(InstanceOp::Register),
        "deregisterInstance" | "batchDeregisterInstance" => Ok(InstanceOp::Deregister),
        other => Err(Refusal {
            code: code::INVALID_PARAM,
            message: format!("Unsupported request type {other}"),
            request_id: id.clone(),
        }),
    }
}

/// `InstanceRequest` or `PersistentInstanceRequest` (the same fields).
fn instance(
    r: flat::InstanceReq<'_>,
    persistent_request: bool,
    limits: &ParseLimits,
) -> Result<Decoded, Refusal> {
    let id = owned(r.request_id);
    let op = op(text(&r.r#type), &id)?;
    let service = service(naming(&r.namespace, &r.service_name, &r.group_name), limits)
        .map_err(|e| Refusal::invalid(&e, &id))?;
    let wire = r
        .instance
        .ok_or_else(|| Refusal::invalid(&ProtoError::Required("instance"), &id))?;
    let mut instance = instance_spec(wire, limits).map_err(|e| Refusal::invalid(&e, &id))?;
    if persistent_request {
        instance.ephemeral = false;
    }
    Ok(decoded(
        id,
        ClientMessage::Instance {
            service,
            op,
            instance,
            op_name: owned(r.r#type).unwrap_or_default(),
            persistent_request,
        },
    ))
}

fn batch(r: flat::Batch<'_>, limits: &ParseLimits) -> Result<Decoded, Refusal> {
    let id = owned(r.request_id);
    let op = op(text(&r.r#type), &id)?;
    let service = service(naming(&r.namespace, &r.service_name, &r.group_name), limits)
        .map_err(|e| Refusal::invalid(&e, &id))?;
    let wires = r.instances.unwrap_or_default();
    if wires.len() > MAX_BATCH {
        return Err(Refusal {
            code: code::OVER_THRESHOLD,
            message: format!(
                "too many instances in one batch: {}, the limit is {MAX_BATCH}",
                wires.len()
            ),
            request_id: id,
        });
    }
    let mut instances = Vec::with_capacity(wires.len());
    for w in wires {
        let spec = instance_spec(w, limits).map_err(|e| Refusal::invalid(&e, &id))?;
        if !spec.ephemeral {
            return Err(Refusal {
                code: code::INVALID_PARAM,
                message: "Batch registration does not allow persistent instance registration"
                    .into(),
                request_id: id,
            });
        }
        instances.push(spec);
    }
    Ok(decoded(
        id,
        ClientMessage::BatchInstance {
            service,
            op,
            instances,
            op_name: owned(r.r#type).unwrap_or_default(),
        },
    ))
}

fn service_list(r: flat::List<'_>, limits: &ParseLimits) -> Result<Decoded, Refusal> {
    let id = owned(r.request_id);
    let namespace = match text(&r.namespace).map(str::trim) {
        None | Some("") => DEFAULT_NAMESPACE_ID.to_owned(),
        Some(ns) => ns.to_owned(),
    };
    let group = match text(&r.group_name).map(str::trim) {
        None | Some("") => crate::naming::DEFAULT_GROUP.to_owned(),
        Some(g) => g.to_owned(),
    };
    bounded("namespace", &namespace, limits).map_err(|e| Refusal::invalid(&e, &id))?;
    bounded("groupName", &group, limits).map_err(|e| Refusal::invalid(&e, &id))?;
    let page_no = r.page_no.unwrap_or(1).max(1);
    let page_size = r.page_size.unwrap_or(10);
    if !(1..=MAX_PAGE_SIZE as i64).contains(&page_size) {
        return Err(Refusal::invalid(
            &ProtoError::OutOfRange {
                param: "pageSize",
                value: page_size,
                min: 1,
                max: MAX_PAGE_SIZE as i32,
            },
            &id,
        ));
    }
    Ok(decoded(
        id,
        ClientMessage::ServiceList {
            namespace,
            group,
            page_no: usize::try_from(page_no).unwrap_or(usize::MAX),
            page_size: page_size as usize,
        },
    ))
}

fn instance_spec(w: flat::Instance<'_>, limits: &ParseLimits) -> Result<InstanceSpec, ProtoError> {
    let ip = text(&w.ip).unwrap_or("").trim();
    if ip.is_empty() {
        return Err(ProtoError::Required("ip"));
    }
    validate_ip(ip)?;
    let port = w.port.ok_or(ProtoError::Required("port"))?;
    let port = u16::try_from(port).map_err(|_| ProtoError::OutOfRange {
        param: "port",
        value: port,
        min: 0,
        max: 65_535,
    })?;
    let weight = match w.weight {
        None => 1.0,
        Some(v) => check_weight(v)?,
    };
    let cluster = normalize_cluster(text(&w.cluster_name), limits)?.to_owned();
    let metadata = w.metadata.unwrap_or_default();
    if metadata.len() > limits.max_metadata_entries {
        return Err(ProtoError::MetadataEntries {
            len: metadata.len(),
            max: limits.max_metadata_entries,
        });
    }
    let bytes: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if bytes > limits.max_metadata_bytes {
        return Err(ProtoError::TooLong {
            param: "metadata",
            len: bytes,
            max: limits.max_metadata_bytes,
        });
    }
    Ok(InstanceSpec {
        ip: ip.to_owned(),
        port,
        weight,
        healthy: w.healthy.unwrap_or(true),
        enabled: w.enabled.unwrap_or(true),
        ephemeral: w.ephemeral.unwrap_or(true),
        cluster,
        metadata,
    })
}

/// What the server reads of each request: the fields of the [`super::message`]
/// types, flat. Those types share their heads through `#[serde(flatten)]`, and
/// serde reads a flattened struct by first buffering the whole object as a tree
/// of `Content` values (every key and value copied, the instance object read
/// twice): that was half the instructions of a 2.x register. These are serde's
/// ordinary derive over the same names and types, so they accept and refuse
/// exactly what the message types do (a field the server does not use is still
/// read, so a value of the wrong type is still refused), but their text is
/// borrowed from the body (`Cow`: owned only where a string has escapes), so a
/// field is copied once, when the validated message takes it, or never.
mod flat {
    use std::borrow::Cow;
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use serde::de::{Deserializer, Error, Visitor};

    /// A string field.
    pub(super) type Text<'a> = Option<Str<'a>>;

    /// A string borrowed from the body when it has no escapes. Not a bare
    /// `Cow<str>`: serde borrows one only as a field of its own, never
    /// inside an `Option`, where it always copies.
    pub(super) struct Str<'a>(pub(super) Cow<'a, str>);

    impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Borrowing;
            impl<'de> Visitor<'de> for Borrowing {
                type Value = Str<'de>;
                // What `String` expects, so a refusal reads as it did.
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a string")
                }
                fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Str<'de>, E> {
                    Ok(Str(Cow::Borrowed(v)))
                }
                fn visit_str<E: Error>(self, v: &str) -> Result<Str<'de>, E> {
                    Ok(Str(Cow::Owned(v.to_owned())))
                }
                fn visit_string<E: Error>(self, v: String) -> Result<Str<'de>, E> {
                    Ok(Str(Cow::Owned(v)))
                }
            }
            d.deserialize_str(Borrowing)
        }
    }

    /// The text of a field, if present.
    pub(super) fn text<'b>(t: &'b Text<'_>) -> Option<&'b str> {
        t.as_ref().map(|s| &*s.0)
    }

    /// The field as an owned string (a copy only when it was borrowed).
    pub(super) fn owned(t: Text<'_>) -> Option<String> {
        t.map(|s| s.0.into_owned())
    }

    /// A request with no fields of its own.
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    pub(super) struct Head<'a> {
        #[serde(borrow)]
        pub(super) request_id: Text<'a>,
    }

    /// `ConnectionSetupRequest` (its labels and tenant are not used).
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    pub(super) struct Setup<'a> {
        #[serde(borrow)]
        pub(super) request_id: Text<'a>,
        #[serde(borrow)]
        pub(super) client_version: Text<'a>,
    }

    /// `WireInstance`, borrowed.
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    pub(super) struct Instance<'a> {
        /// Not used (the server derives ids), read so that a non-string is
        /// refused as before.
        #[serde(borrow, rename = "instanceId")]
        pub(super) _instance_id: Text<'a>,
        #[serde(borrow)]
        pub(super) ip: Text<'a>,
        pub(super) port: Option<i64>,
        pub(super) weight: Option<f64>,
        pub(super) healthy: Option<bool>,
        pub(super) enabled: Option<bool>,
        pub(super) ephemeral: Option<bool>,
        #[serde(borrow)]
        pub(super) cluster_name: Text<'a>,
        /// Not used (the request's service wins), read as `instanceId` is.
        #[serde(borrow, rename = "serviceName")]
        pub(super) _service_name: Text<'a>,
        pub(super) metadata: Option<BTreeMap<String, String>>,
    }

    macro_rules! naming_request {
        ($flat:ident { $($(#[$attr:meta])* $field:ident : $ty:ty),* $(,)? }) => {
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            pub(super) struct $flat<'a> {
                #[serde(borrow)]
                pub(super) request_id: Text<'a>,
                #[serde(borrow)]
                pub(super) namespace: Text<'a>,
                #[serde(borrow)]
                pub(super) service_name: Text<'a>,
                #[serde(borrow)]
                pub(super) group_name: Text<'a>,
                $($(#[$attr])* pub(super) $field: $ty,)*
            }
        };
    }

    naming_request!(InstanceReq {
        #[serde(borrow)]
        r#type: Text<'a>,
        #[serde(borrow)]
        instance: Option<Instance<'a>>,
    });
    naming_request!(Batch {
        #[serde(borrow)]
        r#type: Text<'a>,
        #[serde(borrow)]
        instances: Option<Vec<Instance<'a>>>,
    });
    naming_request!(Subscribe {
        subscribe: Option<bool>,
        #[serde(borrow)]
        clusters: Text<'a>,
    });
    naming_request!(Query {
        #[serde(borrow)]
        cluster: Text<'a>,
        healthy_only: Option<bool>,
        /// Not used (2.x pushes over the connection).
        #[serde(rename = "udpPort")]
        _udp_port: Option<i64>,
    });
    naming_request!(List {
        page_no: Option<i64>,
        page_size: Option<i64>,
        /// Not used.
        #[serde(borrow, rename = "selector")]
        _selector: Text<'a>,
    });
}
