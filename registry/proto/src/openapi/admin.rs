//! Forms and bodies of the v2/v3 admin endpoints past instances and
//! services: cluster health-check settings, the health checkers, the log
//! level, the 2.x client views and the v2 instance statuses. Behaviour from
//! the Nacos 3.x source (controllers named at each form).
//!
//! - `PUT /v3/admin/ns/cluster` (`ClusterControllerV3.update`,
//!   `UpdateClusterForm.validate`): `serviceName`, `clusterName`,
//!   `checkPort`, `useInstancePort4Check`, `healthChecker` required
//!   (`{10000}`), `namespaceId` (`public`), `groupName` (`DEFAULT_GROUP`),
//!   `metadata`. The checker is Jackson's `AbstractHealthChecker` JSON
//!   (`{"type":"TCP"}`, `{"type":"HTTP","path":..}`,
//!   `{"type":"MYSQL","user":..,"pwd":..,"cmd":..}`, `{"type":"NONE"}`; an
//!   unknown type is `NONE`, its `defaultImpl`).
//! - `GET /v3/admin/ns/health/checkers` (`HealthOperatorV2Impl.checkers`):
//!   a map from type to a default checker.
//! - `/client/*` (`ClientControllerV3`, `ClientInfoControllerV2`):
//!   `clientId` required; the per-service lists read `ClientServiceForm`
//!   (v3) or v2's own parameters (`ephemeral` true).
//! - `/instance/statuses/{key}` (`InstanceControllerV2.listWithHealthStatus`):
//!   `key` is `[namespace##]group@@service` (`NamingUtils.checkServiceNameFormat`).

use super::envelope::{ApiError, ErrorCode};
use crate::json;
use crate::naming::{namespace_id, ParseLimits, ServiceName, DEFAULT_GROUP};
use crate::params::{parse_bool, Params};
use serde::{Deserialize, Serialize};

/// A health checker as the cluster update names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthChecker {
    /// Connect to the instance's port.
    Tcp,
    /// `GET path`, healthy on a 2xx.
    Http {
        /// The path, `/` when the checker gave none.
        path: String,
    },
    /// Log in to a MySQL server and run a statement.
    Mysql(MysqlCheck),
    /// Never checked.
    None,
}

/// Nacos's `Mysql` checker (`api/.../healthcheck/impl/Mysql.java`): the
/// account the check logs in with and the statement it runs. Nacos's
/// `MysqlHealthCheckProcessor` calls a server whose `read_only` is `ON`
/// unhealthy when `cmd` is [`MysqlCheck::READ_ONLY_SQL`]; any other
/// statement passes when it runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MysqlCheck {
    /// `user`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub user: String,
    /// `pwd`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub pwd: String,
    /// `cmd`; empty runs [`MysqlCheck::READ_ONLY_SQL`] (Nacos would run
    /// null and fail every check).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub cmd: String,
}

impl MysqlCheck {
    /// The statement whose answer Nacos reads as "a replica"
    /// (`MysqlHealthCheckProcessor.CHECK_MYSQL_MASTER_SQL`).
    pub const READ_ONLY_SQL: &'static str = "show global variables where variable_name='read_only'";

    /// The statement a check runs.
    pub fn statement(&self) -> &str {
        if self.cmd.trim().is_empty() {
            Self::READ_ONLY_SQL
        } else {
            &self.cmd
        }
    }

    /// Whether the statement's answer decides (`read_only` `ON` is
    /// unhealthy) rather than only its success.
    pub fn reads_read_only(&self) -> bool {
        self.statement() == Self::READ_ONLY_SQL
    }
}

/// Jackson reads a JSON `null` string as null; here it is empty.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(<Option<String> as Deserialize>::deserialize(d)?.unwrap_or_default())
}

impl HealthChecker {
    /// Reads Jackson's `AbstractHealthChecker` JSON.
    ///
    /// # Errors
    /// 400 `{20002}` for text that is not a JSON object, a `MYSQL` checker
    /// whose fields are not strings, custom HTTP headers or an expected code outside 2xx (this server's
    /// HTTP check passes on any 2xx).
    pub fn parse_json(text: &str) -> Result<HealthChecker, ApiError> {
        let bad = |detail: String| ApiError::new(400, ErrorCode::ParameterValidate, detail);
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("healthChecker is not a health checker JSON: {e}")))?;
        let Some(o) = v.as_object() else {
            return Err(bad("healthChecker must be a JSON object".to_owned()));
        };
        let kind = o.get("type").and_then(|t| t.as_str()).unwrap_or("NONE");
        match kind.to_ascii_uppercase().as_str() {
            "TCP" => Ok(HealthChecker::Tcp),
            "HTTP" => {
                if o.get("headers")
                    .and_then(|h| h.as_str())
                    .is_some_and(|h| !h.is_empty())
                {
                    return Err(bad(
                        "custom health-check headers are not supported by this server".to_owned(),
                    ));
                }
                let code = o
                    .get("expectedResponseCode")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(200);
                if !(200..300).contains(&code) {
                    return Err(bad(format!(
                        "expectedResponseCode {code}: this server's HTTP check passes on any 2xx"
                    )));
                }
                let path = o.get("path").and_then(|p| p.as_str()).unwrap_or("");
                let path = if path.is_empty() { "/" } else { path };
                if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
                    return Err(bad(format!(
                        "health-check path {path:?} must start with '/'"
                    )));
                }
                Ok(HealthChecker::Http {
                    path: path.to_owned(),
                })
            }
            "MYSQL" => serde_json::from_value::<MysqlCheck>(v.clone())
                .map(HealthChecker::Mysql)
                .map_err(|e| bad(format!("healthChecker is not a MYSQL checker: {e}"))),
            _ => Ok(HealthChecker::None),
        }
    }

    /// The value of the service metadata key the server's checker reads
    /// (`preserved.health.checker.<cluster>`).
    pub fn metadata_value(&self) -> String {
        match self {
            HealthChecker::Tcp => "TCP".to_owned(),
            HealthChecker::Http { path } => format!("HTTP:{path}"),
            HealthChecker::Mysql(check) => {
                // Strings only: serialising cannot fail.
                format!("MYSQL:{}", serde_json::to_string(check).unwrap_or_default())
            }
            HealthChecker::None => "NONE".to_owned(),
        }
    }

    /// Reads back what [`HealthChecker::metadata_value`] wrote (`TCP`,
    /// `HTTP[:/path]`, `MYSQL:{json}`, `NONE`; the type case-insensitive).
    ///
    /// # Errors
    /// A message naming what was expected.
    pub fn from_metadata_value(text: &str) -> Result<HealthChecker, String> {
        let text = text.trim();
        let (kind, rest) = match text.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (text, None),
        };
        match (kind.to_ascii_uppercase().as_str(), rest) {
            ("TCP", None) => Ok(HealthChecker::Tcp),
            ("NONE", None) => Ok(HealthChecker::None),
            ("HTTP", None) => Ok(HealthChecker::Http { path: "/".into() }),
            ("HTTP", Some(p)) if p.starts_with('/') && p.bytes().all(|b| b.is_ascii_graphic()) => {
                Ok(HealthChecker::Http { path: p.into() })
            }
            ("MYSQL", Some(json)) => serde_json::from_str(json)
                .map(HealthChecker::Mysql)
                .map_err(|e| format!("MYSQL:{{user,pwd,cmd}} expected: {e}")),
            _ => Err(format!(
                "expected TCP, NONE, HTTP, HTTP:/path or MYSQL:{{json}}, got {text:?}"
            )),
        }
    }
}

/// The checker as Jackson writes an `AbstractHealthChecker` (its `type`
/// first, nulls left out as Nacos's mapper does).
impl Serialize for HealthChecker {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match self {
            HealthChecker::Tcp => m.serialize_entry("type", "TCP")?,
            HealthChecker::None => m.serialize_entry("type", "NONE")?,
            HealthChecker::Http { path } => {
                m.serialize_entry("type", "HTTP")?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("headers", "")?;
                m.serialize_entry("expectedResponseCode", &200)?;
            }
            HealthChecker::Mysql(check) => {
                m.serialize_entry("type", "MYSQL")?;
                m.serialize_entry("user", &check.user)?;
                m.serialize_entry("pwd", &check.pwd)?;
                m.serialize_entry("cmd", &check.cmd)?;
            }
        }
        m.end()
    }
}

/// Appends the checkers map (`{"TCP":{"type":"TCP"},...}`): Nacos's
/// default instance of each type this server runs.
pub fn encode_checkers(out: &mut Vec<u8>) {
    out.extend_from_slice(
        br#"{"TCP":{"type":"TCP"},"HTTP":{"type":"HTTP","path":"","headers":"","expectedResponseCode":200},"MYSQL":{"type":"MYSQL"},"NONE":{"type":"NONE"}}"#,
    );
}

/// A `PUT /cluster` request.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterForm<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service.
    pub service: ServiceName<'a>,
    /// `clusterName`.
    pub cluster: &'a str,
    /// `checkPort`.
    pub check_port: u16,
    /// `useInstancePort4Check`.
    pub use_instance_port: bool,
    /// `healthChecker`.
    pub checker: HealthChecker,
}

impl<'a> ClusterForm<'a> {
    /// Reads and validates the form as `UpdateClusterForm.validate` does.
    ///
    /// # Errors
    /// `{10000}` for a missing parameter, `{20002}` for a bad number or
    /// checker, `{21004}` for a bad cluster name.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ApiError> {
        for name in [
            "serviceName",
            "clusterName",
            "checkPort",
            "useInstancePort4Check",
            "healthChecker",
        ] {
            if params.get(name).is_none_or(|v| v.trim().is_empty()) {
                let ty = match name {
                    "checkPort" => "Integer",
                    "useInstancePort4Check" => "Boolean",
                    _ => "String",
                };
                return Err(ApiError::new(
                    400,
                    ErrorCode::ParameterMissing,
                    format!("Required parameter '{name}' type {ty} is not present"),
                ));
            }
        }
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let cluster = crate::naming::normalize_cluster(params.get("clusterName"), limits)?;
        let port_text = params.get("checkPort").unwrap_or_default().trim();
        let check_port = port_text.parse::<u16>().map_err(|_| {
            ApiError::new(
                400,
                ErrorCode::ParameterValidate,
                format!("For input string: \"{port_text}\""),
            )
        })?;
        let use_instance_port = parse_bool(params.get("useInstancePort4Check").unwrap_or_default());
        let checker = HealthChecker::parse_json(params.get("healthChecker").unwrap_or_default())?;
        Ok(ClusterForm {
            namespace_id,
            service,
            cluster,
            check_port,
            use_instance_port,
            checker,
        })
    }
}

/// `clientId`, required (`ClientControllerV3`: `@RequestParam("clientId")`).
///
/// # Errors
/// `{10000}` when absent.
pub fn client_id<'a>(params: &'a Params<'_>) -> Result<&'a str, ApiError> {
    params
        .get("clientId")
        .ok_or_else(|| ApiError::missing("clientId"))
}

/// A per-service client list request (`/client/service/{publisher,subscriber}/list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientServiceForm<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// `groupName@@serviceName`.
    pub grouped: String,
    /// `ip`, when given.
    pub ip: Option<&'a str>,
    /// `port`, when given.
    pub port: Option<u16>,
}

impl<'a> ClientServiceForm<'a> {
    /// Reads the form.
    ///
    /// # Errors
    /// `{10000}` without `serviceName`; `{20002}` for a port that is no number.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ApiError> {
        if params
            .get("serviceName")
            .is_none_or(|v| v.trim().is_empty())
        {
            return Err(ApiError::missing("serviceName"));
        }
        let namespace_id = namespace_id(params, limits)?;
        let name = params.get("serviceName").unwrap_or_default().trim();
        let group = params.optional_or("groupName", DEFAULT_GROUP);
        for (param, v) in [("serviceName", name), ("groupName", group)] {
            if v.len() > limits.max_name_len {
                return Err(ApiError::from(crate::ProtoError::TooLong {
                    param,
                    len: v.len(),
                    max: limits.max_name_len,
                }));
            }
        }
        let port = match params.optional("port") {
            None => None,
            Some(p) => Some(p.trim().parse::<u16>().map_err(|_| {
                ApiError::new(
                    400,
                    ErrorCode::ParameterValidate,
                    format!("For input string: \"{p}\""),
                )
            })?),
        };
        Ok(ClientServiceForm {
            namespace_id,
            grouped: format!("{group}@@{name}"),
            ip: params.optional("ip"),
            port,
        })
    }
}

/// `PUT /ops/log`: `logName` and `logLevel`, both required.
///
/// # Errors
/// `{10000}` for a missing one.
pub fn log_form<'a>(params: &'a Params<'_>) -> Result<(&'a str, &'a str), ApiError> {
    let name = params
        .get("logName")
        .ok_or_else(|| ApiError::missing("logName"))?;
    let level = params
        .get("logLevel")
        .ok_or_else(|| ApiError::missing("logLevel"))?;
    Ok((name, level))
}

/// `GET /client/distro`: `ip` and `port`, both required, as strings.
///
/// # Errors
/// `{10000}` for a missing one.
pub fn distro_form<'a>(params: &'a Params<'_>) -> Result<(&'a str, &'a str), ApiError> {
    let ip = params.get("ip").ok_or_else(|| ApiError::missing("ip"))?;
    let port = params
        .get("port")
        .ok_or_else(|| ApiError::missing("port"))?;
    Ok((ip, port))
}

/// The namespace and grouped service a `/statuses/{key}` key names
/// (`key` percent-decoded already).
///
/// # Errors
/// 400 `{20002}` with Nacos's `checkServiceNameFormat` texts.
pub fn statuses_key(key: &str) -> Result<(&str, &str), ApiError> {
    let (namespace, grouped) = match key.split_once("##") {
        Some((ns, rest)) => (ns, rest.split("##").next().unwrap_or_default()),
        None => (crate::naming::DEFAULT_NAMESPACE_ID, key),
    };
    let bad = |d: &'static str| ApiError::new(400, ErrorCode::ParameterValidate, d);
    let Some((group, name)) = grouped.split_once("@@") else {
        return Err(bad(
            "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
        ));
    };
    if group.is_empty() {
        return Err(bad(
            "Param 'serviceName' is illegal, groupName can't be empty",
        ));
    }
    if name.is_empty() {
        return Err(bad(
            "Param 'serviceName' is illegal, it should be format as 'groupName@@serviceName'",
        ));
    }
    Ok((namespace, grouped))
}

/// Appends `{"ips":["ip:port_healthy",...]}`.
pub fn encode_statuses<'i>(
    out: &mut Vec<u8>,
    rows: impl IntoIterator<Item = (&'i str, u16, bool)>,
) {
    out.extend_from_slice(b"{\"ips\":[");
    for (n, (ip, port, healthy)) in rows.into_iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let entry = format!("{ip}:{port}_{healthy}");
        json::write_str(out, entry.as_bytes());
    }
    out.extend_from_slice(b"]}");
}

/// `pageNo` (1), `pageSize` (100) and `aggregation` (true) of
/// `GET /service/subscribers` (`PageForm`, `AggregationForm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriberPage {
    /// `pageNo`, from 1.
    pub page_no: usize,
    /// `pageSize`.
    pub page_size: usize,
    /// Whether every member's subscribers are gathered.
    pub aggregation: bool,
}

impl SubscriberPage {
    /// Reads the paging and aggregation parameters.
    ///
    /// # Errors
    /// 400 `{20002}` for a page number or size below 1 or not a number.
    pub fn parse(params: &Params<'_>) -> Result<Self, ApiError> {
        Ok(SubscriberPage {
            page_no: super::service::page_param(params, "pageNo", 1)?,
            page_size: super::service::page_param(params, "pageSize", 100)?,
            aggregation: params.bool_or("aggregation", true),
        })
    }
}

/// `onlyStatus` of v2/v3 `GET /ops/metrics`: true unless sent otherwise
/// (`@RequestParam(defaultValue = "true")`; Spring reads `true`/`on`/`yes`/`1`).
pub fn only_status(params: &Params<'_>) -> bool {
    params.optional("onlyStatus").is_none_or(|v| {
        ["true", "on", "yes", "1"]
            .iter()
            .any(|t| v.eq_ignore_ascii_case(t))
    })
}

/// The data of v2/v3 `GET /ops/metrics`: v2's `MetricsInfoVo`
/// (naming/model/vo/MetricsInfoVo.java) and v3's `MetricsInfo`
/// (api/naming/pojo/maintainer/MetricsInfo.java, which has no
/// cpu/load/mem), both `NON_NULL`, filled by `OperatorV2Impl.metrics`:
/// only `status` when `onlyStatus`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsInfo {
    /// `UP` (or the server's status).
    pub status: &'static str,
    /// The counts, absent for `onlyStatus`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub counts: Option<MetricsCounts>,
    /// v2 only: `EnvUtil.getCpu()`, `getLoad()`, `getMem()`.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostLoad>,
}

/// The counts of a full metrics answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsCounts {
    /// `MetricsMonitor.getDomCountMonitor()`: services.
    pub service_count: u64,
    /// `getIpCountMonitor()`: instances.
    pub instance_count: u64,
    /// `getSubscriberCount()`: subscriptions.
    pub subscribe_count: u64,
    /// Every client id: connections and addresses.
    pub client_count: u64,
    /// gRPC connections' clients.
    pub connection_based_client_count: u64,
    /// `ip:port#true` clients.
    pub ephemeral_ip_port_client_count: u64,
    /// `ip:port#false` clients.
    pub persistent_ip_port_client_count: u64,
    /// Clients this node is responsible for.
    pub responsible_client_count: u64,
}

/// v2's host figures.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HostLoad {
    /// CPU use, 0..1.
    pub cpu: f32,
    /// The 1-minute load average.
    pub load: f32,
    /// Memory use, 0..1.
    pub mem: f32,
}

impl MetricsInfo {
    /// Appends the JSON body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Strings and numbers: serialising cannot fail.
        let _ = serde_json::to_writer(out, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkers_parse_as_jackson_reads_them() {
        let p = HealthChecker::parse_json;
        assert_eq!(p(r#"{"type":"TCP"}"#), Ok(HealthChecker::Tcp));
        assert_eq!(p(r#"{"type":"NONE"}"#), Ok(HealthChecker::None));
        assert_eq!(p(r#"{"type":"whatever"}"#), Ok(HealthChecker::None));
        assert_eq!(
            p(r#"{"type":"HTTP","path":"/up","headers":"","expectedResponseCode":200}"#),
            Ok(HealthChecker::Http { path: "/up".into() })
        );
        assert_eq!(
            p(r#"{"type":"HTTP"}"#).map(|c| c.metadata_value()),
            Ok("HTTP:/".to_owned())
        );
        let mysql = p(r#"{"type":"MYSQL","user":"nacos","pwd":null,"cmd":"select 1"}"#).unwrap();
        assert_eq!(
            mysql,
            HealthChecker::Mysql(MysqlCheck {
                user: "nacos".into(),
                pwd: String::new(),
                cmd: "select 1".into()
            })
        );
        let kept = mysql.metadata_value();
        assert_eq!(HealthChecker::from_metadata_value(&kept), Ok(mysql.clone()));
        assert_eq!(
            serde_json::to_string(&mysql).unwrap(),
            r#"{"type":"MYSQL","user":"nacos","pwd":"","cmd":"select 1"}"#
        );
        let Ok(HealthChecker::Mysql(bare)) = p(r#"{"type":"MYSQL"}"#) else {
            panic!("a bare MYSQL checker is Nacos's default instance");
        };
        assert!(bare.reads_read_only());
        for bad in [
            "not json",
            "[1]",
            r#"{"type":"MYSQL","user":7}"#,
            r#"{"type":"HTTP","headers":"a:b"}"#,
            r#"{"type":"HTTP","expectedResponseCode":404}"#,
            r#"{"type":"HTTP","path":"up"}"#,
        ] {
            assert_eq!(
                p(bad).unwrap_err().code,
                ErrorCode::ParameterValidate,
                "{bad}"
            );
        }
        let mut out = Vec::new();
        encode_checkers(&mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["HTTP"]["expectedResponseCode"], 200);
    }

    #[test]
    fn cluster_form_follows_update_cluster_form() {
        let pl = ParseLimits::default();
        let q = "serviceName=s&clusterName=c1&checkPort=80&useInstancePort4Check=true&healthChecker=%7B%22type%22%3A%22TCP%22%7D";
        let p = Params::parse(q, None).unwrap();
        let f = ClusterForm::parse(&p, &pl).unwrap();
        assert_eq!(
            (f.cluster, f.check_port, f.checker),
            ("c1", 80, HealthChecker::Tcp)
        );
        assert_eq!(f.service.grouped(), "DEFAULT_GROUP@@s");
        for (q, code) in [
            ("clusterName=c&checkPort=1&useInstancePort4Check=true&healthChecker=x", 10000),
            ("serviceName=s&checkPort=1&useInstancePort4Check=true&healthChecker=x", 10000),
            ("serviceName=s&clusterName=c&useInstancePort4Check=true&healthChecker=x", 10000),
            ("serviceName=s&clusterName=c&checkPort=1&healthChecker=x", 10000),
            ("serviceName=s&clusterName=c&checkPort=1&useInstancePort4Check=true", 10000),
            ("serviceName=s&clusterName=c&checkPort=x&useInstancePort4Check=true&healthChecker=x", 20002),
            ("serviceName=s&clusterName=c&checkPort=1&useInstancePort4Check=false&healthChecker=x", 20002),
            ("serviceName=s&clusterName=c_1&checkPort=1&useInstancePort4Check=true&healthChecker=x", 21004),
        ] {
            let p = Params::parse(q, None).unwrap();
            assert_eq!(ClusterForm::parse(&p, &pl).unwrap_err().code.code(), code, "{q}");
        }
    }

    #[test]
    fn statuses_keys() {
        assert_eq!(statuses_key("G@@s"), Ok(("public", "G@@s")));
        assert_eq!(statuses_key("dev##G@@s"), Ok(("dev", "G@@s")));
        assert!(statuses_key("s").is_err());
        assert!(statuses_key("@@s").is_err());
        let mut out = Vec::new();
        encode_statuses(&mut out, [("1.2.3.4", 80, true)]);
        assert_eq!(out, br#"{"ips":["1.2.3.4:80_true"]}"#);
    }

    #[test]
    fn client_forms() {
        let pl = ParseLimits::default();
        let p = Params::parse("serviceName=s&port=80", None).unwrap();
        let f = ClientServiceForm::parse(&p, &pl).unwrap();
        assert_eq!(
            (f.grouped.as_str(), f.port, f.ip),
            ("DEFAULT_GROUP@@s", Some(80), None)
        );
        let p = Params::parse("port=80", None).unwrap();
        assert_eq!(
            ClientServiceForm::parse(&p, &pl).unwrap_err().code.code(),
            10000
        );
        let p = Params::parse("serviceName=s&port=x", None).unwrap();
        assert_eq!(
            ClientServiceForm::parse(&p, &pl).unwrap_err().code.code(),
            20002
        );
        let p = Params::parse("", None).unwrap();
        assert_eq!(client_id(&p).unwrap_err().code.code(), 10000);
        assert_eq!(log_form(&p).unwrap_err().code.code(), 10000);
        assert_eq!(distro_form(&p).unwrap_err().code.code(), 10000);
        let p = Params::parse("pageNo=0", None).unwrap();
        assert_eq!(SubscriberPage::parse(&p).unwrap_err().code.code(), 20002);
    }

    /// `OperatorControllerV2/V3.metrics`: `onlyStatus` defaults to true, and
    /// v3's `MetricsInfo` has no host figures.
    #[test]
    fn metrics_bodies() {
        let only = |q: &str| only_status(&Params::parse(q, None).unwrap());
        assert!(only(""));
        assert!(!only("onlyStatus=false"));
        let status = MetricsInfo {
            status: "UP",
            counts: None,
            host: None,
        };
        let mut out = Vec::new();
        status.encode(&mut out);
        assert_eq!(out, br#"{"status":"UP"}"#);
        let counts = MetricsCounts {
            service_count: 1,
            instance_count: 2,
            subscribe_count: 3,
            client_count: 4,
            connection_based_client_count: 1,
            ephemeral_ip_port_client_count: 2,
            persistent_ip_port_client_count: 1,
            responsible_client_count: 4,
        };
        let v3 = MetricsInfo {
            counts: Some(counts),
            ..status.clone()
        };
        let v = serde_json::to_value(&v3).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 9, "{v}");
        assert_eq!(v["ephemeralIpPortClientCount"], 2);
        let v2 = MetricsInfo {
            host: Some(HostLoad {
                cpu: 0.5,
                load: 1.0,
                mem: 0.25,
            }),
            ..v3
        };
        let v = serde_json::to_value(&v2).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 12, "{v}");
        assert_eq!(v["mem"], 0.25);
    }
}
