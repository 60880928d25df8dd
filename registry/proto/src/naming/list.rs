//! `GET /nacos/v1/ns/instance/list`: the query/subscribe request and the service info
//! body, which is also the `data` of a UDP push.
//!
//! The server side writes a borrowing view ([`ServiceInfoView`] over [`HostView`]s) that
//! carries both the 1.4 fields (`dom`, `useSpecifiedURL`, `env`, service `metadata`) and
//! the 2.x fields (`groupName`, `allIPs`, `reachProtectionThreshold`, `valid`, host
//! heartbeat settings), so every known client finds what it reads. The client side reads
//! either shape into the owned [`ServiceInfo`] / [`Host`].

use std::collections::BTreeMap;

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

use super::instance::InstanceIdField;
use super::{
    namespace_id, parse_java_int, Metadata, ParseLimits, ServiceName, DEFAULT_BEAT_INTERVAL_MS,
    DEFAULT_BEAT_TIMEOUT_MS, DEFAULT_IP_DELETE_TIMEOUT_MS,
};
use crate::error::ProtoError;
use crate::params::Params;

/// A list (and, with `udpPort`, subscribe) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListRequest<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service, grouped by the `groupName` rewrite.
    pub service: ServiceName<'a>,
    /// `clusters` exactly as sent (trimmed), comma-separated, `""` for all. Echo it in
    /// the response: clients key their cache on `name` + `clusters`.
    pub clusters: &'a str,
    /// `healthyOnly`, default false.
    pub healthy_only: bool,
    /// `udpPort`; 0 (also for absent or negative values, which Nacos treats as "no
    /// push") means the caller does not subscribe.
    pub udp_port: u16,
    /// `clientIP` as sent. Parsed for completeness but never a push target: pushes go
    /// to the HTTP peer's address so no caller can aim them at a third party.
    pub client_ip: &'a str,
    /// `app`, default `""`.
    pub app: &'a str,
    /// `tid` (the tenant), default `""`.
    pub tid: &'a str,
}

impl<'a> ListRequest<'a> {
    /// Reads a list request.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let udp_port = match params.optional("udpPort") {
            None => 0,
            Some(s) => {
                let v = parse_java_int(s)?;
                if v <= 0 {
                    0
                } else {
                    u16::try_from(v).map_err(|_| ProtoError::OutOfRange {
                        param: "udpPort",
                        value: i64::from(v),
                        min: 0,
                        max: 65_535,
                    })?
                }
            }
        };
        Ok(ListRequest {
            namespace_id,
            service,
            clusters: params.optional_or("clusters", ""),
            healthy_only: params.bool_or("healthyOnly", false),
            udp_port,
            client_ip: params.optional_or("clientIP", ""),
            app: params.optional_or("app", ""),
            tid: params.optional_or("tid", ""),
        })
    }

    /// The requested cluster names, without empty entries; empty means all.
    pub fn cluster_list(&self) -> impl Iterator<Item = &'a str> {
        self.clusters
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
    }
}

/// Per-instance heartbeat settings reported in each host (from `preserved.*` metadata
/// or the defaults 5 s / 15 s / 30 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatTimes {
    /// `instanceHeartBeatInterval`, ms.
    pub interval_ms: u64,
    /// `instanceHeartBeatTimeOut`, ms.
    pub timeout_ms: u64,
    /// `ipDeleteTimeout`, ms.
    pub delete_timeout_ms: u64,
}

impl Default for HeartbeatTimes {
    fn default() -> Self {
        HeartbeatTimes {
            interval_ms: DEFAULT_BEAT_INTERVAL_MS,
            timeout_ms: DEFAULT_BEAT_TIMEOUT_MS,
            delete_timeout_ms: DEFAULT_IP_DELETE_TIMEOUT_MS,
        }
    }
}

/// One host in a list response, borrowing from the server's snapshot. `M` is anything
/// that serializes as a JSON object of strings.
#[derive(Debug, Clone, Copy)]
pub struct HostView<'a, M> {
    /// `ip`.
    pub ip: &'a str,
    /// `port`.
    pub port: u16,
    /// `healthy` (also written as the deprecated `valid`).
    pub healthy: bool,
    /// `enabled`.
    pub enabled: bool,
    /// `weight`.
    pub weight: f64,
    /// `ephemeral`.
    pub ephemeral: bool,
    /// `clusterName`.
    pub cluster_name: &'a str,
    /// The service (`serviceName` is written grouped).
    pub service: ServiceName<'a>,
    /// `instanceId`; `None` writes the `simple` id `ip#port#cluster#group@@name`.
    pub instance_id: Option<&'a str>,
    /// `metadata`.
    pub metadata: M,
    /// Heartbeat settings.
    pub heartbeat: HeartbeatTimes,
}

impl<M: Serialize> Serialize for HostView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Host", 16)?;
        st.serialize_field("ip", self.ip)?;
        st.serialize_field("port", &self.port)?;
        st.serialize_field("valid", &self.healthy)?;
        st.serialize_field("healthy", &self.healthy)?;
        st.serialize_field("marked", &false)?;
        st.serialize_field(
            "instanceId",
            &InstanceIdField {
                id: self.instance_id,
                ip: self.ip,
                port: self.port,
                cluster: self.cluster_name,
                service: &self.service,
            },
        )?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("enabled", &self.enabled)?;
        st.serialize_field("weight", &self.weight)?;
        st.serialize_field("clusterName", self.cluster_name)?;
        st.serialize_field("serviceName", &self.service)?;
        st.serialize_field("ephemeral", &self.ephemeral)?;
        st.serialize_field("instanceHeartBeatInterval", &self.heartbeat.interval_ms)?;
        st.serialize_field("instanceHeartBeatTimeOut", &self.heartbeat.timeout_ms)?;
        st.serialize_field("ipDeleteTimeout", &self.heartbeat.delete_timeout_ms)?;
        st.serialize_field("instanceIdGenerator", "simple")?;
        st.end()
    }
}

/// A list response (and push `data`), borrowing from the server's snapshot.
///
/// Written fields, in order: `name` (grouped), `groupName`, `clusters`, `cacheMillis`,
/// `hosts`, `lastRefTime`, `checksum`, `allIPs` (false), `reachProtectionThreshold`,
/// `valid` (true), `dom` (grouped), `useSpecifiedURL` (false), `env` (`""`), `metadata`.
#[derive(Debug, Clone, Copy)]
pub struct ServiceInfoView<'a, M> {
    /// The service; `name` and `dom` are written grouped (`DEFAULT_GROUP@@demo`).
    pub service: ServiceName<'a>,
    /// `clusters`, echoed exactly as requested.
    pub clusters: &'a str,
    /// `cacheMillis`: 3000 normally, 10000 for push subscribers and in pushes.
    pub cache_millis: u64,
    /// `hosts`.
    pub hosts: &'a [HostView<'a, M>],
    /// `lastRefTime`: wall-clock ms of this answer.
    pub last_ref_time: u64,
    /// `checksum`: any string that changes when the host list changes.
    pub checksum: &'a str,
    /// `reachProtectionThreshold`: whether protect-threshold mode returned all hosts.
    pub reach_protection_threshold: bool,
    /// The service `metadata`.
    pub metadata: M,
}

impl<M: Serialize> Serialize for ServiceInfoView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ServiceInfo", 14)?;
        st.serialize_field("name", &self.service)?;
        st.serialize_field("groupName", self.service.group)?;
        st.serialize_field("clusters", self.clusters)?;
        st.serialize_field("cacheMillis", &self.cache_millis)?;
        st.serialize_field("hosts", self.hosts)?;
        st.serialize_field("lastRefTime", &self.last_ref_time)?;
        st.serialize_field("checksum", self.checksum)?;
        st.serialize_field("allIPs", &false)?;
        st.serialize_field("reachProtectionThreshold", &self.reach_protection_threshold)?;
        st.serialize_field("valid", &true)?;
        st.serialize_field("dom", &self.service)?;
        st.serialize_field("useSpecifiedURL", &false)?;
        st.serialize_field("env", "")?;
        st.serialize_field("metadata", &self.metadata)?;
        st.end()
    }
}

impl<M: Serialize> ServiceInfoView<'_, M> {
    /// Appends the JSON body. Fails only if `M`'s `Serialize` fails.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(out, self)
    }
}

/// A list response or push `data` as a client reads it: the 1.4 shape (`dom`, no
/// `groupName`) and the 2.x shape both parse; absent fields take their defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceInfo {
    /// `name` (grouped from our server and a Java-client-facing Nacos).
    pub name: String,
    /// `dom` (1.4 servers).
    pub dom: Option<String>,
    /// `groupName` (2.x servers and ours).
    pub group_name: Option<String>,
    /// `clusters` as echoed.
    pub clusters: String,
    /// `cacheMillis`.
    pub cache_millis: u64,
    /// `hosts`.
    pub hosts: Vec<Host>,
    /// `lastRefTime`.
    pub last_ref_time: u64,
    /// `checksum`.
    pub checksum: String,
    /// `allIPs`.
    #[serde(rename = "allIPs")]
    pub all_ips: bool,
    /// `reachProtectionThreshold`.
    pub reach_protection_threshold: bool,
    /// `valid` (absent on 1.4 servers: true).
    pub valid: bool,
    /// Service `metadata` (1.4 servers and ours).
    pub metadata: Metadata,
}

impl Default for ServiceInfo {
    fn default() -> Self {
        ServiceInfo {
            name: String::new(),
            dom: None,
            group_name: None,
            clusters: String::new(),
            cache_millis: 0,
            hosts: Vec::new(),
            last_ref_time: 0,
            checksum: String::new(),
            all_ips: false,
            reach_protection_threshold: false,
            valid: true,
            metadata: Metadata::new(),
        }
    }
}

impl ServiceInfo {
    /// Parses a list response body or push `data`.
    pub fn parse(json: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }

    /// The grouped service name: `name`, or `dom` when `name` is empty, with
    /// `groupName@@` put in front when the server sent it ungrouped.
    pub fn grouped_name(&self) -> String {
        let name = if self.name.is_empty() {
            self.dom.as_deref().unwrap_or("")
        } else {
            &self.name
        };
        match &self.group_name {
            Some(g) if !name.contains(super::GROUP_SEPARATOR) && !g.is_empty() => {
                format!("{g}{}{name}", super::GROUP_SEPARATOR)
            }
            _ => name.to_owned(),
        }
    }

    /// `(ip, port)` of every host, sorted: what convergence checks compare.
    pub fn endpoints(&self) -> Vec<(String, u16)> {
        let mut v: Vec<_> = self.hosts.iter().map(|h| (h.ip.clone(), h.port)).collect();
        v.sort();
        v
    }
}

/// One host as a client reads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Host {
    /// `ip`.
    pub ip: String,
    /// `port`.
    pub port: u16,
    /// `healthy` (absent on old servers: see [`Host::is_healthy`]).
    pub healthy: Option<bool>,
    /// `valid`, the deprecated alias of healthy.
    pub valid: Option<bool>,
    /// `marked`.
    pub marked: bool,
    /// `instanceId`.
    pub instance_id: Option<String>,
    /// `metadata`.
    pub metadata: BTreeMap<String, String>,
    /// `enabled` (true when absent).
    pub enabled: bool,
    /// `weight` (1 when absent).
    pub weight: f64,
    /// `clusterName`.
    pub cluster_name: String,
    /// `serviceName`.
    pub service_name: String,
    /// `ephemeral` (true when absent).
    pub ephemeral: bool,
    /// `instanceHeartBeatInterval` (2.x shape and ours).
    pub instance_heart_beat_interval: Option<u64>,
    /// `instanceHeartBeatTimeOut`.
    #[serde(rename = "instanceHeartBeatTimeOut")]
    pub instance_heart_beat_time_out: Option<u64>,
    /// `ipDeleteTimeout`.
    pub ip_delete_timeout: Option<u64>,
    /// `instanceIdGenerator`.
    pub instance_id_generator: Option<String>,
}

impl Default for Host {
    fn default() -> Self {
        Host {
            ip: String::new(),
            port: 0,
            healthy: None,
            valid: None,
            marked: false,
            instance_id: None,
            metadata: BTreeMap::new(),
            enabled: true,
            weight: 1.0,
            cluster_name: String::new(),
            service_name: String::new(),
            ephemeral: true,
            instance_heart_beat_interval: None,
            instance_heart_beat_time_out: None,
            ip_delete_timeout: None,
            instance_id_generator: None,
        }
    }
}

impl Host {
    /// `healthy`, else `valid`, else true (the Node client's reading).
    pub fn is_healthy(&self) -> bool {
        self.healthy.or(self.valid).unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_params() {
        let p = Params::parse(
            "namespaceId=public&serviceName=DEFAULT_GROUP%40%40demo&clusters=DEFAULT&udpPort=47319&clientIP=192.0.2.2&healthyOnly=false",
            None,
        )
        .unwrap();
        let r = ListRequest::parse(&p, &ParseLimits::default()).unwrap();
        assert_eq!(r.service.to_string(), "DEFAULT_GROUP@@demo");
        assert_eq!(
            (r.clusters, r.udp_port, r.client_ip),
            ("DEFAULT", 47319, "192.0.2.2")
        );
        assert_eq!(r.cluster_list().collect::<Vec<_>>(), ["DEFAULT"]);
        let p = Params::parse("serviceName=s&udpPort=-1&clusters=a,,b", None).unwrap();
        let r = ListRequest::parse(&p, &ParseLimits::default()).unwrap();
        assert_eq!(r.udp_port, 0);
        assert_eq!(r.cluster_list().collect::<Vec<_>>(), ["a", "b"]);
        for (q, want) in [
            ("serviceName=s&udpPort=x", "For input string: \"x\""),
            (
                "serviceName=s&udpPort=70000",
                "Param 'udpPort' is illegal, it should be between 0 and 65535, current: 70000",
            ),
            ("clusters=a", "Param 'serviceName' is required."),
        ] {
            let p = Params::parse(q, None).unwrap();
            assert_eq!(
                ListRequest::parse(&p, &ParseLimits::default())
                    .unwrap_err()
                    .to_string(),
                want
            );
        }
    }

    #[test]
    fn reads_a_nacos_14_shape() {
        let body = br#"{"hosts":[{"ip":"1.1.1.1","port":80,"valid":false,"marked":false,"instanceId":"x","metadata":{},"enabled":true,"weight":1.0,"clusterName":"DEFAULT","serviceName":"DEFAULT_GROUP@@s","ephemeral":true}],"dom":"DEFAULT_GROUP@@s","name":"DEFAULT_GROUP@@s","cacheMillis":10000,"lastRefTime":1,"checksum":"abc","useSpecifiedURL":false,"clusters":"","env":"","metadata":{}}"#;
        let info = ServiceInfo::parse(body).unwrap();
        assert_eq!(info.grouped_name(), "DEFAULT_GROUP@@s");
        assert!(info.valid);
        assert!(!info.hosts[0].is_healthy());
        assert_eq!(info.endpoints(), [("1.1.1.1".to_owned(), 80)]);
    }

    #[test]
    fn groups_an_ungrouped_2x_name() {
        let info = ServiceInfo::parse(br#"{"name":"s","groupName":"G","hosts":[]}"#).unwrap();
        assert_eq!(info.grouped_name(), "G@@s");
    }
}
