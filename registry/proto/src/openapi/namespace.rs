//! Namespace requests and bodies of every generation.
//!
//! - v1 `/nacos/v1/console/namespaces` (console `NamespaceController`):
//!   create with `customNamespaceId`, `namespaceName`, `namespaceDesc`;
//!   update with `namespace`, `namespaceShowName`, `namespaceDesc`; delete
//!   with `namespaceId`; the list in a `RestResult`
//!   (`{"code":200,"message":null,"data":[...]}`), writes answer `true` or
//!   `false` as plain text.
//! - v2 `/nacos/v2/console/namespace` and v3 `/nacos/v3/admin/core/namespace`
//!   (`NamespaceControllerV3`): `namespaceId`, `namespaceName`,
//!   `namespaceDesc`, in the `Result` envelope.
//!
//! Our extension on every door: `maxServices` and `maxInstances` set a
//! namespace's quotas (absent: unbounded), and a namespace's body carries
//! them as `maxServices`/`maxInstances` when set.

use serde::Serialize;

use super::envelope::{ApiError, ErrorCode};
use crate::params::Params;
use crate::ProtoError;

/// The generation a namespace request came through; it decides the
/// parameter names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `/nacos/v1/console/namespaces`.
    V1,
    /// `/nacos/v2/console/namespace` and `/nacos/v3/admin/core/namespace`.
    Open,
}

/// A create or update request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceForm<'a> {
    /// The id; empty on a create means "make one up" (Nacos uses a UUID).
    pub id: &'a str,
    /// The display name.
    pub name: &'a str,
    /// The description.
    pub desc: &'a str,
    /// `maxServices`, if sent.
    pub max_services: Option<u32>,
    /// `maxInstances`, if sent.
    pub max_instances: Option<u32>,
}

fn quota(params: &Params<'_>, name: &'static str) -> Result<Option<u32>, ProtoError> {
    match params.optional(name) {
        None => Ok(None),
        Some(v) => v
            .parse::<u32>()
            .map(Some)
            .map_err(|_| ProtoError::NumberFormat(v.into())),
    }
}

impl<'a> NamespaceForm<'a> {
    /// Reads a create request. On v1 the id may be absent; on v2/v3 it
    /// must be sent, and empty means "make one up".
    pub fn parse_create(params: &'a Params<'_>, door: Door) -> Result<Self, ProtoError> {
        Self::parse(params, door, false)
    }

    /// Reads an update request: the id is required.
    pub fn parse_update(params: &'a Params<'_>, door: Door) -> Result<Self, ProtoError> {
        Self::parse(params, door, true)
    }

    fn parse(params: &'a Params<'_>, door: Door, update: bool) -> Result<Self, ProtoError> {
        let id = match (door, update) {
            // `NamespaceForm.validate` (Nacos 3): both present, with its own
            // text when not; the controller trims the id.
            (Door::Open, _) => params
                .get("namespaceId")
                .map(crate::params::java_trim)
                .ok_or(ProtoError::FormMissing("namespaceId"))?,
            (Door::V1, true) => params.required("namespace")?,
            (Door::V1, false) => params.optional_or("customNamespaceId", ""),
        };
        let name_param = match (door, update) {
            (Door::V1, true) => "namespaceShowName",
            _ => "namespaceName",
        };
        if door == Door::Open && params.get(name_param).is_none() {
            return Err(ProtoError::FormMissing(name_param));
        }
        Ok(NamespaceForm {
            id,
            name: params.required(name_param)?,
            desc: params.optional_or("namespaceDesc", ""),
            max_services: quota(params, "maxServices")?,
            max_instances: quota(params, "maxInstances")?,
        })
    }
}

/// The `namespaceId` of a detail, delete or check request.
pub fn namespace_id_param<'a>(params: &'a Params<'_>) -> Result<&'a str, ApiError> {
    params
        .optional("namespaceId")
        .ok_or_else(|| ApiError::missing("namespaceId"))
}

/// One namespace in a body (Nacos `api/model/response/Namespace`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceView<'a> {
    /// `namespace`: the id.
    pub namespace: &'a str,
    /// `namespaceShowName`.
    pub namespace_show_name: &'a str,
    /// `namespaceDesc`.
    pub namespace_desc: &'a str,
    /// `quota`: Nacos's config quota, reported as 200.
    pub quota: u32,
    /// `configCount`: we hold no configs, so 0.
    pub config_count: u32,
    /// `type`: 0 for the default namespace, 1 for a custom one (Nacos 3's
    /// `NamespaceTypeEnum.GLOBAL`/`CUSTOM`; 2.x numbered custom ones 2).
    #[serde(rename = "type")]
    pub kind: u8,
    /// Our quota of services, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_services: Option<u32>,
    /// Our quota of instances, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_instances: Option<u32>,
}

/// `type` of the default namespace.
pub const TYPE_GLOBAL: u8 = 0;
/// `type` of a custom namespace (core/namespace/model/NamespaceTypeEnum.java).
pub const TYPE_CUSTOM: u8 = 1;

/// Appends a v1 `RestResult` success around `data` (one JSON value).
pub fn rest_result(out: &mut Vec<u8>, data: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"code\":200,\"message\":null,\"data\":");
    data(out);
    out.push(b'}');
}

/// Appends `views` as a JSON array.
pub fn encode_list(out: &mut Vec<u8>, views: &[NamespaceView<'_>]) {
    // Strings and numbers: serialising cannot fail.
    let _ = serde_json::to_writer(out, views);
}

/// Appends one view.
pub fn encode_one(out: &mut Vec<u8>, view: &NamespaceView<'_>) {
    let _ = serde_json::to_writer(out, view);
}

/// The envelope error of a refused namespace operation: the code and the
/// status Nacos's `NamespaceOperationService` and controller give it.
pub fn refusal(kind: Refusal, detail: String) -> ApiError {
    let (status, code) = match kind {
        Refusal::Illegal => (400, ErrorCode::IllegalNamespace),
        Refusal::Exists => (400, ErrorCode::NamespaceAlreadyExist),
        Refusal::Missing => (404, ErrorCode::NamespaceNotExist),
        Refusal::State => (400, ErrorCode::IllegalState),
    };
    ApiError::new(status, code, detail)
}

/// Kinds of namespace refusal, for [`refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A malformed id or name (22000).
    Illegal,
    /// The id is taken (22002).
    Exists,
    /// No such namespace (22001, 404).
    Missing,
    /// Not allowed now: the default namespace, one holding services (23000).
    State,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_of_each_door() {
        let p = Params::parse(
            "customNamespaceId=dev&namespaceName=Dev&maxServices=3",
            None,
        )
        .unwrap();
        let f = NamespaceForm::parse_create(&p, Door::V1).unwrap();
        assert_eq!(
            (f.id, f.name, f.desc, f.max_services),
            ("dev", "Dev", "", Some(3))
        );
        let p = Params::parse("namespace=dev&namespaceShowName=D2&namespaceDesc=x", None).unwrap();
        let f = NamespaceForm::parse_update(&p, Door::V1).unwrap();
        assert_eq!((f.id, f.name, f.desc), ("dev", "D2", "x"));
        // core/namespace/model/form/NamespaceForm.java `validate`: both sent,
        // with its own text; an empty id is a create's "make one up".
        let p = Params::parse("namespaceName=Dev", None).unwrap();
        for parse in [NamespaceForm::parse_create, NamespaceForm::parse_update] {
            assert_eq!(
                parse(&p, Door::Open),
                Err(ProtoError::FormMissing("namespaceId"))
            );
        }
        let p = Params::parse("namespaceId=&namespaceName=Dev", None).unwrap();
        assert_eq!(NamespaceForm::parse_create(&p, Door::Open).unwrap().id, "");
        let p = Params::parse("namespaceId=dev", None).unwrap();
        assert_eq!(
            NamespaceForm::parse_create(&p, Door::Open),
            Err(ProtoError::FormMissing("namespaceName"))
        );
        assert_eq!(
            ProtoError::FormMissing("namespaceName").to_string(),
            "required parameter 'namespaceName' is missing"
        );
        let p = Params::parse("namespaceId=a&namespaceName=A&maxInstances=x", None).unwrap();
        assert!(NamespaceForm::parse_create(&p, Door::Open).is_err());
    }

    #[test]
    fn bodies() {
        let mut out = Vec::new();
        rest_result(&mut out, |o| {
            encode_list(
                o,
                &[NamespaceView {
                    namespace: "public",
                    namespace_show_name: "public",
                    namespace_desc: "Default Namespace",
                    quota: 200,
                    config_count: 0,
                    kind: TYPE_GLOBAL,
                    max_services: None,
                    max_instances: None,
                }],
            )
        });
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"code":200,"message":null,"data":[{"namespace":"public","namespaceShowName":"public","namespaceDesc":"Default Namespace","quota":200,"configCount":0,"type":0}]}"#
        );
    }
}
