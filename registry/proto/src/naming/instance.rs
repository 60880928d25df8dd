//! `/nacos/v1/ns/instance`: register (POST), deregister (DELETE), update (PUT), partial
//! update (PATCH) and detail (GET).
//!
//! Parsing follows Nacos 1.4.8 `InstanceController.parseInstance` and friends, with
//! the deliberate differences listed in [`crate::naming`]. Register and update share
//! [`InstanceRequest`]; deregister and detail need only the identity
//! ([`InstanceKey`]); PATCH carries optional fields ([`InstancePatch`]).

use serde::ser::SerializeStruct;

use super::{
    cluster_param, instance_id, namespace_id, parse_port, parse_weight, validate_ip, Metadata,
    ParseLimits, ServiceName,
};
use crate::error::ProtoError;
use crate::params::{parse_bool, Params};

/// The refusal of an instance whose kind is not its service's, as Nacos's
/// `NacosRuntimeException(INVALID_PARAM, ..)` words it (`errCode: %d, errMsg: %s `):
/// `EphemeralClientOperationServiceImpl.registerInstance` and
/// `PersistentClientOperationServiceImpl.registerInstance`
/// (naming/core/v2/service/impl/) refuse an ephemeral instance into a
/// persistent service and the reverse.
pub fn kind_conflict(grouped: &str, ephemeral: bool) -> String {
    let (service, instance) = if ephemeral {
        ("persistent", "ephemeral")
    } else {
        ("ephemeral", "persistent")
    };
    format!(
        "errCode: 400, errMsg: Current service {grouped} is {service} service, can't register {instance} instance. "
    )
}

/// Identifies one instance: what DELETE and GET `/instance` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceKey<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service, grouped by the `groupName` rewrite.
    pub service: ServiceName<'a>,
    /// `ip` (required, validated).
    pub ip: &'a str,
    /// `port` (required, `0..=65535`).
    pub port: u16,
    /// `clusterName`, then `cluster`, then `DEFAULT` (`None` means `DEFAULT`).
    pub cluster: &'a str,
    /// `ephemeral` if sent. `None` means the server's `defaultInstanceEphemeral` switch
    /// (true by default) applies.
    pub ephemeral: Option<bool>,
}

impl<'a> InstanceKey<'a> {
    /// Reads the identity fields. Order of checks (and so which error wins) follows
    /// Nacos: service name, cluster, ip, port.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let cluster = cluster_param(params, limits)?;
        let ip = params.required("ip")?;
        validate_ip(ip)?;
        let port = parse_port("port", params.required("port")?)?;
        let ephemeral = params.optional("ephemeral").map(parse_bool);
        Ok(InstanceKey {
            namespace_id,
            service,
            ip,
            port,
            cluster,
            ephemeral,
        })
    }

    /// The instance id, `ip#port#cluster#group@@name`.
    pub fn instance_id(&self) -> String {
        instance_id(self.ip, self.port, self.cluster, &self.service)
    }
}

/// A register (POST) or update (PUT) request.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceRequest<'a> {
    /// Identity fields.
    pub key: InstanceKey<'a>,
    /// `weight`, default 1, within `[0, 10000]`.
    pub weight: f64,
    /// `healthy`, default true.
    pub healthy: bool,
    /// `enabled`, falling back to `enable` (the Java and Python clients send `enable` on
    /// register), default true.
    pub enabled: bool,
    /// `metadata`, empty when absent.
    pub metadata: Metadata,
    /// `app`, default `DEFAULT`.
    pub app: &'a str,
}

impl<'a> InstanceRequest<'a> {
    /// Reads and validates a register or update request.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let key = InstanceKey::parse(params, limits)?;
        let weight = match params.optional("weight") {
            Some(w) => parse_weight(w)?,
            None => 1.0,
        };
        let healthy = params.bool_or("healthy", true);
        let enabled = params
            .optional("enabled")
            .or_else(|| params.optional("enable"))
            .is_none_or(parse_bool);
        let metadata = match params.optional("metadata") {
            Some(m) => Metadata::parse(m, limits)?,
            None => Metadata::new(),
        };
        let app = app_param(params, limits)?.unwrap_or("DEFAULT");
        Ok(InstanceRequest {
            key,
            weight,
            healthy,
            enabled,
            metadata,
            app,
        })
    }
}

fn app_param<'a>(
    params: &'a Params<'_>,
    limits: &ParseLimits,
) -> Result<Option<&'a str>, ProtoError> {
    match params.optional("app") {
        Some(app) if app.len() > limits.max_name_len => Err(ProtoError::TooLong {
            param: "app",
            len: app.len(),
            max: limits.max_name_len,
        }),
        other => Ok(other),
    }
}

/// A PATCH request: identity plus only the fields that were sent.
#[derive(Debug, Clone, PartialEq)]
pub struct InstancePatch<'a> {
    /// Identity fields.
    pub key: InstanceKey<'a>,
    /// `weight`, if sent (validated).
    pub weight: Option<f64>,
    /// `healthy`, if sent.
    pub healthy: Option<bool>,
    /// `enabled` (or `enable`), if sent.
    pub enabled: Option<bool>,
    /// `metadata`, if sent and not blank (replaces the whole map, as Nacos does).
    pub metadata: Option<Metadata>,
    /// `app`, if sent.
    pub app: Option<&'a str>,
}

impl<'a> InstancePatch<'a> {
    /// Reads a PATCH request.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let key = InstanceKey::parse(params, limits)?;
        let weight = params.optional("weight").map(parse_weight).transpose()?;
        let metadata = params
            .optional("metadata")
            .map(|m| Metadata::parse(m, limits))
            .transpose()?;
        Ok(InstancePatch {
            key,
            weight,
            healthy: params.optional("healthy").map(parse_bool),
            enabled: params
                .optional("enabled")
                .or_else(|| params.optional("enable"))
                .map(parse_bool),
            metadata,
            app: app_param(params, limits)?,
        })
    }
}

/// The body of `GET /instance`: `{"service","ip","port","clusterName","weight",
/// "healthy","instanceId","metadata"}` with the grouped service name.
#[derive(Debug, Clone, Copy)]
pub struct InstanceDetailView<'a, M> {
    /// The service.
    pub service: ServiceName<'a>,
    /// The address.
    pub ip: &'a str,
    /// The port.
    pub port: u16,
    /// The cluster.
    pub cluster_name: &'a str,
    /// The weight.
    pub weight: f64,
    /// Health.
    pub healthy: bool,
    /// The instance id; `None` generates `ip#port#cluster#group@@name`.
    pub instance_id: Option<&'a str>,
    /// Metadata: anything that serializes as a JSON object of strings ([`Metadata`],
    /// [`super::metadata::MetadataPairs`], a `BTreeMap`).
    pub metadata: M,
}

impl<M: serde::Serialize> serde::Serialize for InstanceDetailView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("InstanceDetail", 8)?;
        st.serialize_field("service", &self.service)?;
        st.serialize_field("ip", self.ip)?;
        st.serialize_field("port", &self.port)?;
        st.serialize_field("clusterName", self.cluster_name)?;
        st.serialize_field("weight", &self.weight)?;
        st.serialize_field("healthy", &self.healthy)?;
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
        st.end()
    }
}

impl<M: serde::Serialize> InstanceDetailView<'_, M> {
    /// Appends the JSON body. Fails only if `M`'s `Serialize` fails.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(out, self)
    }
}

/// Serializes a given instance id, or generates the `simple` one without allocating.
pub(crate) struct InstanceIdField<'a> {
    pub id: Option<&'a str>,
    pub ip: &'a str,
    pub port: u16,
    pub cluster: &'a str,
    pub service: &'a ServiceName<'a>,
}

impl serde::Serialize for InstanceIdField<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.id {
            Some(id) => s.serialize_str(id),
            None => s.collect_str(&format_args!(
                "{}#{}#{}#{}",
                self.ip, self.port, self.cluster, self.service
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on the parse result of query `q`.
    fn with<R>(q: &str, f: impl FnOnce(Result<InstanceRequest<'_>, ProtoError>) -> R) -> R {
        let p = Params::parse(q, None).unwrap();
        f(InstanceRequest::parse(&p, &ParseLimits::default()))
    }

    #[test]
    fn defaults() {
        with("serviceName=svc&ip=1.2.3.4&port=80", |r| {
            let r = r.unwrap();
            assert_eq!(r.key.namespace_id, "public");
            assert_eq!(r.key.service.to_string(), "DEFAULT_GROUP@@svc");
            assert_eq!(r.key.cluster, "DEFAULT");
            assert_eq!(r.key.ephemeral, None);
            assert_eq!(
                (r.weight, r.healthy, r.enabled, r.app),
                (1.0, true, true, "DEFAULT")
            );
            assert!(r.metadata.is_empty());
            assert_eq!(r.key.instance_id(), "1.2.3.4#80#DEFAULT#DEFAULT_GROUP@@svc");
        });
    }

    #[test]
    fn enabled_wins_over_enable() {
        let enabled = |q: &str| with(q, |r| r.unwrap().enabled);
        assert!(!enabled("serviceName=s&ip=1.1.1.1&port=1&enable=false"));
        assert!(enabled(
            "serviceName=s&ip=1.1.1.1&port=1&enabled=true&enable=false"
        ));
        assert!(!enabled(
            "serviceName=s&ip=1.1.1.1&port=1&enabled=False&enable=true"
        ));
    }

    #[test]
    fn dom_fallback() {
        with("dom=legacy&ip=1.1.1.1&port=1", |r| {
            assert_eq!(r.unwrap().key.service.name, "legacy");
        });
    }

    #[test]
    fn patch_keeps_absent_fields_absent() {
        let p = Params::parse("serviceName=s&ip=1.1.1.1&port=1&weight=3", None).unwrap();
        let patch = InstancePatch::parse(&p, &ParseLimits::default()).unwrap();
        assert_eq!(patch.weight, Some(3.0));
        assert_eq!(
            (patch.healthy, patch.enabled, patch.app),
            (None, None, None)
        );
        assert!(patch.metadata.is_none());
        let p = Params::parse("serviceName=s&ip=1.1.1.1&port=1&weight=NaN", None).unwrap();
        assert_eq!(
            InstancePatch::parse(&p, &ParseLimits::default()).unwrap_err(),
            ProtoError::WeightRange
        );
    }

    #[test]
    fn detail_generates_the_id() {
        let v = InstanceDetailView {
            service: ServiceName::new("G", "s"),
            ip: "1.1.1.1",
            port: 1,
            cluster_name: "DEFAULT",
            weight: 1.0,
            healthy: true,
            instance_id: None,
            metadata: Metadata::new(),
        };
        let mut out = Vec::new();
        v.encode(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"service":"G@@s","ip":"1.1.1.1","port":1,"clusterName":"DEFAULT","weight":1.0,"healthy":true,"instanceId":"1.1.1.1#1#DEFAULT#G@@s","metadata":{}}"#
        );
    }
}
