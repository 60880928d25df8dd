//! The JSON bodies of Nacos 2.x gRPC requests and responses, as the Java, Python and
//! Rust clients send and read them (package `com.alibaba.nacos.api.naming.remote`).
//!
//! Every type is both `Serialize` and `Deserialize`: the server reads requests and
//! writes responses, loadgen's simulated clients do the opposite. Reading is lenient the
//! way Jackson is (unknown fields are ignored, absent ones take their defaults), so a
//! newer client's extra fields never break a request; validation of what was read is in
//! [`super::decode`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A body with a Nacos type name (`metadata.type`).
pub trait Message {
    /// The Java simple class name, e.g. `InstanceRequest`.
    const TYPE: &'static str;
}

/// Fields every request carries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestHead {
    /// Chosen by the sender; the answer echoes it. Left out when `None` (the Python
    /// client refuses `null` strings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Request headers (also sent in the payload metadata).
    pub headers: BTreeMap<String, String>,
}

/// Fields every naming request carries.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NamingHead {
    /// Namespace id; empty means `public`.
    pub namespace: Option<String>,
    /// The service, ungrouped (or grouped `group@@name`).
    pub service_name: Option<String>,
    /// The group; empty means `DEFAULT_GROUP`.
    pub group_name: Option<String>,
}

/// An instance as clients send it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WireInstance {
    /// Ignored: the server derives ids.
    pub instance_id: Option<String>,
    /// The instance's IP.
    pub ip: Option<String>,
    /// The instance's port (Java `int`).
    pub port: Option<i64>,
    /// Default 1.0.
    pub weight: Option<f64>,
    /// Default true.
    pub healthy: Option<bool>,
    /// Default true.
    pub enabled: Option<bool>,
    /// Default true.
    pub ephemeral: Option<bool>,
    /// Default `DEFAULT`.
    pub cluster_name: Option<String>,
    /// Informational; the request's service wins.
    pub service_name: Option<String>,
    /// Instance metadata.
    pub metadata: Option<BTreeMap<String, String>>,
}

macro_rules! message {
    ($name:ident) => {
        impl Message for $name {
            const TYPE: &'static str = stringify!($name);
        }
    };
}

/// The first call on a new connection (unary, before the stream).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerCheckRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
}
message!(ServerCheckRequest);

/// The first message on the bidirectional stream; it has no answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionSetupRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// e.g. `Nacos-Java-Client:v2.4.0`.
    pub client_version: Option<String>,
    /// The namespace the client works in.
    pub tenant: Option<String>,
    /// Client labels (`module`, `source`, ...).
    pub labels: BTreeMap<String, String>,
}
message!(ConnectionSetupRequest);

/// The client's keep-alive (unary).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HealthCheckRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
}
message!(HealthCheckRequest);

/// Register or deregister one instance.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InstanceRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// `registerInstance` or `deregisterInstance`.
    pub r#type: Option<String>,
    /// The instance.
    pub instance: Option<WireInstance>,
}
message!(InstanceRequest);

/// Register or deregister one persistent instance (Nacos 2.3+).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PersistentInstanceRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// `registerInstance` or `deregisterInstance`.
    pub r#type: Option<String>,
    /// The instance.
    pub instance: Option<WireInstance>,
}
message!(PersistentInstanceRequest);

/// Replace the connection's instances of one service with these.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BatchInstanceRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// `batchRegisterInstance` (or `batchDeregisterInstance`).
    pub r#type: Option<String>,
    /// The instances.
    pub instances: Option<Vec<WireInstance>>,
}
message!(BatchInstanceRequest);

/// Subscribe (or unsubscribe) the connection to a service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscribeServiceRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// True to subscribe, false to unsubscribe.
    pub subscribe: Option<bool>,
    /// Comma-joined cluster names, `""` for all.
    pub clusters: Option<String>,
}
message!(SubscribeServiceRequest);

/// One query of a service's instances.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceQueryRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// Comma-joined cluster names, `""` for all.
    pub cluster: Option<String>,
    /// Only healthy instances.
    pub healthy_only: Option<bool>,
    /// Ignored: 2.x pushes over the connection.
    pub udp_port: Option<i64>,
}
message!(ServiceQueryRequest);

/// One page of service names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceListRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace, service, group.
    #[serde(flatten)]
    pub naming: NamingHead,
    /// Page number, from 1.
    pub page_no: Option<i64>,
    /// Page size.
    pub page_size: Option<i64>,
    /// A selector expression (ignored, as Nacos ignores `none`).
    pub selector: Option<String>,
}
message!(ServiceListRequest);

/// The server's push of a service's new state (sent on the stream).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NotifySubscriberRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
    /// Namespace id.
    pub namespace: Option<String>,
    /// The service, ungrouped.
    pub service_name: Option<String>,
    /// The group.
    pub group_name: Option<String>,
    /// The state.
    pub service_info: Option<ServiceInfo>,
}
message!(NotifySubscriberRequest);

/// The server's "are you there" to a quiet connection (sent on the stream).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientDetectionRequest {
    /// Request id and headers.
    #[serde(flatten)]
    pub head: RequestHead,
}
message!(ClientDetectionRequest);

/// Fields every response carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResponseHead {
    /// 200 success, 500 failure.
    pub result_code: i32,
    /// 0 on success; Nacos's error code otherwise.
    pub error_code: i32,
    /// Why it failed. Left out when `None`: the Python client refuses `null`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The request's id (left out when `None`, as `message`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `resultCode == 200`, as Java's getter writes it.
    pub success: bool,
}

impl Default for ResponseHead {
    fn default() -> Self {
        ResponseHead::ok(None)
    }
}

impl ResponseHead {
    /// A success answering `request_id`.
    pub fn ok(request_id: Option<String>) -> Self {
        ResponseHead {
            result_code: 200,
            error_code: 0,
            message: None,
            request_id,
            success: true,
        }
    }

    /// The JSON of a response made of this head and one field whose value is
    /// already JSON (`raw`, e.g. a cached `serviceInfo`): the head is written by
    /// serde as for any response, then the field is spliced in before the
    /// closing brace, so a cached body is copied once and never re-encoded.
    pub fn encode_with(&self, field: &str, raw: &[u8]) -> Vec<u8> {
        // 96 for the head, 32 to spare for the request id the handler appends
        // in place (`Payload::answering`).
        let mut out = Vec::with_capacity(128 + field.len() + raw.len());
        // Numbers, booleans and strings: serialising cannot fail.
        let _ = serde_json::to_writer(&mut out, self);
        out.pop(); // the head's `}`
        out.extend_from_slice(b",\"");
        out.extend_from_slice(field.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(raw);
        out.push(b'}');
        out
    }

    /// A failure with Nacos's `error_code` and text.
    pub fn fail(request_id: Option<String>, error_code: i32, message: String) -> Self {
        ResponseHead {
            result_code: 500,
            error_code,
            message: Some(message),
            request_id,
            success: false,
        }
    }
}

impl ResponseHead {
    /// Writes the head's fields into a response object being serialised.
    fn write_fields<S: serde::ser::SerializeStruct>(&self, out: &mut S) -> Result<(), S::Error> {
        out.serialize_field("resultCode", &self.result_code)?;
        out.serialize_field("errorCode", &self.error_code)?;
        match &self.message {
            Some(m) => out.serialize_field("message", m)?,
            None => out.skip_field("message")?,
        }
        match &self.request_id {
            Some(id) => out.serialize_field("requestId", id)?,
            None => out.skip_field("requestId")?,
        }
        out.serialize_field("success", &self.success)
    }
}

// Responses are read with serde's derive (the head flattened in), but written
// by hand: serde writes a flattened struct through a map serializer field by
// field, which was most of the cost of encoding an answer the server sends for
// every request. Same fields, same order, same JSON.
macro_rules! response {
    ($(#[$doc:meta])* $name:ident {
        $($(#[$fdoc:meta])* $field:ident as $json:literal : $ty:ty),* $(,)?
    }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        pub struct $name {
            /// Result and error codes, message, request id.
            #[serde(flatten)]
            pub head: ResponseHead,
            $($(#[$fdoc])* pub $field: $ty,)*
        }
        message!($name);

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct as _;
                let fields = <[&str]>::len(&[$($json),*]);
                let mut out = s.serialize_struct(stringify!($name), 5 + fields)?;
                self.head.write_fields(&mut out)?;
                $(out.serialize_field($json, &self.$field)?;)*
                out.end()
            }
        }
    };
}

response!(
    /// Answers [`ServerCheckRequest`] with the connection's id.
    ServerCheckResponse {
        /// `<millis>_<client ip>_<client port>`.
        connection_id as "connectionId": Option<String>,
        /// False: clients then skip waiting for a `SetupAckRequest`.
        support_ability_negotiation as "supportAbilityNegotiation": bool,
    }
);
response!(
    /// Answers [`HealthCheckRequest`].
    HealthCheckResponse {}
);
response!(
    /// Answers [`InstanceRequest`] and [`PersistentInstanceRequest`].
    InstanceResponse {
        /// The request's `type`.
        r#type as "type": Option<String>,
    }
);
response!(
    /// Answers [`BatchInstanceRequest`].
    BatchInstanceResponse {
        /// The request's `type`.
        r#type as "type": Option<String>,
    }
);
response!(
    /// Answers [`SubscribeServiceRequest`] with the current state.
    SubscribeServiceResponse {
        /// The service's state for the subscribed clusters.
        service_info as "serviceInfo": Option<ServiceInfo>,
    }
);
response!(
    /// Answers [`ServiceQueryRequest`].
    QueryServiceResponse {
        /// The service's state.
        service_info as "serviceInfo": Option<ServiceInfo>,
    }
);
response!(
    /// Answers [`ServiceListRequest`].
    ServiceListResponse {
        /// Services on all pages.
        count as "count": i64,
        /// This page's names, ungrouped.
        service_names as "serviceNames": Vec<String>,
    }
);
response!(
    /// A client's answer to [`NotifySubscriberRequest`].
    NotifySubscriberResponse {}
);
response!(
    /// A client's answer to [`ClientDetectionRequest`].
    ClientDetectionResponse {}
);
response!(
    /// What the server answers instead of a handler's response when it refuses a
    /// request; `errorCode` says why (see [`super::code`]).
    ErrorResponse {}
);

/// A service's state as 2.x clients read it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceInfo {
    /// The service name (clients accept it grouped or not).
    pub name: String,
    /// The group.
    pub group_name: String,
    /// The clusters asked for, echoed: clients key their cache on it.
    pub clusters: String,
    /// How long the client may cache this.
    pub cache_millis: i64,
    /// The instances.
    pub hosts: Vec<Host>,
    /// Server time of this state, ms.
    pub last_ref_time: i64,
    /// Changes when the hosts change.
    pub checksum: String,
    /// Always false here.
    #[serde(rename = "allIPs")]
    pub all_ips: bool,
    /// Whether protect-threshold mode returned every host.
    pub reach_protection_threshold: bool,
}

/// One instance in a [`ServiceInfo`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Host {
    /// `ip#port#cluster#group@@name`.
    pub instance_id: String,
    /// IP.
    pub ip: String,
    /// Port.
    pub port: i64,
    /// Weight.
    pub weight: f64,
    /// Healthy.
    pub healthy: bool,
    /// Enabled.
    pub enabled: bool,
    /// Ephemeral.
    pub ephemeral: bool,
    /// Cluster.
    pub cluster_name: String,
    /// Grouped service name.
    pub service_name: String,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
}

impl Default for Host {
    fn default() -> Self {
        Host {
            instance_id: String::new(),
            ip: String::new(),
            port: 0,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            cluster_name: String::new(),
            service_name: String::new(),
            metadata: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_field_is_spliced_after_the_head() {
        let head = ResponseHead::ok(Some("7".into()));
        let json = head.encode_with("serviceInfo", br#"{"name":"a","hosts":[]}"#);
        let back: QueryServiceResponse = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.head, head);
        assert_eq!(back.service_info.unwrap().name, "a");
        let failed = ResponseHead::fail(None, 500, "no".into()).encode_with("x", b"1");
        let value: serde_json::Value = serde_json::from_slice(&failed).unwrap();
        assert_eq!(
            (value["x"].as_i64(), value["success"].as_bool()),
            (Some(1), Some(false))
        );
    }
}
