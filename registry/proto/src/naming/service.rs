//! `/nacos/v1/ns/service` (create POST, update PUT, delete DELETE, detail GET) and
//! `GET /nacos/v1/ns/service/list`.
//!
//! As in Nacos 1.4.8 `ServiceController`: `protectThreshold` is optional on create
//! (default 0) and required on update; a `selector` is JSON with `type` `none` or
//! `label` (then with an `expression`); the list answers `{"count":N,"doms":[...]}` with
//! ungrouped names. Stricter than Nacos: a `protectThreshold` that does not parse is a
//! 400 (Nacos's create silently reads it as 0), and `pageNo`/`pageSize` must be >= 1.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};

use super::{namespace_id, parse_java_double, parse_java_int, Metadata, ParseLimits, ServiceName};
use crate::error::ProtoError;
use crate::json;
use crate::params::Params;

/// A service selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Selector {
    /// `{"type":"none"}`: no filtering (the default).
    #[default]
    None,
    /// `{"type":"label","expression":"..."}`: the expression is kept as text.
    Label {
        /// The label expression, not interpreted here.
        expression: String,
    },
}

impl Selector {
    /// Parses a `selector` parameter; absent or blank is [`Selector::None`].
    pub fn parse(text: Option<&str>) -> Result<Self, ProtoError> {
        let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Selector::None);
        };
        #[derive(Deserialize)]
        struct Raw {
            #[serde(rename = "type")]
            kind: String,
            expression: Option<String>,
        }
        let raw: Raw =
            serde_json::from_str(text).map_err(|_| ProtoError::SelectorFormat(text.into()))?;
        match raw.kind.as_str() {
            "none" => Ok(Selector::None),
            "label" => raw
                .expression
                .map(|expression| Selector::Label { expression })
                .ok_or_else(|| ProtoError::SelectorFormat(text.into())),
            _ => Err(ProtoError::SelectorType),
        }
    }
}

impl Serialize for Selector {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Selector::None => {
                let mut st = s.serialize_struct("Selector", 1)?;
                st.serialize_field("type", "none")?;
                st.end()
            }
            Selector::Label { expression } => {
                let mut st = s.serialize_struct("Selector", 2)?;
                st.serialize_field("type", "label")?;
                st.serialize_field("expression", expression)?;
                st.end()
            }
        }
    }
}

/// Identifies a service: what DELETE and GET `/service` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceKey<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// The service, grouped by the `groupName` rewrite.
    pub service: ServiceName<'a>,
}

impl<'a> ServiceKey<'a> {
    /// Reads `namespaceId`, `serviceName` and `groupName`.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        Ok(ServiceKey {
            namespace_id: namespace_id(params, limits)?,
            service: ServiceName::from_params(params, limits)?,
        })
    }
}

/// A create (POST) or update (PUT) request.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceRequest<'a> {
    /// Identity.
    pub key: ServiceKey<'a>,
    /// `protectThreshold` (a Java float), finite.
    pub protect_threshold: f32,
    /// `metadata`.
    pub metadata: Metadata,
    /// `selector`.
    pub selector: Selector,
}

impl<'a> ServiceRequest<'a> {
    /// Reads a create request: `protectThreshold` defaults to 0.
    pub fn parse_create(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        Self::parse(params, limits, false)
    }

    /// Reads an update request: `protectThreshold` is required.
    pub fn parse_update(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        Self::parse(params, limits, true)
    }

    fn parse(
        params: &'a Params<'_>,
        limits: &ParseLimits,
        threshold_required: bool,
    ) -> Result<Self, ProtoError> {
        let key = ServiceKey::parse(params, limits)?;
        let threshold = if threshold_required {
            Some(params.required("protectThreshold")?)
        } else {
            params.optional("protectThreshold")
        };
        let protect_threshold = match threshold {
            None => 0.0,
            Some(t) => {
                let v = parse_java_double(t)? as f32;
                if !v.is_finite() {
                    return Err(ProtoError::NumberFormat(t.into()));
                }
                v
            }
        };
        let metadata = match params.optional("metadata") {
            Some(m) => Metadata::parse(m, limits)?,
            None => Metadata::new(),
        };
        Ok(ServiceRequest {
            key,
            protect_threshold,
            metadata,
            selector: Selector::parse(params.optional("selector"))?,
        })
    }
}

/// One cluster in a service detail.
#[derive(Debug, Clone, Copy)]
pub struct ClusterView<'a, M> {
    /// `name`.
    pub name: &'a str,
    /// `metadata`.
    pub metadata: M,
}

impl<M: Serialize> Serialize for ClusterView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tcp {
            #[serde(rename = "type")]
            kind: &'static str,
        }
        let mut st = s.serialize_struct("Cluster", 3)?;
        st.serialize_field("name", self.name)?;
        st.serialize_field("healthChecker", &Tcp { kind: "TCP" })?;
        st.serialize_field("metadata", &self.metadata)?;
        st.end()
    }
}

/// The body of `GET /service`, in Nacos's field order: `name` (ungrouped),
/// `namespaceId`, `protectThreshold`, `metadata`, `selector`, `groupName`, `clusters`.
#[derive(Debug, Clone, Copy)]
pub struct ServiceDetailView<'a, M> {
    /// The service.
    pub service: ServiceName<'a>,
    /// `namespaceId`.
    pub namespace_id: &'a str,
    /// `protectThreshold`.
    pub protect_threshold: f32,
    /// Service `metadata`.
    pub metadata: M,
    /// `selector`.
    pub selector: &'a Selector,
    /// `clusters`.
    pub clusters: &'a [ClusterView<'a, M>],
}

impl<M: Serialize> Serialize for ServiceDetailView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ServiceDetail", 7)?;
        st.serialize_field("name", self.service.name)?;
        st.serialize_field("namespaceId", self.namespace_id)?;
        st.serialize_field("protectThreshold", &self.protect_threshold)?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("selector", self.selector)?;
        st.serialize_field("groupName", self.service.group)?;
        st.serialize_field("clusters", self.clusters)?;
        st.end()
    }
}

impl<M: Serialize> ServiceDetailView<'_, M> {
    /// Appends the JSON body. Fails only if `M`'s `Serialize` fails.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        serde_json::to_writer(out, self)
    }
}

/// The group value of a service list that means "every group".
pub const ALL_GROUPS: &str = "*";

/// A `GET /service/list` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceListRequest<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// `groupName`, default `DEFAULT_GROUP`; [`ALL_GROUPS`] lists every group.
    pub group: &'a str,
    /// `pageNo`, from 1.
    pub page_no: u32,
    /// `pageSize`, at least 1.
    pub page_size: u32,
    /// `selector`, if any.
    pub selector: Selector,
}

impl<'a> ServiceListRequest<'a> {
    /// Reads a service list request.
    pub fn parse(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let page = |name: &'static str| -> Result<u32, ProtoError> {
            let v = parse_java_int(params.required(name)?)?;
            u32::try_from(v)
                .ok()
                .filter(|v| *v >= 1)
                .ok_or(ProtoError::OutOfRange {
                    param: name,
                    value: i64::from(v),
                    min: 1,
                    max: i32::MAX,
                })
        };
        let page_no = page("pageNo")?;
        let page_size = page("pageSize")?;
        let group = params.optional_or("groupName", super::DEFAULT_GROUP);
        if group.len() > limits.max_name_len {
            return Err(ProtoError::TooLong {
                param: "groupName",
                len: group.len(),
                max: limits.max_name_len,
            });
        }
        Ok(ServiceListRequest {
            namespace_id: namespace_id(params, limits)?,
            group,
            page_no,
            page_size,
            selector: Selector::parse(params.optional("selector"))?,
        })
    }

    /// The index of the first entry on the requested page (saturating).
    pub fn offset(&self) -> usize {
        (self.page_no as usize - 1).saturating_mul(self.page_size as usize)
    }
}

/// Appends `{"count":<count>,"doms":["a","b"]}`: `count` is the total over all pages,
/// `names` the ungrouped names on this page.
pub fn encode_service_list<I>(out: &mut Vec<u8>, count: usize, names: I)
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    out.extend_from_slice(b"{\"count\":");
    json::write_u64(out, count as u64);
    out.extend_from_slice(b",\"doms\":[");
    for (i, name) in names.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        json::write_str(out, name.as_ref().as_bytes());
    }
    out.extend_from_slice(b"]}");
}

/// A service list response as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServiceList {
    /// Total services.
    pub count: usize,
    /// Names on this page.
    #[serde(default)]
    pub doms: Vec<String>,
}

impl ServiceList {
    /// Parses a response body.
    pub fn parse(body: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(Selector::parse(None), Ok(Selector::None));
        assert_eq!(
            Selector::parse(Some(r#"{"type":"none"}"#)),
            Ok(Selector::None)
        );
        assert_eq!(
            Selector::parse(Some(
                r#"{"type":"label","expression":"CONSUMER.label.a = PROVIDER.label.a"}"#
            )),
            Ok(Selector::Label {
                expression: "CONSUMER.label.a = PROVIDER.label.a".into()
            })
        );
        assert_eq!(
            Selector::parse(Some(r#"{"type":"cmdb"}"#))
                .unwrap_err()
                .to_string(),
            "not match any type of selector!"
        );
        assert_eq!(
            Selector::parse(Some("x")).unwrap_err().to_string(),
            "selector format incorrect:x"
        );
        assert!(Selector::parse(Some(r#"{"type":"label"}"#)).is_err());
    }

    #[test]
    fn create_and_update() {
        let l = ParseLimits::default();
        let p = Params::parse("serviceName=s&metadata=a%3D1", None).unwrap();
        let c = ServiceRequest::parse_create(&p, &l).unwrap();
        assert_eq!(c.protect_threshold, 0.0);
        assert_eq!(c.metadata.get("a"), Some("1"));
        assert_eq!(
            ServiceRequest::parse_update(&p, &l)
                .unwrap_err()
                .to_string(),
            "Param 'protectThreshold' is required."
        );
        let p = Params::parse("serviceName=s&protectThreshold=0.5", None).unwrap();
        assert_eq!(
            ServiceRequest::parse_update(&p, &l)
                .unwrap()
                .protect_threshold,
            0.5
        );
        let p = Params::parse("serviceName=s&protectThreshold=half", None).unwrap();
        assert_eq!(
            ServiceRequest::parse_create(&p, &l)
                .unwrap_err()
                .to_string(),
            "For input string: \"half\""
        );
    }

    #[test]
    fn list_pages() {
        let l = ParseLimits::default();
        let p = Params::parse("pageNo=2&pageSize=10&groupName=*", None).unwrap();
        let r = ServiceListRequest::parse(&p, &l).unwrap();
        assert_eq!((r.group, r.offset(), r.namespace_id), ("*", 10, "public"));
        for (q, want) in [
            ("pageSize=1", "Param 'pageNo' is required."),
            ("pageNo=1", "Param 'pageSize' is required."),
            ("pageNo=x&pageSize=1", "For input string: \"x\""),
            (
                "pageNo=0&pageSize=1",
                "Param 'pageNo' is illegal, it should be between 1 and 2147483647, current: 0",
            ),
        ] {
            let p = Params::parse(q, None).unwrap();
            assert_eq!(
                ServiceListRequest::parse(&p, &l).unwrap_err().to_string(),
                want
            );
        }
    }

    #[test]
    fn list_body_round_trips() {
        let mut out = Vec::new();
        encode_service_list(&mut out, 3, ["a", "b\"c"]);
        assert_eq!(out, br#"{"count":3,"doms":["a","b\"c"]}"#);
        let l = ServiceList::parse(&out).unwrap();
        assert_eq!(
            (l.count, l.doms),
            (3, vec!["a".to_owned(), "b\"c".to_owned()])
        );
        out.clear();
        encode_service_list(&mut out, 0, std::iter::empty::<&str>());
        assert_eq!(out, br#"{"count":0,"doms":[]}"#);
    }
}
