//! From (type name, JSON bytes) to a validated [`ClientMessage`], or a [`Refusal`]
//! carrying the Nacos error code and text to answer with.
//!
//! Two stages, so a refusal can still echo the request id: the JSON is read into the
//! lenient wire types of [`super::message`], then names, addresses, weights and sizes
//! are checked with the same rules (and texts) as the 1.x HTTP parameters.
//! Nothing here panics on any input; the fuzz target `grpc_payload` holds it to that.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;

use super::code;
use super::message::{
    BatchInstanceRequest, ClientDetectionResponse, ConnectionSetupRequest, HealthCheckRequest,
    InstanceRequest, Message, NamingHead, NotifySubscriberResponse, PersistentInstanceRequest,
    ResponseHead, ServerCheckRequest, ServiceListRequest, ServiceQueryRequest,
    SubscribeServiceRequest, WireInstance,
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
            let r: flat::Head = read(json)?;
            Ok(decoded(r.request_id, ClientMessage::ServerCheck))
        }
        ConnectionSetupRequest::TYPE => {
            let r: flat::Setup = read(json)?;
            let client_version = r.client_version.unwrap_or_default();
            Ok(decoded(
                r.request_id,
                ClientMessage::ConnectionSetup { client_version },
            ))
        }
        HealthCheckRequest::TYPE => {
            let r: flat::Head = read(json)?;
            Ok(decoded(r.request_id, ClientMessage::HealthCheck))
        }
        InstanceRequest::TYPE => {
            let r: InstanceRequest = read::<flat::Instance>(json)?.into();
            instance(
                r.head.request_id,
                &r.naming,
                r.r#type,
                r.instance,
                false,
                limits,
            )
        }
        PersistentInstanceRequest::TYPE => {
            let r: PersistentInstanceRequest = read::<flat::Instance>(json)?.into();
            instance(
                r.head.request_id,
                &r.naming,
                r.r#type,
                r.instance,
                true,
                limits,
            )
        }
        BatchInstanceRequest::TYPE => {
            let r: BatchInstanceRequest = read::<flat::Batch>(json)?.into();
            batch(r, limits)
        }
        SubscribeServiceRequest::TYPE => {
            let r: SubscribeServiceRequest = read::<flat::Subscribe>(json)?.into();
            let id = r.head.request_id;
            let service = service(&r.naming, limits).map_err(|e| Refusal::invalid(&e, &id))?;
            let clusters = clusters(r.clusters.as_deref(), limits, &id)?;
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
            let r: ServiceQueryRequest = read::<flat::Query>(json)?.into();
            let id = r.head.request_id;
            let service = service(&r.naming, limits).map_err(|e| Refusal::invalid(&e, &id))?;
            let clusters = clusters(r.cluster.as_deref(), limits, &id)?;
            Ok(decoded(
                id,
                ClientMessage::Query {
                    service,
                    clusters,
                    healthy_only: r.healthy_only.unwrap_or(false),
                },
            ))
        }
        ServiceListRequest::TYPE => {
            let r: ServiceListRequest = read::<flat::List>(json)?.into();
            service_list(r, limits)
        }
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

fn read<T: DeserializeOwned>(json: &[u8]) -> Result<T, Refusal> {
    serde_json::from_slice(json).map_err(|e| {
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

fn service(head: &NamingHead, limits: &ParseLimits) -> Result<ServiceId, ProtoError> {
    let namespace = match head.namespace.as_deref().map(str::trim) {
        None | Some("") => DEFAULT_NAMESPACE_ID,
        Some(ns) => ns,
    };
    bounded("namespace", namespace, limits)?;
    let raw = head.service_name.as_deref().unwrap_or("").trim();
    if raw.is_empty() {
        return Err(ProtoError::Required("serviceName"));
    }
    let name = ServiceName::parse(raw, head.group_name.as_deref(), limits)?;
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

fn instance(
    id: Option<String>,
    naming: &NamingHead,
    op_name: Option<String>,
    wire: Option<WireInstance>,
    persistent_request: bool,
    limits: &ParseLimits,
) -> Result<Decoded, Refusal> {
    let op = op(op_name.as_deref(), &id)?;
    let service = service(naming, limits).map_err(|e| Refusal::invalid(&e, &id))?;
    let wire = wire.ok_or_else(|| Refusal::invalid(&ProtoError::Required("instance"), &id))?;
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
            op_name: op_name.unwrap_or_default(),
            persistent_request,
        },
    ))
}

fn batch(r: BatchInstanceRequest, limits: &ParseLimits) -> Result<Decoded, Refusal> {
    let id = r.head.request_id;
    let op = op(r.r#type.as_deref(), &id)?;
    let service = service(&r.naming, limits).map_err(|e| Refusal::invalid(&e, &id))?;
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
            op_name: r.r#type.unwrap_or_default(),
        },
    ))
}

fn service_list(r: ServiceListRequest, limits: &ParseLimits) -> Result<Decoded, Refusal> {
    let id = r.head.request_id;
    let namespace = match r.naming.namespace.as_deref().map(str::trim) {
        None | Some("") => DEFAULT_NAMESPACE_ID.to_owned(),
        Some(ns) => ns.to_owned(),
    };
    let group = match r.naming.group_name.as_deref().map(str::trim) {
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

fn instance_spec(w: WireInstance, limits: &ParseLimits) -> Result<InstanceSpec, ProtoError> {
    let ip = w.ip.as_deref().unwrap_or("").trim();
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
    let cluster = normalize_cluster(w.cluster_name.as_deref(), limits)?.to_owned();
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
/// ordinary derive over the same names; each converts into its message type
/// by moving fields, so the validation below is shared with every other reader.
mod flat {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::super::message::{
        BatchInstanceRequest, InstanceRequest, NamingHead, PersistentInstanceRequest, RequestHead,
        ServiceListRequest, ServiceQueryRequest, SubscribeServiceRequest, WireInstance,
    };

    /// A request with no fields of its own.
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    pub(super) struct Head {
        pub(super) request_id: Option<String>,
    }

    /// `ConnectionSetupRequest` (its labels and tenant are not used).
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase", default)]
    pub(super) struct Setup {
        pub(super) request_id: Option<String>,
        pub(super) client_version: Option<String>,
    }

    macro_rules! naming_request {
        ($flat:ident => $message:ident { $($field:ident : $ty:ty),* $(,)? }) => {
            #[derive(Deserialize, Default)]
            #[serde(rename_all = "camelCase", default)]
            pub(super) struct $flat {
                request_id: Option<String>,
                namespace: Option<String>,
                service_name: Option<String>,
                group_name: Option<String>,
                $($field: $ty,)*
            }
            impl From<$flat> for $message {
                fn from(f: $flat) -> $message {
                    $message {
                        head: RequestHead {
                            request_id: f.request_id,
                            headers: BTreeMap::new(),
                        },
                        naming: NamingHead {
                            namespace: f.namespace,
                            service_name: f.service_name,
                            group_name: f.group_name,
                        },
                        $($field: f.$field,)*
                    }
                }
            }
        };
    }

    naming_request!(Instance => InstanceRequest {
        r#type: Option<String>,
        instance: Option<WireInstance>,
    });
    /// The persistent request has the same fields.
    impl From<Instance> for PersistentInstanceRequest {
        fn from(f: Instance) -> PersistentInstanceRequest {
            let r = InstanceRequest::from(f);
            PersistentInstanceRequest {
                head: r.head,
                naming: r.naming,
                r#type: r.r#type,
                instance: r.instance,
            }
        }
    }

    naming_request!(Batch => BatchInstanceRequest {
        r#type: Option<String>,
        instances: Option<Vec<WireInstance>>,
    });
    naming_request!(Subscribe => SubscribeServiceRequest {
        subscribe: Option<bool>,
        clusters: Option<String>,
    });
    naming_request!(Query => ServiceQueryRequest {
        cluster: Option<String>,
        healthy_only: Option<bool>,
        udp_port: Option<i64>,
    });
    naming_request!(List => ServiceListRequest {
        page_no: Option<i64>,
        page_size: Option<i64>,
        selector: Option<String>,
    });
}
