//! Client-side request builders for the load generator: the path and query (and, for a
//! Java-style full beat, the form body) of each naming call, percent-encoded.
//!
//! Each builder appends to a caller-owned `String` so a worker can reuse one buffer for
//! every request it sends. Service names are sent grouped (`G%40%40svc`), which every
//! Nacos version accepts without a `groupName`. Pair the result with
//! [`crate::http1::write_request`] and the method in each builder's doc.

use super::beat::BeatInfo;
use super::{Metadata, ServiceName};
use crate::params::QueryWriter;

/// `Content-Type` of a form body (the full beat's `beat=...`).
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// One instance, as the load generator describes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceSpec<'a> {
    /// `namespaceId`.
    pub namespace_id: &'a str,
    /// The service.
    pub service: ServiceName<'a>,
    /// `ip`.
    pub ip: &'a str,
    /// `port`.
    pub port: u16,
    /// `clusterName`.
    pub cluster: &'a str,
    /// `weight`.
    pub weight: f64,
    /// `healthy`.
    pub healthy: bool,
    /// `enabled`.
    pub enabled: bool,
    /// `ephemeral`.
    pub ephemeral: bool,
    /// `metadata`, sent as JSON when present and not empty.
    pub metadata: Option<&'a Metadata>,
}

impl<'a> InstanceSpec<'a> {
    /// An instance with the Nacos defaults: namespace `public`, cluster `DEFAULT`,
    /// weight 1, healthy, enabled, ephemeral, no metadata.
    pub fn new(service: ServiceName<'a>, ip: &'a str, port: u16) -> Self {
        InstanceSpec {
            namespace_id: super::DEFAULT_NAMESPACE_ID,
            service,
            ip,
            port,
            cluster: super::DEFAULT_CLUSTER,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: None,
        }
    }

    fn identity<'o>(&self, out: &'o mut String, path: &str) -> QueryWriter<'o> {
        let mut q = QueryWriter::new(out, path);
        q.param_concat("serviceName", &self.service.parts())
            .param("namespaceId", self.namespace_id)
            .param("clusterName", self.cluster)
            .param("ip", self.ip)
            .display("port", self.port);
        q
    }
}

const INSTANCE: &str = "/nacos/v1/ns/instance";

/// `POST` — register an instance.
pub fn register(out: &mut String, spec: &InstanceSpec<'_>) {
    write_instance(out, spec);
}

/// `PUT` — update an instance (same parameters as register).
pub fn update(out: &mut String, spec: &InstanceSpec<'_>) {
    write_instance(out, spec);
}

fn write_instance(out: &mut String, spec: &InstanceSpec<'_>) {
    let mut q = spec.identity(out, INSTANCE);
    q.display("weight", spec.weight)
        .display("enabled", spec.enabled)
        .display("healthy", spec.healthy)
        .display("ephemeral", spec.ephemeral);
    if let Some(m) = spec.metadata.filter(|m| !m.is_empty()) {
        q.param("metadata", &m.to_json());
    }
}

/// `DELETE` — deregister an instance.
pub fn deregister(out: &mut String, spec: &InstanceSpec<'_>) {
    spec.identity(out, INSTANCE)
        .display("ephemeral", spec.ephemeral);
}

/// `PUT` — a light beat (identity only), what the Java client sends while the server
/// says `lightBeatEnabled`.
pub fn beat_light(out: &mut String, spec: &InstanceSpec<'_>) {
    spec.identity(out, "/nacos/v1/ns/instance/beat");
}

/// `PUT` — a full beat carrying `beat` JSON. With `form_body`, the JSON goes into that
/// form body as `beat=...` (send it with [`FORM_CONTENT_TYPE`], as the Java client
/// does); without, it goes into the query string (as the Python and Node clients do).
pub fn beat_full(out: &mut String, spec: &InstanceSpec<'_>, form_body: Option<&mut String>) {
    let json = beat_json(spec);
    let mut q = spec.identity(out, "/nacos/v1/ns/instance/beat");
    match form_body {
        Some(body) => {
            QueryWriter::form(body).param("beat", &json);
        }
        None => {
            q.param("beat", &json);
        }
    }
}

/// The `beat` JSON for an instance (Java `BeatInfo` fields).
pub fn beat_json(spec: &InstanceSpec<'_>) -> String {
    BeatInfo {
        ip: Some(spec.ip.to_owned()),
        port: Some(spec.port),
        cluster: Some(spec.cluster.to_owned()),
        service_name: spec.service.grouped(),
        weight: spec.weight,
        ephemeral: spec.ephemeral,
        metadata: spec.metadata.cloned().unwrap_or_default(),
        scheduled: true,
        period: super::DEFAULT_BEAT_INTERVAL_MS as i64,
        stopped: false,
    }
    .to_json()
}

/// A list (and optionally subscribe) call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListSpec<'a> {
    /// `namespaceId`.
    pub namespace_id: &'a str,
    /// The service.
    pub service: ServiceName<'a>,
    /// `clusters`, comma-separated, `""` for all.
    pub clusters: &'a str,
    /// `healthyOnly`.
    pub healthy_only: bool,
    /// `udpPort`: the subscriber's UDP port; 0 polls without subscribing.
    pub udp_port: u16,
    /// `clientIP`, sent when present (ignored by our server, used by a real Nacos).
    pub client_ip: Option<&'a str>,
}

/// `GET` — query a service's instances, subscribing when `udp_port` is not 0.
pub fn list(out: &mut String, spec: &ListSpec<'_>) {
    let mut q = QueryWriter::new(out, "/nacos/v1/ns/instance/list");
    q.param_concat("serviceName", &spec.service.parts())
        .param("namespaceId", spec.namespace_id)
        .param("clusters", spec.clusters)
        .display("healthyOnly", spec.healthy_only);
    if spec.udp_port != 0 {
        q.display("udpPort", spec.udp_port);
    }
    if let Some(ip) = spec.client_ip {
        q.param("clientIP", ip);
    }
}

/// `GET` — one page of service names in a group (`*` for all groups).
pub fn service_list(
    out: &mut String,
    namespace_id: &str,
    group: &str,
    page_no: u32,
    page_size: u32,
) {
    QueryWriter::new(out, "/nacos/v1/ns/service/list")
        .display("pageNo", page_no)
        .display("pageSize", page_size)
        .param("namespaceId", namespace_id)
        .param("groupName", group);
}

/// `POST` — create a service.
pub fn service_create(
    out: &mut String,
    namespace_id: &str,
    service: ServiceName<'_>,
    protect_threshold: f32,
    metadata: Option<&Metadata>,
) {
    let mut q = QueryWriter::new(out, "/nacos/v1/ns/service");
    q.param_concat("serviceName", &service.parts())
        .param("namespaceId", namespace_id)
        .display("protectThreshold", protect_threshold);
    if let Some(m) = metadata.filter(|m| !m.is_empty()) {
        q.param("metadata", &m.to_json());
    }
}

/// `DELETE` (remove) or `GET` (detail) — a service by name.
pub fn service(out: &mut String, namespace_id: &str, service: ServiceName<'_>) {
    QueryWriter::new(out, "/nacos/v1/ns/service")
        .param_concat("serviceName", &service.parts())
        .param("namespaceId", namespace_id);
}

/// `GET` — server metrics. Asks for the full body (`onlyStatus=false`), which a 2.x
/// server otherwise trims to the status.
pub fn metrics(out: &mut String) {
    QueryWriter::new(out, "/nacos/v1/ns/operator/metrics").param("onlyStatus", "false");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_exact_urls() {
        let svc = ServiceName::new("DEFAULT_GROUP", "demo");
        let spec = InstanceSpec::new(svc, "127.0.0.1", 8080);
        let mut s = String::new();
        register(&mut s, &spec);
        assert_eq!(
            s,
            "/nacos/v1/ns/instance?serviceName=DEFAULT_GROUP%40%40demo&namespaceId=public&clusterName=DEFAULT&ip=127.0.0.1&port=8080&weight=1&enabled=true&healthy=true&ephemeral=true"
        );
        s.clear();
        beat_light(&mut s, &spec);
        assert_eq!(
            s,
            "/nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40demo&namespaceId=public&clusterName=DEFAULT&ip=127.0.0.1&port=8080"
        );
        s.clear();
        list(
            &mut s,
            &ListSpec {
                namespace_id: "public",
                service: svc,
                clusters: "",
                healthy_only: false,
                udp_port: 4000,
                client_ip: None,
            },
        );
        assert_eq!(
            s,
            "/nacos/v1/ns/instance/list?serviceName=DEFAULT_GROUP%40%40demo&namespaceId=public&clusters=&healthyOnly=false&udpPort=4000"
        );
        s.clear();
        metrics(&mut s);
        assert_eq!(s, "/nacos/v1/ns/operator/metrics?onlyStatus=false");
    }

    #[test]
    fn full_beat_in_body_or_query() {
        let m = Metadata::from_pairs([("k", "v")]);
        let spec = InstanceSpec {
            metadata: Some(&m),
            ..InstanceSpec::new(ServiceName::new("G", "s"), "10.0.0.1", 1)
        };
        let (mut path, mut body) = (String::new(), String::new());
        beat_full(&mut path, &spec, Some(&mut body));
        assert!(!path.contains("beat="));
        assert!(body.starts_with("beat=%7B"));
        let p = crate::params::Params::parse("", Some(body.as_bytes())).unwrap();
        let info = BeatInfo::parse(&p.beat().unwrap().text(), &Default::default()).unwrap();
        assert_eq!(info.metadata.get("k"), Some("v"));
        assert_eq!(info.service_name, "G@@s");
        path.clear();
        beat_full(&mut path, &spec, None);
        assert!(path.contains("&beat=%7B"));
    }
}
