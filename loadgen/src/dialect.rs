//! The HTTP dialects the HTTP fleet speaks: what each operation's request is and
//! what its answer means.
//!
//! - [`Dialect::V1`]: Nacos 1.x (`/nacos/v1/ns/...`): a register answers `ok`, a beat
//!   answers a `BeatResponse` (20404 re-registers), lists carry `udpPort` and the
//!   registry pushes to the subscriber's UDP socket.
//! - [`Dialect::V3`]: the v3 client API of Nacos 3.x (`/nacos/v3/client/ns/...`,
//!   `InstanceOpenApiController`), what a 3.2+ server without the legacy adapter
//!   serves: register, heartbeat (`POST /instance?heartBeat=true`) and deregister
//!   answer the `{"code":0,"message":"success","data":"ok"}` envelope, a heartbeat
//!   of an unknown instance answers code 21003 (the client registers again), and a
//!   list answers the envelope around an array of instances. 3.x deleted UDP push,
//!   so v3 subscribers only poll.
//!
//! The parameters of both are Nacos's `InstanceForm` names; v3 sends the service
//! and group apart (`serviceName`, `groupName`) where v1 sends them grouped.

use registry_proto::http1::Method;
use registry_proto::naming::client::{self, InstanceSpec, ListSpec};
use registry_proto::openapi::envelope::Envelope;
use registry_proto::params::QueryWriter;

use crate::fleet::Endpoint;

/// The v3 client instance path.
const V3_INSTANCE: &str = "/nacos/v3/client/ns/instance";
/// The v3 client list path.
const V3_LIST: &str = "/nacos/v3/client/ns/instance/list";
/// The envelope of a v3 write that succeeded, as Nacos writes it.
const V3_OK: &[u8] = br#"{"code":0,"message":"success","data":"ok"}"#;
/// `ErrorCode.INSTANCE_NOT_FOUND`: a heartbeat of an instance the server lacks.
const V3_NOT_FOUND: i64 = 21003;

/// An HTTP fleet's API generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Nacos 1.x: `/nacos/v1/ns/...`, beats, UDP push.
    V1,
    /// The v3 client API: `/nacos/v3/client/ns/...`, heartbeats, no push.
    V3,
}

/// What a heartbeat's answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heartbeat {
    /// Renewed.
    Renewed,
    /// The server does not hold the instance: register it again.
    NotFound,
}

impl Dialect {
    /// Whether the server pushes to the fleet's subscribers (UDP sockets are bound).
    pub fn pushes(self) -> bool {
        self == Dialect::V1
    }

    /// A register (also a re-registration): its path into `out`, and its method.
    pub fn register(self, out: &mut String, spec: &InstanceSpec<'_>) -> Method {
        match self {
            Dialect::V1 => client::register(out, spec),
            Dialect::V3 => {
                v3_identity(out, spec)
                    .display("weight", spec.weight)
                    .display("enabled", spec.enabled)
                    .display("healthy", spec.healthy)
                    .display("ephemeral", spec.ephemeral);
            }
        }
        Method::Post
    }

    /// A deregister.
    pub fn deregister(self, out: &mut String, spec: &InstanceSpec<'_>) -> Method {
        match self {
            Dialect::V1 => client::deregister(out, spec),
            Dialect::V3 => {
                v3_identity(out, spec).display("ephemeral", spec.ephemeral);
            }
        }
        Method::Delete
    }

    /// A beat that carries only the instance's identity: v1's light beat, v3's
    /// heartbeat (v3 has no other).
    pub fn beat(self, out: &mut String, spec: &InstanceSpec<'_>) -> Method {
        match self {
            Dialect::V1 => {
                client::beat_light(out, spec);
                Method::Put
            }
            Dialect::V3 => {
                v3_identity(out, spec)
                    .display("ephemeral", spec.ephemeral)
                    .display("heartBeat", true);
                Method::Post
            }
        }
    }

    /// A list of one service (a query, or a subscriber's poll).
    pub fn list(self, out: &mut String, spec: &ListSpec<'_>, cluster: &str) {
        match self {
            Dialect::V1 => client::list(out, spec),
            Dialect::V3 => {
                // The v3 list defaults `clusterName` to DEFAULT: name the fleet's.
                QueryWriter::new(out, V3_LIST)
                    .param("namespaceId", spec.namespace_id)
                    .param("groupName", spec.service.group)
                    .param("serviceName", spec.service.name)
                    .param("clusterName", cluster);
            }
        }
    }

    /// Whether a register or deregister answer body says it was applied.
    pub fn write_ok(self, body: &[u8]) -> bool {
        match self {
            Dialect::V1 => body.trim_ascii() == b"ok",
            Dialect::V3 => body == V3_OK || Envelope::parse(body).is_ok_and(|e| e.code == 0),
        }
    }

    /// A v3 heartbeat's answer (`None`: not an envelope, or a refusal).
    pub fn v3_heartbeat(body: &[u8]) -> Option<Heartbeat> {
        if body == V3_OK {
            return Some(Heartbeat::Renewed);
        }
        match Envelope::parse(body).ok()?.code {
            0 => Some(Heartbeat::Renewed),
            V3_NOT_FOUND => Some(Heartbeat::NotFound),
            _ => None,
        }
    }
}

/// The endpoints of a v3 list answer (`None`: not a successful list envelope).
/// Hosts whose IP is not IPv4 text count by a placeholder, so they still mismatch.
pub fn v3_endpoints(body: &[u8]) -> Option<Vec<Endpoint>> {
    #[derive(serde::Deserialize)]
    struct Host {
        ip: String,
        port: u16,
    }
    #[derive(serde::Deserialize)]
    struct Listed {
        code: i64,
        data: Vec<Host>,
    }
    let listed: Listed = serde_json::from_slice(body).ok()?;
    (listed.code == 0).then(|| {
        listed
            .data
            .iter()
            .map(|h| Endpoint::parse(&h.ip, h.port).unwrap_or(Endpoint(u64::MAX)))
            .collect()
    })
}

/// The identity of a v3 instance request: namespace, group, service, cluster,
/// address.
fn v3_identity<'o>(out: &'o mut String, spec: &InstanceSpec<'_>) -> QueryWriter<'o> {
    let mut q = QueryWriter::new(out, V3_INSTANCE);
    q.param("namespaceId", spec.namespace_id)
        .param("groupName", spec.service.group)
        .param("serviceName", spec.service.name)
        .param("clusterName", spec.cluster)
        .param("ip", spec.ip)
        .display("port", spec.port);
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_proto::naming::ServiceName;

    #[test]
    fn v3_requests_name_the_v3_client_api() {
        let spec = InstanceSpec {
            namespace_id: "public",
            cluster: "c1",
            ..InstanceSpec::new(ServiceName::new("G", "svc-1"), "10.0.0.1", 8080)
        };
        let mut path = String::new();
        assert_eq!(Dialect::V3.beat(&mut path, &spec), Method::Post);
        assert_eq!(
            path,
            "/nacos/v3/client/ns/instance?namespaceId=public&groupName=G&serviceName=svc-1\
             &clusterName=c1&ip=10.0.0.1&port=8080&ephemeral=true&heartBeat=true"
        );
        path.clear();
        assert_eq!(Dialect::V3.deregister(&mut path, &spec), Method::Delete);
        assert!(path.ends_with("&port=8080&ephemeral=true"), "{path}");
    }

    #[test]
    fn v3_answers_are_read_from_the_envelope() {
        let d = Dialect::V3;
        assert!(d.write_ok(V3_OK));
        assert!(d.write_ok(br#"{"code": 0, "message": "success", "data": "ok"}"#));
        assert!(!d.write_ok(br#"{"code":21004,"message":"instance error","data":"x"}"#));
        assert!(!d.write_ok(b"ok"));
        assert_eq!(Dialect::v3_heartbeat(V3_OK), Some(Heartbeat::Renewed));
        assert_eq!(
            Dialect::v3_heartbeat(br#"{"code":21003,"message":"instance not found","data":null}"#),
            Some(Heartbeat::NotFound)
        );
        assert_eq!(Dialect::v3_heartbeat(b"garbage"), None);
        let listed = br#"{"code":0,"message":"success","data":[{"ip":"10.0.0.2","port":80,"weight":1.0},{"ip":"::1","port":81}]}"#;
        let e = v3_endpoints(listed).unwrap();
        assert_eq!(e[0], Endpoint::parse("10.0.0.2", 80).unwrap());
        assert_eq!(e[1], Endpoint(u64::MAX));
        assert_eq!(
            v3_endpoints(br#"{"code":20004,"message":"x","data":null}"#),
            None
        );
    }
}
