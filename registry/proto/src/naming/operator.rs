//! `GET /nacos/v1/ns/operator/metrics` and `GET /nacos/v1/ns/operator/switches`.
//!
//! Both are small owned structs that serialize to the Nacos 1.4 field names and read
//! back leniently: a 2.x server answers metrics with only `{"status":"UP"}` unless
//! asked for more, so every other field defaults when absent.

use serde::{Deserialize, Serialize};

use super::DEFAULT_BEAT_INTERVAL_MS;

/// The server status the metrics report and the status gate use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerStatus {
    /// Serving reads and writes. The Java client's health check accepts only this.
    #[default]
    Up,
    /// Not serving.
    Down,
    /// Starting up.
    Starting,
    /// Paused by an operator.
    Paused,
    /// Serving writes only.
    WriteOnly,
    /// Serving reads only.
    ReadOnly,
    /// A status this crate does not know (read side only).
    #[serde(other)]
    Unknown,
}

/// The metrics body (1.4 fields plus `subscribeCount`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metrics {
    /// `status`.
    pub status: ServerStatus,
    /// `serviceCount`.
    pub service_count: u64,
    /// `instanceCount`.
    pub instance_count: u64,
    /// `subscribeCount`: live push subscribers.
    pub subscribe_count: u64,
    /// `raftNotifyTaskCount` (always 0 on a single node).
    pub raft_notify_task_count: u64,
    /// `responsibleServiceCount` (all services on a single node).
    pub responsible_service_count: u64,
    /// `responsibleInstanceCount` (all instances on a single node).
    pub responsible_instance_count: u64,
    /// `cpu`: process CPU load, 0..1.
    pub cpu: f32,
    /// `load`: system load average.
    pub load: f32,
    /// `mem`: memory use ratio, 0..1.
    pub mem: f32,
}

impl Metrics {
    /// Appends the JSON body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Plain numbers and a unit enum: serializing cannot fail.
        let _ = serde_json::to_writer(out, self);
    }

    /// Parses a body.
    pub fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

/// Health-check parameters inside [`Switches`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HealthParams {
    /// `max` ms.
    pub max: u32,
    /// `min` ms.
    pub min: u32,
    /// `factor`.
    pub factor: f32,
}

impl Default for HealthParams {
    fn default() -> Self {
        HealthParams {
            max: 5000,
            min: 500,
            factor: 0.85,
        }
    }
}

/// The `SwitchDomain` body of `GET /operator/switches`, with the Nacos 1.4 defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Switches {
    /// `name`: the fixed switch-domain name.
    pub name: String,
    /// `masters` (null).
    pub masters: Option<Vec<String>>,
    /// `adWeightMap`.
    pub ad_weight_map: std::collections::BTreeMap<String, u32>,
    /// `defaultPushCacheMillis`: `cacheMillis` for push subscribers (10000).
    pub default_push_cache_millis: u64,
    /// `clientBeatInterval` (5000).
    pub client_beat_interval: u64,
    /// `defaultCacheMillis`: `cacheMillis` for pollers (3000).
    pub default_cache_millis: u64,
    /// `distroThreshold`.
    pub distro_threshold: f32,
    /// `healthCheckEnabled`.
    pub health_check_enabled: bool,
    /// `autoChangeHealthCheckEnabled`.
    pub auto_change_health_check_enabled: bool,
    /// `distroEnabled`.
    pub distro_enabled: bool,
    /// `enableStandalone`.
    pub enable_standalone: bool,
    /// `pushEnabled`.
    pub push_enabled: bool,
    /// `checkTimes`.
    pub check_times: u32,
    /// `httpHealthParams`.
    pub http_health_params: HealthParams,
    /// `tcpHealthParams`.
    pub tcp_health_params: HealthParams,
    /// `mysqlHealthParams`.
    pub mysql_health_params: HealthParams,
    /// `incrementalList`.
    pub incremental_list: Vec<String>,
    /// `serverStatusSynchronizationPeriodMillis`.
    pub server_status_synchronization_period_millis: u64,
    /// `serviceStatusSynchronizationPeriodMillis`.
    pub service_status_synchronization_period_millis: u64,
    /// `disableAddIP`.
    #[serde(rename = "disableAddIP")]
    pub disable_add_ip: bool,
    /// `sendBeatOnly`.
    pub send_beat_only: bool,
    /// `lightBeatEnabled` (true).
    pub light_beat_enabled: bool,
    /// `limitedUrlMap`.
    pub limited_url_map: std::collections::BTreeMap<String, u32>,
    /// `distroServerExpiredMillis`.
    pub distro_server_expired_millis: u64,
    /// `pushGoVersion`.
    pub push_go_version: String,
    /// `pushJavaVersion`.
    pub push_java_version: String,
    /// `pushPythonVersion`.
    pub push_python_version: String,
    /// `pushCVersion`.
    pub push_c_version: String,
    /// `pushCSharpVersion`.
    pub push_c_sharp_version: String,
    /// `enableAuthentication`.
    pub enable_authentication: bool,
    /// `overriddenServerStatus` (null unless an operator forces one).
    pub overridden_server_status: Option<ServerStatus>,
    /// `defaultInstanceEphemeral` (true): `ephemeral` when a request does not say.
    pub default_instance_ephemeral: bool,
    /// `healthCheckWhiteList`.
    pub health_check_white_list: Vec<String>,
    /// `checksum` (null).
    pub checksum: Option<String>,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            name: "00-00---000-NACOS_SWITCH_DOMAIN-000---00-00".to_owned(),
            masters: None,
            ad_weight_map: Default::default(),
            default_push_cache_millis: 10_000,
            client_beat_interval: DEFAULT_BEAT_INTERVAL_MS,
            default_cache_millis: 3_000,
            distro_threshold: 0.7,
            health_check_enabled: true,
            auto_change_health_check_enabled: true,
            distro_enabled: true,
            enable_standalone: true,
            push_enabled: true,
            check_times: 3,
            http_health_params: HealthParams::default(),
            tcp_health_params: HealthParams {
                max: 5000,
                min: 1000,
                factor: 0.75,
            },
            mysql_health_params: HealthParams {
                max: 3000,
                min: 2000,
                factor: 0.65,
            },
            incremental_list: Vec::new(),
            server_status_synchronization_period_millis: 2_000,
            service_status_synchronization_period_millis: 5_000,
            disable_add_ip: false,
            send_beat_only: false,
            light_beat_enabled: true,
            limited_url_map: Default::default(),
            distro_server_expired_millis: 10_000,
            push_go_version: "0.1.0".to_owned(),
            push_java_version: "0.1.0".to_owned(),
            push_python_version: "0.4.3".to_owned(),
            push_c_version: "1.0.12".to_owned(),
            push_c_sharp_version: "0.9.0".to_owned(),
            enable_authentication: false,
            overridden_server_status: None,
            default_instance_ephemeral: true,
            health_check_white_list: Vec::new(),
            checksum: None,
        }
    }
}

/// The push-version switches as 1.x names them and as Nacos 2.x/3.x's
/// `SwitchDomain` does (`pushVersionOfGo` ..., naming/misc/SwitchDomain.java).
pub const PUSH_VERSION_NAMES: [(&str, &str); 5] = [
    ("pushGoVersion", "pushVersionOfGo"),
    ("pushJavaVersion", "pushVersionOfJava"),
    ("pushPythonVersion", "pushVersionOfPython"),
    ("pushCVersion", "pushVersionOfC"),
    ("pushCSharpVersion", "pushVersionOfCsharp"),
];

impl Switches {
    /// Appends the JSON body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Strings, numbers, maps with string keys: serializing cannot fail.
        let _ = serde_json::to_writer(out, self);
    }

    /// Appends the body as Nacos 2.x/3.x's `SwitchDomain` writes it: the
    /// same fields but for the push versions' names.
    pub fn encode_3x(&self, out: &mut Vec<u8>) {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(map) = v.as_object_mut() {
            for (old, new) in PUSH_VERSION_NAMES {
                if let Some(value) = map.remove(old) {
                    map.insert(new.to_owned(), value);
                }
            }
        }
        let _ = serde_json::to_writer(out, &v);
    }

    /// Parses a body.
    pub fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_read_a_2x_status_only_body() {
        let m = Metrics::parse(br#"{"status":"UP"}"#).unwrap();
        assert_eq!(m.status, ServerStatus::Up);
        assert_eq!(m.instance_count, 0);
        let m = Metrics::parse(br#"{"status":"WRITE_ONLY"}"#).unwrap();
        assert_eq!(m.status, ServerStatus::WriteOnly);
        assert_eq!(
            Metrics::parse(br#"{"status":"WEIRD"}"#).unwrap().status,
            ServerStatus::Unknown
        );
    }

    #[test]
    fn switches_defaults_round_trip() {
        let mut out = Vec::new();
        Switches::default().encode(&mut out);
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains(r#""defaultPushCacheMillis":10000"#));
        assert!(text.contains(r#""disableAddIP":false"#));
        assert!(text.contains(r#""pushCSharpVersion":"0.9.0""#));
        assert_eq!(Switches::parse(&out).unwrap(), Switches::default());
    }
}
