//! Service requests and bodies of the v2 and v3 APIs.
//!
//! Create, update and delete read the v1 forms ([`crate::naming::service`]);
//! v2/v3's `ServiceForm` differs in one default: `ephemeral` is false. The
//! list forms and every body differ per generation:
//! - v2 `GET /service/list` (`ServiceControllerV2.list`): `groupName`
//!   (exact, default `DEFAULT_GROUP`), `pageNo` (1), `pageSize` (20, at
//!   most 500) → `{"count":N,"services":["group@@name"]}`.
//! - v3 `GET /service/list` (`ServiceControllerV3.list`, `ServiceListForm`):
//!   `serviceNameParam` and `groupNameParam` (substrings),
//!   `ignoreEmptyService` (true), `pageNo` (1), `pageSize` (100; below 1 is
//!   `{20002}`) → a `Page` of `ServiceView`s.
//! - `GET /service`: `ServiceDetailInfo` (`namespace` in v2, `namespaceId`
//!   in v3, then `serviceName`, `groupName`, `clusterMap`, `metadata`,
//!   `protectThreshold`, `selector`, `ephemeral`).

use serde::ser::{SerializeMap, SerializeStruct};
use serde::Serialize;

use super::admin::HealthChecker;
use super::envelope::{ApiError, ErrorCode};
use crate::json;
use crate::naming::service::Selector;
use crate::naming::{namespace_id, ParseLimits, DEFAULT_GROUP};
use crate::params::Params;

/// Which service list form a request follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// v2: exact group, 20 a page, at most 500.
    V2,
    /// v3 admin: substrings, 100 a page.
    V3,
}

/// A v2 or v3 service list request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListForm<'a> {
    /// `namespaceId`, default `public`.
    pub namespace_id: &'a str,
    /// v2: the exact group; v3: a substring of the group (empty: any).
    pub group: &'a str,
    /// v3: a substring of the service name (empty: any).
    pub name: &'a str,
    /// v3 `ignoreEmptyService`: leave out services without instances.
    pub ignore_empty: bool,
    /// `pageNo`, from 1.
    pub page_no: usize,
    /// `pageSize`.
    pub page_size: usize,
}

pub(crate) fn page_param(
    params: &Params<'_>,
    name: &'static str,
    default: usize,
) -> Result<usize, ApiError> {
    match params.optional(name) {
        None => Ok(default),
        Some(v) => match v.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            Ok(_) => Err(ApiError::new(
                400,
                ErrorCode::ParameterValidate,
                format!("Required parameter '{name}' should be larger than 0"),
            )),
            Err(_) => Err(ApiError::new(
                400,
                ErrorCode::ParameterValidate,
                format!("For input string: \"{v}\""),
            )),
        },
    }
}

impl<'a> ListForm<'a> {
    /// Reads a list request of `kind`.
    pub fn parse(
        params: &'a Params<'_>,
        limits: &ParseLimits,
        kind: ListKind,
    ) -> Result<Self, ApiError> {
        let namespace_id = namespace_id(params, limits)?;
        let form = match kind {
            ListKind::V2 => ListForm {
                namespace_id,
                group: params.optional_or("groupName", DEFAULT_GROUP),
                name: "",
                ignore_empty: false,
                page_no: page_param(params, "pageNo", 1)?,
                page_size: page_param(params, "pageSize", 20)?.min(500),
            },
            ListKind::V3 => ListForm {
                namespace_id,
                group: params.optional_or("groupNameParam", ""),
                name: params.optional_or("serviceNameParam", ""),
                ignore_empty: params.bool_or("ignoreEmptyService", true),
                page_no: page_param(params, "pageNo", 1)?,
                page_size: page_param(params, "pageSize", 100)?,
            },
        };
        for (param, v) in [("groupName", form.group), ("serviceNameParam", form.name)] {
            if v.len() > limits.max_name_len {
                return Err(ApiError::from(crate::ProtoError::TooLong {
                    param,
                    len: v.len(),
                    max: limits.max_name_len,
                }));
            }
        }
        Ok(form)
    }

    /// The index of the first entry of the requested page (saturating).
    pub fn offset(&self) -> usize {
        (self.page_no - 1).saturating_mul(self.page_size)
    }
}

/// Appends v2's `{"count":N,"services":["name",...]}` from a page of
/// grouped names: `ServiceUtil.pageServiceName` cuts each name after its
/// first `@@` (when that is not at the start), so the group is not listed.
pub fn encode_v2_list<I>(out: &mut Vec<u8>, count: usize, grouped_names: I)
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    out.extend_from_slice(b"{\"count\":");
    json::write_u64(out, count as u64);
    out.extend_from_slice(b",\"services\":[");
    for (i, name) in grouped_names.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let grouped = name.as_ref();
        let name = match grouped.find(crate::naming::GROUP_SEPARATOR) {
            Some(at) if at > 0 => &grouped[at + crate::naming::GROUP_SEPARATOR.len()..],
            _ => grouped,
        };
        json::write_str(out, name.as_bytes());
    }
    out.extend_from_slice(b"]}");
}

/// One service of a v3 list page (Nacos `ServiceView`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceView<'a> {
    /// `name`: ungrouped.
    pub name: &'a str,
    /// `groupName`.
    pub group_name: &'a str,
    /// `clusterCount`.
    pub cluster_count: usize,
    /// `ipCount`.
    pub ip_count: usize,
    /// `healthyInstanceCount`.
    pub healthy_instance_count: usize,
    /// `triggerFlag`: whether the protect threshold is reached.
    pub trigger_flag: &'static str,
}

/// A page of v3 services (Nacos `Page`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePage<'a> {
    /// `totalCount`: matching services over all pages.
    pub total_count: usize,
    /// `pageNumber`.
    pub page_number: usize,
    /// `pagesAvailable`.
    pub pages_available: usize,
    /// `pageItems`.
    pub page_items: Vec<ServiceView<'a>>,
}

impl ServicePage<'_> {
    /// Appends the JSON of the page.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Strings and numbers: serialising cannot fail.
        let _ = serde_json::to_writer(out, self);
    }
}

/// Pages of `size` needed for `total` items.
pub fn pages(total: usize, size: usize) -> usize {
    total.div_ceil(size.max(1))
}

/// A cluster in a service detail (Nacos `ClusterInfo`, without hosts).
#[derive(Debug, Clone, Copy)]
pub struct ClusterInfoView<'a, M> {
    /// `clusterName`.
    pub name: &'a str,
    /// `healthyCheckPort`: the port checks probe when not the instance's
    /// (Nacos's default 80).
    pub check_port: u16,
    /// `useInstancePortForCheck`.
    pub use_instance_port: bool,
    /// `healthChecker`: the cluster's (Nacos's `ClusterMetadata` defaults
    /// to TCP).
    pub checker: &'a HealthChecker,
    /// `metadata`.
    pub metadata: M,
}

impl<M: Serialize> Serialize for ClusterInfoView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ClusterInfo", 5)?;
        st.serialize_field("clusterName", self.name)?;
        st.serialize_field("healthChecker", self.checker)?;
        st.serialize_field("healthyCheckPort", &self.check_port)?;
        st.serialize_field("useInstancePortForCheck", &self.use_instance_port)?;
        st.serialize_field("metadata", &self.metadata)?;
        st.end()
    }
}

/// One service of v3 `service/list?withInstances=true`
/// (`CatalogServiceV2Impl.pageListServiceDetail`): Nacos's
/// `ServiceDetailInfo` with only `serviceName`, `groupName`, `metadata`
/// and `clusterMap` set, each cluster a `ClusterInfo` with only its
/// `hosts` (every instance, as `getClusterMap` fills it) and the field
/// defaults (`healthyCheckPort` 80, `useInstancePortForCheck` true);
/// Jackson leaves the unset nulls out and writes `protectThreshold` 0.0.
#[derive(Debug, Clone)]
pub struct ServiceWithInstances<'a, H, M> {
    /// `serviceName`: ungrouped.
    pub name: &'a str,
    /// `groupName`.
    pub group: &'a str,
    /// `clusterMap`: each cluster's hosts, in the order met.
    pub clusters: Vec<(&'a str, Vec<H>)>,
    /// Service `metadata`.
    pub metadata: M,
}

impl<H: Serialize, M: Serialize> Serialize for ServiceWithInstances<'_, H, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Hosts<'v, H>(&'v [H]);
        impl<H: Serialize> Serialize for Hosts<'_, H> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut st = s.serialize_struct("ClusterInfo", 3)?;
                st.serialize_field("healthyCheckPort", &80)?;
                st.serialize_field("useInstancePortForCheck", &true)?;
                st.serialize_field("hosts", self.0)?;
                st.end()
            }
        }
        struct Clusters<'v, 'a, H>(&'v [(&'a str, Vec<H>)]);
        impl<H: Serialize> Serialize for Clusters<'_, '_, H> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut m = s.serialize_map(Some(self.0.len()))?;
                for (name, hosts) in self.0 {
                    m.serialize_entry(name, &Hosts(hosts))?;
                }
                m.end()
            }
        }
        let mut st = s.serialize_struct("ServiceDetailInfo", 5)?;
        st.serialize_field("serviceName", self.name)?;
        st.serialize_field("groupName", self.group)?;
        st.serialize_field("clusterMap", &Clusters(&self.clusters))?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("protectThreshold", &0.0f32)?;
        st.end()
    }
}

/// A page of [`ServiceWithInstances`] (Nacos `Page`).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailPage<T> {
    /// `totalCount`.
    pub total_count: usize,
    /// `pageNumber`.
    pub page_number: usize,
    /// `pagesAvailable`.
    pub pages_available: usize,
    /// `pageItems`.
    pub page_items: Vec<T>,
}

/// A selector as Nacos 2.x/3.x's naming selectors serialize (Jackson
/// over their getters, `naming/selector/NoneSelector` and `LabelSelector`
/// on `api/selector/AbstractCmdbSelector`): `none` with `contextType`
/// `NONE`; `label` with its `labels` (the `X` of each
/// `CONSUMER.label.X = PROVIDER.label.X` term, as
/// `ExpressionInterpreter.parseExpression` reads them), the expression
/// and `contextType` `CMDB`. 1.x's selectors carry no context type.
struct SelectorV3<'a>(&'a Selector);

impl Serialize for SelectorV3<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Selector::None => {
                let mut st = s.serialize_struct("Selector", 2)?;
                st.serialize_field("type", "none")?;
                st.serialize_field("contextType", "NONE")?;
                st.end()
            }
            Selector::Label { expression } => {
                let mut st = s.serialize_struct("Selector", 4)?;
                st.serialize_field("labels", &labels_of(expression))?;
                st.serialize_field("expression", expression)?;
                st.serialize_field("type", "label")?;
                st.serialize_field("contextType", "CMDB")?;
                st.end()
            }
        }
    }
}

/// The provider label names of a label expression, sorted, each once;
/// a term of another form names none.
fn labels_of(expression: &str) -> Vec<String> {
    let compact: String = expression.chars().filter(|c| !c.is_whitespace()).collect();
    let mut labels: Vec<String> = compact
        .split('&')
        .filter_map(|term| {
            let (_, provider) = term.split_once('=')?;
            provider.strip_prefix("PROVIDER.label.").map(str::to_owned)
        })
        .filter(|l| !l.is_empty())
        .collect();
    labels.sort();
    labels.dedup();
    labels
}

/// Which generation writes a service detail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetailKind {
    /// v2: `namespace`.
    V2,
    /// v3: `namespaceId`.
    V3,
}

/// A v2/v3 service detail (Nacos `ServiceDetailInfo`).
#[derive(Debug, Clone, Copy)]
pub struct ServiceDetailView<'a, M> {
    /// Which key names the namespace.
    pub kind: DetailKind,
    /// The namespace id.
    pub namespace_id: &'a str,
    /// `serviceName`: ungrouped.
    pub name: &'a str,
    /// `groupName`.
    pub group: &'a str,
    /// `clusterMap`, by cluster name.
    pub clusters: &'a [ClusterInfoView<'a, M>],
    /// Service `metadata`.
    pub metadata: M,
    /// `protectThreshold`.
    pub protect_threshold: f32,
    /// `selector`.
    pub selector: &'a Selector,
    /// `ephemeral`.
    pub ephemeral: bool,
}

struct ClusterMap<'v, 'a, M>(&'v [ClusterInfoView<'a, M>]);

impl<M: Serialize> Serialize for ClusterMap<'_, '_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for c in self.0 {
            m.serialize_entry(c.name, c)?;
        }
        m.end()
    }
}

impl<M: Serialize> Serialize for ServiceDetailView<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ServiceDetailInfo", 8)?;
        let ns_key = match self.kind {
            DetailKind::V2 => "namespace",
            DetailKind::V3 => "namespaceId",
        };
        st.serialize_field(ns_key, self.namespace_id)?;
        st.serialize_field("serviceName", self.name)?;
        st.serialize_field("groupName", self.group)?;
        st.serialize_field("clusterMap", &ClusterMap(self.clusters))?;
        st.serialize_field("metadata", &self.metadata)?;
        st.serialize_field("protectThreshold", &self.protect_threshold)?;
        st.serialize_field("selector", &SelectorV3(self.selector))?;
        st.serialize_field("ephemeral", &self.ephemeral)?;
        st.end()
    }
}

impl<M: Serialize> ServiceDetailView<'_, M> {
    /// Appends the JSON of the detail.
    pub fn encode(&self, out: &mut Vec<u8>) {
        // Strings, numbers and maps of strings: serialising cannot fail.
        let _ = serde_json::to_writer(out, self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_forms() {
        let l = ParseLimits::default();
        let p = Params::parse("pageSize=900", None).unwrap();
        let f = ListForm::parse(&p, &l, ListKind::V2).unwrap();
        assert_eq!((f.group, f.page_no, f.page_size), ("DEFAULT_GROUP", 1, 500));
        let p = Params::parse("groupNameParam=G&serviceNameParam=or", None).unwrap();
        let f = ListForm::parse(&p, &l, ListKind::V3).unwrap();
        assert_eq!(
            (f.group, f.name, f.page_size, f.ignore_empty),
            ("G", "or", 100, true)
        );
        let p = Params::parse("pageSize=0", None).unwrap();
        assert_eq!(
            ListForm::parse(&p, &l, ListKind::V3)
                .unwrap_err()
                .code
                .code(),
            20002
        );
        let p = Params::parse("pageNo=x", None).unwrap();
        assert_eq!(
            ListForm::parse(&p, &l, ListKind::V2)
                .unwrap_err()
                .code
                .code(),
            20002
        );
        assert_eq!(pages(0, 10), 0);
        assert_eq!(pages(11, 10), 2);
    }

    /// `naming/utils/ServiceUtil.java` `pageServiceName`: the group is cut
    /// off after the first `@@` that does not start the name.
    #[test]
    fn v2_list_body() {
        let mut out = Vec::new();
        encode_v2_list(&mut out, 3, ["G@@a", "G@@b@@c", "@@d"]);
        assert_eq!(out, br#"{"count":3,"services":["a","b@@c","@@d"]}"#);
    }

    #[test]
    fn v3_selectors_carry_their_context_type_and_labels() {
        let json = |sel: &Selector| serde_json::to_value(SelectorV3(sel)).unwrap();
        assert_eq!(
            json(&Selector::None),
            serde_json::json!({"type": "none", "contextType": "NONE"})
        );
        let label = Selector::Label {
            expression:
                "CONSUMER.label.zone = PROVIDER.label.zone & CONSUMER.label.az=PROVIDER.label.az"
                    .into(),
        };
        let v = json(&label);
        assert_eq!(v["labels"], serde_json::json!(["az", "zone"]));
        assert_eq!(
            (&v["type"], &v["contextType"]),
            (&serde_json::json!("label"), &serde_json::json!("CMDB"))
        );
    }
}
