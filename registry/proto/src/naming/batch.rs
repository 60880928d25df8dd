//! `PUT` and `DELETE /instance/metadata/batch` (v1, v2 and v3 admin): merge
//! metadata into, or remove its keys from, some or all instances of a
//! service.
//!
//! Parameters (Nacos `InstanceController.batchUpdateInstanceMetadata`,
//! `InstanceMetadataBatchOperationForm`): `namespaceId` (`public`),
//! `serviceName`* (with `groupName`), `consistencyType` (`persist` targets
//! the persistent instances, anything else the ephemeral ones),
//! `instances` (a JSON list of `{ip, port, clusterName}`; empty, `null` or
//! `[]` targets every instance of that kind), `metadata`*. The answer
//! names each instance changed as `ip:port:unknown:cluster:ephemeral|persist`
//! in `{"updated":[...]}`.
//!
//! Deliberate difference: Nacos ignores an `instances` value that is not
//! JSON and so changes every instance; a typo must not do that, so it is
//! refused here (`Param 'instances' is illegal`).

use serde::Deserialize;

use super::{namespace_id, Metadata, ParseLimits, ServiceName, DEFAULT_CLUSTER};
use crate::error::ProtoError;
use crate::json;
use crate::params::Params;

/// One instance named in `instances`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchTarget {
    /// `ip`.
    pub ip: String,
    /// `port`.
    pub port: u16,
    /// `clusterName`, default `DEFAULT`.
    #[serde(default)]
    pub cluster_name: String,
}

/// A metadata batch request.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataBatch<'a> {
    /// `namespaceId`.
    pub namespace_id: &'a str,
    /// The service.
    pub service: ServiceName<'a>,
    /// `consistencyType=persist`: the persistent instances.
    pub persistent: bool,
    /// The instances named; `None` is every instance of the kind.
    pub instances: Option<Vec<BatchTarget>>,
    /// The metadata to merge, or whose keys to remove.
    pub metadata: Metadata,
}

impl<'a> MetadataBatch<'a> {
    /// Reads a batch request.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let namespace_id = namespace_id(params, limits)?;
        let service = ServiceName::from_params(params, limits)?;
        let persistent = params.optional("consistencyType") == Some("persist");
        let instances = match params.optional("instances") {
            None | Some("null") | Some("[]") => None,
            Some(text) => {
                if text.len() > limits.max_beat_bytes {
                    return Err(ProtoError::TooLong {
                        param: "instances",
                        len: text.len(),
                        max: limits.max_beat_bytes,
                    });
                }
                let mut list: Vec<BatchTarget> = serde_json::from_str(text)
                    .map_err(|e| ProtoError::BatchInstances(e.to_string().into()))?;
                for t in &mut list {
                    if t.cluster_name.is_empty() {
                        DEFAULT_CLUSTER.clone_into(&mut t.cluster_name);
                    }
                }
                Some(list).filter(|l| !l.is_empty())
            }
        };
        let metadata = Metadata::parse(params.required("metadata")?, limits)?;
        Ok(MetadataBatch {
            namespace_id,
            service,
            persistent,
            instances,
            metadata,
        })
    }
}

/// The name of a changed instance in the answer.
pub fn updated_name(ip: &str, port: u16, cluster: &str, ephemeral: bool) -> String {
    let kind = if ephemeral { "ephemeral" } else { "persist" };
    format!("{ip}:{port}:unknown:{cluster}:{kind}")
}

/// Appends `{"updated":[...]}`.
pub fn encode_updated(out: &mut Vec<u8>, names: &[String]) {
    out.extend_from_slice(b"{\"updated\":[");
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_str(out, n.as_bytes());
    }
    out.extend_from_slice(b"]}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Result<MetadataBatch<'static>, ProtoError> {
        let q: &'static str = Box::leak(q.to_owned().into_boxed_str());
        let p: &'static Params<'static> = Box::leak(Box::new(Params::parse(q, None).unwrap()));
        MetadataBatch::parse(p, &ParseLimits::default())
    }

    #[test]
    fn targets_and_kinds() {
        let b = parse("serviceName=a&metadata=k%3Dv&instances=null").unwrap();
        assert!(b.instances.is_none() && !b.persistent);
        let b = parse(
            "serviceName=a&metadata=%7B%22k%22%3A%22v%22%7D&consistencyType=persist&instances=%5B%7B%22ip%22%3A%221.1.1.1%22%2C%22port%22%3A80%7D%5D",
        )
        .unwrap();
        assert!(b.persistent);
        assert_eq!(
            b.instances.unwrap(),
            [BatchTarget {
                ip: "1.1.1.1".into(),
                port: 80,
                cluster_name: "DEFAULT".into()
            }]
        );
        assert_eq!(b.metadata.get("k"), Some("v"));
        assert!(matches!(
            parse("serviceName=a&metadata=k%3Dv&instances=nope"),
            Err(ProtoError::BatchInstances(_))
        ));
        assert_eq!(
            parse("serviceName=a"),
            Err(ProtoError::Required("metadata"))
        );
    }

    #[test]
    fn answer() {
        let mut out = Vec::new();
        encode_updated(&mut out, &[updated_name("1.1.1.1", 80, "DEFAULT", true)]);
        assert_eq!(
            out,
            br#"{"updated":["1.1.1.1:80:unknown:DEFAULT:ephemeral"]}"#
        );
    }
}
