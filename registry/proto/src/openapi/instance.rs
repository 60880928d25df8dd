//! Instance requests and bodies of the v2 and v3 APIs.
//!
//! The write forms are Nacos's `InstanceForm` (`naming/model/form`): the
//! same parameter names as v1 (`serviceName`, `groupName`, `namespaceId`,
//! `clusterName`, `ip`, `port`, `weight`, `healthy`, `enabled`,
//! `ephemeral`, `metadata`), read by the shared v1 readers
//! ([`crate::naming::instance`]) and answered in the envelope; the v3
//! client adds `heartBeat`. The list forms differ per generation:
//! v2 (`InstanceControllerV2.list`) lists every cluster when `clusterName`
//! is empty and honours `healthyOnly`; v3 (`InstanceListForm`) defaults
//! `clusterName` to `DEFAULT`; the v3 client ignores `healthyOnly`
//! (`InstanceOpenApiController.list`), the v3 admin honours it
//! (`InstanceControllerV3.list`).

use serde::ser::SerializeStruct;
use serde::Serialize;

use crate::naming::list::HeartbeatTimes;
use crate::naming::{cluster_param, namespace_id, ParseLimits, ServiceName, DEFAULT_CLUSTER};
use crate::openapi::envelope::ApiError;
use crate::params::{parse_bool, Params};
use crate::ProtoError;

/// `heartBeat` of a v3 client `POST /instance` (default false).
pub fn heart_beat(params: &Params<'_>) -> bool {
    params.optional("heartBeat").is_some_and(parse_bool)
}

/// Which list form a request follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `/nacos/v2/ns/instance/list`: empty cluster = all, `healthyOnly`.
    V2,
    /// `/nacos/v3/client/ns/instance/list`: cluster `DEFAULT`, no `healthyOnly`.
    V3Client,
    /// `/nacos/v3/admin/ns/instance/list`: cluster `DEFAULT`, `healthyOnly`.
    V3Admin,
}

/// An instance list request of v2 or v3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListForm<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service.
    pub service: ServiceName<'a>,
    /// `clusterName` as a comma list; empty means every cluster.
    pub clusters: &'a str,
    /// `healthyOnly`, where the generation honours it.
    pub healthy_only: bool,
}

impl<'a> ListForm<'a> {
    /// Reads a list request of `kind`.
    pub fn parse(
        params: &'a Params<'_>,
        limits: &ParseLimits,
        kind: ListKind,
    ) -> Result<Self, ProtoError> {
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let clusters = match (kind, params.optional("clusterName")) {
            (_, Some(c)) => {
                if c.len() > limits.max_name_len {
                    return Err(ProtoError::TooLong {
                        param: "clusterName",
                        len: c.len(),
                        max: limits.max_name_len,
                    });
                }
                c
            }
            (ListKind::V2, None) => "",
            (_, None) => DEFAULT_CLUSTER,
        };
        let healthy_only = kind != ListKind::V3Client && params.bool_or("healthyOnly", false);
        Ok(ListForm {
            namespace_id,
            service,
            clusters,
            healthy_only,
        })
    }

    /// The cluster filter, split on commas (empty: every cluster).
    pub fn cluster_list(&self) -> impl Iterator<Item = &'a str> {
        self.clusters
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
    }
}

/// The cluster of a v3 admin `GET /instance` or v2 detail: `clusterName`,
/// default `DEFAULT`.
pub fn detail_cluster<'a>(
    params: &'a Params<'_>,
    limits: &ParseLimits,
) -> Result<&'a str, ProtoError> {
    cluster_param(params, limits)
}

/// One instance as Nacos's `api/naming/pojo/Instance` serializes it
/// (Jackson, `NON_NULL`): the fields in declaration order, then the
/// heartbeat getters. `getInstanceIdGenerator` is `"simple"` for empty
/// metadata and otherwise the metadata's `instanceIdGenerator` entry, so
/// the field is absent when metadata is set without that key. No
/// `marked` or `valid`: those are 1.x's.
#[derive(Debug, Clone, Copy)]
pub struct InstanceView<'a, M> {
    /// `ip`.
    pub ip: &'a str,
    /// `port`.
    pub port: u16,
    /// `weight`.
    pub weight: f64,
    /// `healthy`.
    pub healthy: bool,
    /// `enabled`.
    pub enabled: bool,
    /// `ephemeral`.
    pub ephemeral: bool,
    /// `clusterName`.
    pub cluster_name: &'a str,
    /// The service (`serviceName` is written grouped).
    pub service: ServiceName<'a>,
    /// `metadata`.
    pub metadata: M,
    /// Heartbeat settings.
    pub heartbeat: HeartbeatTimes,
    /// `instanceIdGenerator`: see [`id_generator`]; `None` omits it.
    pub id_generator: Option<&'a str>,
}

/// What Nacos's `Instance.getInstanceIdGenerator` reads from metadata:
/// `"simple"` when there is none, else the `instanceIdGenerator` entry.
pub fn id_generator(metadata_is_empty: bool, entry: Option<&str>) -> Option<&str> {
    if metadata_is_empty {
        Some(DEFAULT_ID_GENERATOR)
    } else {
        entry
    }
}

/// `Constants.DEFAULT_INSTANCE_ID_GENERATOR`.
pub const DEFAULT_ID_GENERATOR: &str = "simple";

/// `PreservedMetadataKeys.INSTANCE_ID_GENERATOR`.
pub const ID_GENERATOR_KEY: &str = "instanceIdGenerator";

impl<M: Serialize> Serialize for InstanceView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut grouped = String::with_capacity(self.service.grouped_len());
        self.service.write_grouped(&mut grouped);
        let id = format!(
            "{}#{}#{}#{}",
            self.ip, self.port, self.cluster_name, grouped
        );
        let mut st = s.serialize_struct("Instance", 14)?;
        st.serialize_field("instanceId", &id)?;
        st.serialize_field("ip", self.ip)?;
        st.serialize_field("port", &self.port)?;
        st.serialize_field("weight", &self.weight)?;
        st.serialize_field("healthy", &self.healthy)?;
        st.serialize_field("enabled", &self.enabled)?;
        st.serialize_field("ephemeral", &self.ephemeral)?;
        st.serialize_field("clusterName", self.cluster_name)?;
        st.serialize_field("serviceName", &grouped)?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("instanceHeartBeatInterval", &self.heartbeat.interval_ms)?;
        st.serialize_field("instanceHeartBeatTimeOut", &self.heartbeat.timeout_ms)?;
        st.serialize_field("ipDeleteTimeout", &self.heartbeat.delete_timeout_ms)?;
        if let Some(g) = self.id_generator {
            st.serialize_field("instanceIdGenerator", g)?;
        }
        st.end()
    }
}

/// The data of v2 `GET /instance/list`: Nacos 3's `api/naming/pojo/ServiceInfo`
/// as `InstanceOperatorClientImpl.listInstance` fills it (through
/// `ServiceUtil.selectInstancesWithHealthyProtection`): `name` grouped (the
/// "adapt for v1.x sdk" rename), `groupName`, `clusters` as requested,
/// `cacheMillis` (the switch `defaultPushCacheMillis`), `hosts`,
/// `lastRefTime`, `checksum` never computed on this path (`""`), `allIps`
/// (3.x's spelling; 2.x wrote `allIPs`), `reachProtectionThreshold` and
/// `valid` (`hosts != null`). None of 1.x's `dom`, `env`, `metadata` or
/// `useSpecifiedURL`.
#[derive(Debug, Clone, Copy)]
pub struct ServiceInfoView<'a, M> {
    /// The service.
    pub service: ServiceName<'a>,
    /// `clusters`, echoed as requested.
    pub clusters: &'a str,
    /// `cacheMillis`.
    pub cache_millis: u64,
    /// `hosts`.
    pub hosts: &'a [InstanceView<'a, M>],
    /// `lastRefTime`: wall-clock ms of this answer.
    pub last_ref_time: u64,
    /// `reachProtectionThreshold`.
    pub reach_protection_threshold: bool,
}

impl<M: Serialize> Serialize for ServiceInfoView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ServiceInfo", 10)?;
        st.serialize_field("name", &self.service)?;
        st.serialize_field("groupName", self.service.group)?;
        st.serialize_field("clusters", self.clusters)?;
        st.serialize_field("cacheMillis", &self.cache_millis)?;
        st.serialize_field("hosts", self.hosts)?;
        st.serialize_field("lastRefTime", &self.last_ref_time)?;
        st.serialize_field("checksum", "")?;
        st.serialize_field("allIps", &false)?;
        st.serialize_field("reachProtectionThreshold", &self.reach_protection_threshold)?;
        st.serialize_field("valid", &true)?;
        st.end()
    }
}

/// The data of v2 `GET /instance` (`InstanceDetailInfoVo`): `serviceName`
/// (grouped), `ip`, `port`, `clusterName`, `weight`, `healthy`,
/// `instanceId`, `metadata`.
#[derive(Debug, Clone, Copy)]
pub struct DetailV2View<'a, M> {
    /// The instance, whose heartbeat settings are not written.
    pub instance: InstanceView<'a, M>,
}

impl<M: Serialize> Serialize for DetailV2View<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let i = &self.instance;
        let mut grouped = String::with_capacity(i.service.grouped_len());
        i.service.write_grouped(&mut grouped);
        let id = format!("{}#{}#{}#{}", i.ip, i.port, i.cluster_name, grouped);
        let mut st = s.serialize_struct("InstanceDetailInfoVo", 8)?;
        st.serialize_field("serviceName", &grouped)?;
        st.serialize_field("ip", i.ip)?;
        st.serialize_field("port", &i.port)?;
        st.serialize_field("clusterName", i.cluster_name)?;
        st.serialize_field("weight", &i.weight)?;
        st.serialize_field("healthy", &i.healthy)?;
        st.serialize_field("instanceId", &id)?;
        st.serialize_field("metadata", &i.metadata)?;
        st.end()
    }
}

/// Appends `views` as a JSON array.
pub fn encode_instances<M: Serialize>(out: &mut Vec<u8>, views: &[InstanceView<'_, M>]) {
    // Strings, numbers and maps of strings: serialising cannot fail.
    let _ = serde_json::to_writer(out, views);
}

/// Appends one instance (or any of this module's views).
pub fn encode_instance<V: Serialize>(out: &mut Vec<u8>, view: &V) {
    // Strings, numbers and maps of strings: serialising cannot fail.
    let _ = serde_json::to_writer(out, view);
}

/// Spring's binding of Nacos's `naming/model/form/InstanceForm` (the
/// v2/v3 instance controllers' one argument): a `Double weight` or a
/// `Boolean healthy`, `enabled` or `ephemeral` that does not convert fails
/// the binding before the controller runs. The `BindException` reaches
/// `NacosApiExceptionHandler.handleOtherException`: 500, code 30000, its
/// message (`BeanPropertyBindingResult.toString`, each `FieldError` with
/// the `TypeMismatchException` text around the `ConversionFailedException`
/// of Spring 6), data null. Checked before anything else reads the form.
///
/// # Errors
/// That 500 for the first field that does not convert.
pub fn bind_instance_form(params: &Params<'_>) -> Result<(), ApiError> {
    if let Some(w) = params.optional("weight") {
        if crate::naming::parse_java_double(w.trim()).is_err() {
            return Err(ApiError::unhandled(type_mismatch("weight", w, "Double")));
        }
    }
    for field in ["healthy", "enabled", "ephemeral"] {
        if let Some(v) = params.optional(field) {
            if spring_boolean(v).is_none() {
                return Err(ApiError::unhandled(type_mismatch(field, v, "Boolean")));
            }
        }
    }
    Ok(())
}

/// Spring's `StringToBooleanConverter`: `true`, `on`, `yes`, `1` and
/// `false`, `off`, `no`, `0`, any case, around blanks.
fn spring_boolean(v: &str) -> Option<bool> {
    let v = v.trim().to_ascii_lowercase();
    match v.as_str() {
        "true" | "on" | "yes" | "1" => Some(true),
        "false" | "off" | "no" | "0" => Some(false),
        _ => None,
    }
}

/// `BeanPropertyBindingResult.toString()` for one type mismatch of
/// `instanceForm.<field>`.
fn type_mismatch(field: &str, value: &str, java: &str) -> String {
    format!(
        "org.springframework.validation.BeanPropertyBindingResult: 1 errors\n\
         Field error in object 'instanceForm' on field '{field}': rejected value [{value}]; \
         codes [typeMismatch.instanceForm.{field},typeMismatch.{field},typeMismatch.java.lang.{java},typeMismatch]; \
         arguments [org.springframework.context.support.DefaultMessageSourceResolvable: \
         codes [instanceForm.{field},{field}]; arguments []; default message [{field}]]; \
         default message [Failed to convert property value of type 'java.lang.String' to required type \
         'java.lang.{java}' for property '{field}'; Failed to convert from type [java.lang.String] to \
         type [java.lang.{java}] for value [{value}]]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(q: &str, kind: ListKind) -> (String, bool) {
        let p = Params::parse(q, None).unwrap();
        let f = ListForm::parse(&p, &ParseLimits::default(), kind).unwrap();
        (f.clusters.to_owned(), f.healthy_only)
    }

    #[test]
    fn list_forms_differ_per_generation() {
        let q = "serviceName=a&healthyOnly=true";
        assert_eq!(form(q, ListKind::V2), (String::new(), true));
        assert_eq!(form(q, ListKind::V3Client), ("DEFAULT".into(), false));
        assert_eq!(form(q, ListKind::V3Admin), ("DEFAULT".into(), true));
        let p = Params::parse("groupName=g", None).unwrap();
        assert_eq!(
            ListForm::parse(&p, &ParseLimits::default(), ListKind::V2),
            Err(ProtoError::Required("serviceName"))
        );
    }

    #[test]
    fn heart_beat_flag() {
        assert!(heart_beat(&Params::parse("heartBeat=true", None).unwrap()));
        assert!(!heart_beat(&Params::parse("x=1", None).unwrap()));
    }

    fn demo_view<'a>(
        service: ServiceName<'a>,
        metadata: &'static [(&'static str, &'static str)],
    ) -> InstanceView<'a, std::collections::BTreeMap<&'static str, &'static str>> {
        let metadata: std::collections::BTreeMap<_, _> = metadata.iter().copied().collect();
        let id_generator =
            id_generator(metadata.is_empty(), metadata.get(ID_GENERATOR_KEY).copied());
        InstanceView {
            ip: "10.0.0.1",
            port: 80,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            cluster_name: "DEFAULT",
            service,
            metadata,
            heartbeat: HeartbeatTimes::default(),
            id_generator,
        }
    }

    /// `api/naming/pojo/Instance.java`: `getInstanceIdGenerator` is
    /// "simple" only for empty metadata, else the metadata's entry (absent
    /// under `NON_NULL` when there is none).
    #[test]
    fn instance_body_is_nacos_instance() {
        let p = Params::parse("serviceName=demo", None).unwrap();
        let service = ServiceName::from_params(&p, &ParseLimits::default()).unwrap();
        let mut out = Vec::new();
        encode_instance(&mut out, &demo_view(service, &[("k", "v")]));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"instanceId":"10.0.0.1#80#DEFAULT#DEFAULT_GROUP@@demo","ip":"10.0.0.1","port":80,"weight":1.0,"healthy":true,"enabled":true,"ephemeral":true,"clusterName":"DEFAULT","serviceName":"DEFAULT_GROUP@@demo","metadata":{"k":"v"},"instanceHeartBeatInterval":5000,"instanceHeartBeatTimeOut":15000,"ipDeleteTimeout":30000}"#
        );
        let empty = serde_json::to_value(demo_view(service, &[])).unwrap();
        assert_eq!(empty["instanceIdGenerator"], "simple");
        let named =
            serde_json::to_value(demo_view(service, &[(ID_GENERATOR_KEY, "snowflake")])).unwrap();
        assert_eq!(named["instanceIdGenerator"], "snowflake");
    }

    /// `api/naming/pojo/ServiceInfo.java` as `InstanceOperatorClientImpl.listInstance`
    /// fills it: Nacos 3's fields only, `checksum` empty, `allIps` spelt as 3.x does.
    #[test]
    fn service_info_is_nacos_3s() {
        let p = Params::parse("serviceName=demo&groupName=G", None).unwrap();
        let service = ServiceName::from_params(&p, &ParseLimits::default()).unwrap();
        let hosts = [demo_view(service, &[])];
        let info = ServiceInfoView {
            service,
            clusters: "",
            cache_millis: 10_000,
            hosts: &hosts,
            last_ref_time: 7,
            reach_protection_threshold: false,
        };
        let v = serde_json::to_value(info).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = vec![
            "name",
            "groupName",
            "clusters",
            "cacheMillis",
            "hosts",
            "lastRefTime",
            "checksum",
            "allIps",
            "reachProtectionThreshold",
            "valid",
        ];
        want.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(v["name"], "G@@demo");
        assert_eq!(v["groupName"], "G");
        assert_eq!(v["checksum"], "");
        assert_eq!(v["hosts"][0]["ip"], "10.0.0.1");
        assert!(v["hosts"][0].get("marked").is_none() && v["hosts"][0].get("valid").is_none());
    }

    #[test]
    fn a_form_field_that_does_not_convert_fails_the_binding() {
        let bind = |q: &str| bind_instance_form(&Params::parse(q, None).unwrap());
        assert!(bind("weight=2.5&enabled=on&healthy=0&ephemeral=FALSE").is_ok());
        let e = bind("weight=abc").unwrap_err();
        assert_eq!((e.status, e.code.code()), (500, 30000));
        let mut out = Vec::new();
        e.encode(&mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v["data"].is_null());
        let message = v["message"].as_str().unwrap();
        assert!(message
            .starts_with("org.springframework.validation.BeanPropertyBindingResult: 1 errors\n"));
        assert!(
            message.contains("on field 'weight': rejected value [abc]"),
            "{message}"
        );
        let e = bind("enabled=maybe").unwrap_err();
        assert!(e
            .message
            .unwrap()
            .contains("'java.lang.Boolean' for property 'enabled'"));
    }
}
