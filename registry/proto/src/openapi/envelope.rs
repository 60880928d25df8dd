//! The `Result` envelope of the v2 and v3 APIs and their error codes.
//!
//! Every `@NacosApi` controller of Nacos 2.x/3.x answers
//! `{"code":0,"message":"success","data":...}` (`api/model/v2/Result`); a
//! failure keeps the shape with the code of `api/model/v2/ErrorCode`, that
//! code's fixed text as `message`, and the detail as `data`
//! (`core/exception/NacosApiExceptionHandler`). [`ApiError`] is one such
//! failure with its HTTP status; [`ApiError::from`] maps a parameter error
//! of the shared readers ([`crate::ProtoError`]) to the code Nacos gives the
//! same mistake.

use std::borrow::Cow;

use crate::json::write_str;
use crate::ProtoError;

/// A code of Nacos's `ErrorCode` with its fixed `message` text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// 0 `success`.
    Success,
    /// 10000: a required parameter is absent.
    ParameterMissing,
    /// 10001: no valid token.
    AccessDenied,
    /// 20002: a parameter does not parse or is out of range.
    ParameterValidate,
    /// 20004: the instance (or client) asked for does not exist.
    ResourceNotFound,
    /// 21000: a malformed service name.
    ServiceNameError,
    /// 21001: a weight outside `[0, 10000]`.
    WeightError,
    /// 21002: metadata that is neither JSON nor `k=v,...`.
    InstanceMetadataError,
    /// 21003: a heartbeat for an instance that is not registered.
    InstanceNotFound,
    /// 21004: an instance the registry refuses.
    InstanceError,
    /// 21006: a malformed selector.
    SelectorError,
    /// 21007: creating a service that exists.
    ServiceAlreadyExist,
    /// 21008: a service that does not exist.
    ServiceNotExist,
    /// 21009: deleting a service that still has instances.
    ServiceDeleteFailure,
    /// 21010: `healthy` missing on a health update.
    HealthyParamMiss,
    /// 22000: a malformed namespace id or name.
    IllegalNamespace,
    /// 22001: a namespace that does not exist.
    NamespaceNotExist,
    /// 22002: creating a namespace that exists.
    NamespaceAlreadyExist,
    /// 23000: a state the operation cannot run in.
    IllegalState,
    /// 30000: anything else.
    ServerError,
}

impl ErrorCode {
    /// The numeric code.
    pub fn code(self) -> u32 {
        match self {
            ErrorCode::Success => 0,
            ErrorCode::ParameterMissing => 10000,
            ErrorCode::AccessDenied => 10001,
            ErrorCode::ParameterValidate => 20002,
            ErrorCode::ResourceNotFound => 20004,
            ErrorCode::ServiceNameError => 21000,
            ErrorCode::WeightError => 21001,
            ErrorCode::InstanceMetadataError => 21002,
            ErrorCode::InstanceNotFound => 21003,
            ErrorCode::InstanceError => 21004,
            ErrorCode::SelectorError => 21006,
            ErrorCode::ServiceAlreadyExist => 21007,
            ErrorCode::ServiceNotExist => 21008,
            ErrorCode::ServiceDeleteFailure => 21009,
            ErrorCode::HealthyParamMiss => 21010,
            ErrorCode::IllegalNamespace => 22000,
            ErrorCode::NamespaceNotExist => 22001,
            ErrorCode::NamespaceAlreadyExist => 22002,
            ErrorCode::IllegalState => 23000,
            ErrorCode::ServerError => 30000,
        }
    }

    /// The fixed `message` text Nacos sends with the code.
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::Success => "success",
            ErrorCode::ParameterMissing => "parameter missing",
            ErrorCode::AccessDenied => "access denied",
            ErrorCode::ParameterValidate => "parameter validate error",
            ErrorCode::ResourceNotFound => "resource not found",
            ErrorCode::ServiceNameError => "service name error",
            ErrorCode::WeightError => "weight error",
            ErrorCode::InstanceMetadataError => "instance metadata error",
            ErrorCode::InstanceNotFound => "instance not found",
            ErrorCode::InstanceError => "instance error",
            ErrorCode::SelectorError => "selector error",
            ErrorCode::ServiceAlreadyExist => "service already exist",
            ErrorCode::ServiceNotExist => "service not exist",
            ErrorCode::ServiceDeleteFailure => "service delete failure",
            ErrorCode::HealthyParamMiss => "healthy param miss",
            ErrorCode::IllegalNamespace => "illegal namespace",
            ErrorCode::NamespaceNotExist => "namespace not exist",
            ErrorCode::NamespaceAlreadyExist => "namespace already exist",
            ErrorCode::IllegalState => "illegal state",
            ErrorCode::ServerError => "server error",
        }
    }
}

/// A failed v2/v3 request: the HTTP status and the envelope's code and detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The envelope's `code` (and `message`).
    pub code: ErrorCode,
    /// The envelope's `data`: what exactly was wrong.
    pub detail: Cow<'static, str>,
    /// Set for what Nacos's exception handler answers itself
    /// (`NacosApiExceptionHandler.handleOtherException`:
    /// `Result.failure(e.getMessage())`): the envelope's `message` is the
    /// exception's text and `data` is null; `detail` is unused.
    pub message: Option<Cow<'static, str>>,
}

impl ApiError {
    /// A failure with its status, code and detail.
    pub fn new(status: u16, code: ErrorCode, detail: impl Into<Cow<'static, str>>) -> ApiError {
        ApiError {
            status,
            code,
            detail: detail.into(),
            message: None,
        }
    }

    /// 500 `{30000, <text>, null}`: an exception no handler of Nacos's
    /// names, answered by its catch-all (a Spring binding failure, say).
    pub fn unhandled(text: impl Into<Cow<'static, str>>) -> ApiError {
        ApiError {
            status: 500,
            code: ErrorCode::ServerError,
            detail: Cow::Borrowed(""),
            message: Some(text.into()),
        }
    }

    /// 400 `{10000}` for a required parameter, in Spring's words
    /// (`Required parameter 'ip' type String is not present`).
    pub fn missing(param: &str) -> ApiError {
        let ty = if matches!(param, "port" | "pageNo" | "pageSize") {
            "Integer"
        } else {
            "String"
        };
        ApiError::new(
            400,
            ErrorCode::ParameterMissing,
            format!("Required parameter '{param}' type {ty} is not present"),
        )
    }

    /// Appends the envelope of this failure.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(message) = &self.message {
            out.extend_from_slice(b"{\"code\":");
            crate::json::write_u64(out, u64::from(self.code.code()));
            out.extend_from_slice(b",\"message\":");
            write_str(out, message.as_bytes());
            out.extend_from_slice(b",\"data\":null}");
            return;
        }
        write_head(out, self.code);
        write_str(out, self.detail.as_bytes());
        out.push(b'}');
    }
}

impl From<ProtoError> for ApiError {
    /// The code Nacos's v2/v3 controllers give the mistake the shared reader
    /// found; the detail keeps the reader's text.
    fn from(e: ProtoError) -> ApiError {
        let code = match &e {
            ProtoError::Required(param) => return ApiError::missing(param),
            ProtoError::FormMissing(_) => ErrorCode::ParameterMissing,
            ProtoError::ServiceNameFormat
            | ProtoError::GroupNameEmpty
            | ProtoError::ServiceNameSyntax(_) => ErrorCode::ServiceNameError,
            ProtoError::WeightRange => ErrorCode::WeightError,
            ProtoError::MetadataFormat(_) | ProtoError::MetadataEntries { .. } => {
                ErrorCode::InstanceMetadataError
            }
            ProtoError::ClusterNameSyntax(_) | ProtoError::InvalidIp => ErrorCode::InstanceError,
            ProtoError::SelectorType | ProtoError::SelectorFormat(_) => ErrorCode::SelectorError,
            _ => ErrorCode::ParameterValidate,
        };
        ApiError::new(e.status(), code, e.to_string())
    }
}

fn write_head(out: &mut Vec<u8>, code: ErrorCode) {
    out.extend_from_slice(b"{\"code\":");
    crate::json::write_u64(out, u64::from(code.code()));
    out.extend_from_slice(b",\"message\":");
    write_str(out, code.message().as_bytes());
    out.extend_from_slice(b",\"data\":");
}

/// Appends `{"code":0,"message":"success","data":` then what `data`
/// writes (one JSON value), then `}`.
pub fn success(out: &mut Vec<u8>, data: impl FnOnce(&mut Vec<u8>)) {
    write_head(out, ErrorCode::Success);
    data(out);
    out.push(b'}');
}

/// Appends the success envelope around a JSON string (`"ok"`).
pub fn success_str(out: &mut Vec<u8>, text: &str) {
    success(out, |o| write_str(o, text.as_bytes()));
}

/// Appends an envelope with `code` and a `null` detail (the v3 heartbeat's
/// `{21003, "instance not found", null}`, answered with HTTP 200).
pub fn failure_null(out: &mut Vec<u8>, code: ErrorCode) {
    write_head(out, code);
    out.extend_from_slice(b"null}");
}

/// An envelope as a client reads it.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct Envelope {
    /// `code`: 0 on success.
    pub code: i64,
    /// `message`.
    pub message: Option<String>,
    /// `data`.
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Envelope {
    /// Parses an envelope body.
    ///
    /// # Errors
    /// A body that is not an envelope.
    pub fn parse(body: &[u8]) -> Result<Envelope, serde_json::Error> {
        serde_json::from_slice(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_are_nacos_results() {
        let mut out = Vec::new();
        success_str(&mut out, "ok");
        assert_eq!(out, br#"{"code":0,"message":"success","data":"ok"}"#);
        out.clear();
        ApiError::missing("ip").encode(&mut out);
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            r#"{"code":10000,"message":"parameter missing","data":"Required parameter 'ip' type String is not present"}"#
        );
        out.clear();
        failure_null(&mut out, ErrorCode::InstanceNotFound);
        assert_eq!(
            out,
            br#"{"code":21003,"message":"instance not found","data":null}"#
        );
    }

    #[test]
    fn parameter_errors_take_nacos_codes() {
        let c = |e: ProtoError| ApiError::from(e).code.code();
        assert_eq!(c(ProtoError::Required("serviceName")), 10000);
        assert_eq!(c(ProtoError::WeightRange), 21001);
        assert_eq!(c(ProtoError::MetadataFormat("x".into())), 21002);
        assert_eq!(c(ProtoError::NumberFormat("x".into())), 20002);
        assert_eq!(c(ProtoError::ServiceNameFormat), 21000);
        assert_eq!(
            ApiError::missing("port").detail,
            "Required parameter 'port' type Integer is not present"
        );
    }
}
