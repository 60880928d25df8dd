//! The two protobuf messages of Nacos's `nacos_grpc_service.proto`, declared in Rust
//! (no `protoc` in the build), and the JSON body they carry.
//!
//! ```text
//! message Metadata { string type = 3; string clientIp = 8; map<string,string> headers = 7; }
//! message Payload  { Metadata metadata = 2; google.protobuf.Any body = 3; }
//! ```
//!
//! `Any` is declared here too (`type_url = 1`, `value = 2`, as in `any.proto`): clients
//! leave `type_url` empty and put the request or response as UTF-8 JSON in `value`. The
//! body is a [`bytes::Bytes`] so one encoded push is shared by every connection it goes
//! to without a copy.

use std::collections::HashMap;

use bytes::{BufMut as _, Bytes, BytesMut};

/// `Metadata`: the Java simple class name of the body, the client's IP as it sees
/// itself (informational only), and request headers such as `accessToken`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    /// The body's type name, e.g. `InstanceRequest`.
    #[prost(string, tag = "3")]
    pub r#type: String,
    /// The client's own idea of its IP; never trusted for anything.
    #[prost(string, tag = "8")]
    pub client_ip: String,
    /// Request headers (`accessToken`, `app`, ...).
    #[prost(map = "string, string", tag = "7")]
    pub headers: HashMap<String, String>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    /// Left empty by every Nacos client.
    #[prost(string, tag = "1")]
    pub type_url: String,
    /// The JSON body.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `Payload`: one request or response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Payload {
    /// Type name and headers.
    #[prost(message, optional, tag = "2")]
    pub metadata: Option<Metadata>,
    /// The JSON body.
    #[prost(message, optional, tag = "3")]
    pub body: Option<Any>,
}

impl Payload {
    /// A payload of `type_name` carrying `json`.
    pub fn new(type_name: &str, json: impl Into<Bytes>) -> Payload {
        Payload {
            metadata: Some(Metadata {
                r#type: type_name.to_owned(),
                client_ip: String::new(),
                headers: HashMap::new(),
            }),
            body: Some(Any {
                type_url: String::new(),
                value: json.into(),
            }),
        }
    }

    /// A payload of `T`'s type name with `value` serialised as JSON.
    pub fn of<T: super::Message + serde::Serialize>(value: &T) -> Payload {
        // Plain structs of strings, numbers and maps of strings: cannot fail.
        let json = serde_json::to_vec(value).unwrap_or_default();
        Payload::new(T::TYPE, json)
    }

    /// This answer with `"requestId"` set to `request_id`, the one place an answer
    /// gets the id of the request it answers (the server builds its answers without
    /// it). The field is written last in the object, so that the answer's own buffer
    /// takes it in place: an answer is built with room to spare at its end
    /// (`ResponseHead::encode_with`) and is this payload's alone, so nothing is
    /// copied; a shared body is copied once. A client reads the JSON by name, not by
    /// position. `None`, or a body that is not an object, leaves the answer as it is.
    #[must_use]
    pub fn answering(mut self, request_id: Option<&str>) -> Payload {
        let (Some(id), Some(body)) = (request_id, self.body.as_mut()) else {
            return self;
        };
        if body.value.len() < 2 || body.value[0] != b'{' || body.value[body.value.len() - 1] != b'}'
        {
            return self;
        }
        let empty = body.value.len() == 2;
        let value = std::mem::take(&mut body.value);
        let mut json = value
            .try_into_mut()
            .unwrap_or_else(|shared| BytesMut::from(&shared[..]));
        json.truncate(json.len() - 1);
        json.reserve(id.len() + 16);
        json.extend_from_slice(if empty {
            b"\"requestId\":"
        } else {
            b",\"requestId\":"
        });
        // A string: serialising cannot fail.
        let _ = serde_json::to_writer((&mut json).writer(), id);
        json.extend_from_slice(b"}");
        body.value = json.freeze();
        self
    }

    /// The body's type name, `""` when absent.
    pub fn type_name(&self) -> &str {
        self.metadata.as_ref().map_or("", |m| m.r#type.as_str())
    }

    /// The JSON body, empty when absent.
    pub fn json(&self) -> &[u8] {
        self.body.as_ref().map_or(&[][..], |b| &b.value[..])
    }

    /// A request header, if the client sent it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.headers.get(name))
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    #[test]
    fn field_numbers_match_the_nacos_proto() {
        let p = Payload::new("HealthCheckRequest", &b"{}"[..]);
        let bytes = p.encode_to_vec();
        // Payload.metadata = field 2 (length-delimited: 0x12), then Metadata.type =
        // field 3 (0x1a); Payload.body = field 3 (0x1a) with Any.value = field 2 (0x12).
        assert_eq!(bytes[0], 0x12);
        assert_eq!(bytes[2], 0x1a);
        let body_at = 2 + usize::from(bytes[1]);
        assert_eq!(bytes[body_at], 0x1a);
        assert_eq!(bytes[body_at + 2], 0x12);
        let back = Payload::decode(&bytes[..]).unwrap();
        assert_eq!(back.type_name(), "HealthCheckRequest");
        assert_eq!(back.json(), b"{}");
    }

    #[test]
    fn an_answer_gets_its_request_id_once_as_a_json_field() {
        let ok = Payload::new("X", &br#"{"resultCode":200}"#[..]).answering(Some("7\"q"));
        let v: serde_json::Value = serde_json::from_slice(ok.json()).unwrap();
        assert_eq!(v["requestId"], "7\"q");
        assert_eq!(v["resultCode"], 200);
        let empty = Payload::new("X", &b"{}"[..]).answering(Some("1"));
        assert_eq!(empty.json(), br#"{"requestId":"1"}"#);
        let none = Payload::new("X", &b"{}"[..]).answering(None);
        assert_eq!(none.json(), b"{}");
    }

    /// The id goes into the answer's own buffer when it has room: the bytes a
    /// handler built are the bytes sent, not a copy of them.
    #[test]
    fn an_answer_with_room_takes_its_id_in_place() {
        let mut json = Vec::with_capacity(64);
        json.extend_from_slice(br#"{"resultCode":200}"#);
        let before = json.as_ptr();
        let answered = Payload::new("X", json).answering(Some("42"));
        assert_eq!(answered.json(), br#"{"resultCode":200,"requestId":"42"}"#);
        assert_eq!(answered.json().as_ptr(), before);
        // A body shared with another owner (a push sent to many) is left alone.
        let shared = Bytes::from_static(br#"{"a":1}"#);
        let copy = Payload::new("X", shared.clone()).answering(Some("1"));
        assert_eq!(copy.json(), br#"{"a":1,"requestId":"1"}"#);
        assert_eq!(&shared[..], br#"{"a":1}"#);
    }
}
