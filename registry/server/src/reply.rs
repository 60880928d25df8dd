//! What a request's handling comes to, below every door that answers it:
//! a [`Reply`] (now, or [`Deferred`] until a write is durable or a login
//! verified), a deferred [`Done`], or a [`Failure`] (status and body).
//!
//! The HTTP door writes them out (`http`), and the cluster's endpoints and
//! its relaying build them (`cluster`), so they sit below both: neither
//! door reaches into the other for them. Which status and text each error
//! becomes is still decided in one place, `http::error`, as `Failure`'s
//! named constructors and `From` conversions.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use registry_proto::http1::ContentType;
use registry_proto::openapi::envelope::{ApiError, ErrorCode};

use crate::list_cache::CachedList;

/// A successful answer.
pub(crate) enum Reply {
    /// A fixed text body.
    Text(&'static str),
    /// A JSON body written into the scratch body.
    Json,
    /// A cached JSON body.
    Cached(Arc<CachedList>),
    /// A Prometheus text body written into the scratch body.
    Prometheus,
    /// Finished later: a persistent write waiting for its commit, a login.
    Later(Deferred),
}

/// The rest of a request that finishes later. Owns everything it needs.
pub(crate) type Deferred = Pin<Box<dyn Future<Output = Result<Done, Failure>> + Send>>;

/// A deferred request's successful answer.
pub(crate) enum Done {
    /// A fixed text body.
    Text(&'static str),
    /// A JSON body.
    Json(Vec<u8>),
    /// The answer of the peer a request was relayed to, as it came.
    Relayed(u16, ContentType, Vec<u8>),
    /// A JSON body and one more response header line (`Name: value`).
    JsonWithHeader(Vec<u8>, String),
}

/// What the cluster says of a request before the door's handler runs (see
/// `state::ClusterHook::intercept`).
pub(crate) enum Verdict {
    /// Serve it here.
    Local,
    /// Answered (a relay in flight, a cluster endpoint, or a refusal).
    Answer(Reply),
}

/// A request that failed: the status and the reason, plain text for v1
/// and the cluster, a `Result` envelope for the v2 and v3 APIs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// HTTP status.
    pub status: u16,
    /// The body: plain text, or the envelope's JSON.
    pub text: Cow<'static, str>,
    /// The body's type.
    pub content: ContentType,
    /// Plain text on every door, never put in the envelope: Nacos's
    /// parameter checker answers v2/v3 requests so (see `http::error`).
    pub filter: bool,
}

impl Failure {
    /// A failure with a fixed text.
    pub fn new(status: u16, text: impl Into<Cow<'static, str>>) -> Failure {
        Failure {
            status,
            text: text.into(),
            content: ContentType::Text,
            filter: false,
        }
    }

    /// A v2/v3 failure: its status, and the envelope as the body.
    pub fn envelope(e: &ApiError) -> Failure {
        let mut body = Vec::with_capacity(96 + e.detail.len());
        e.encode(&mut body);
        Failure {
            status: e.status,
            // The envelope is written from UTF-8 texts.
            text: String::from_utf8_lossy(&body).into_owned().into(),
            content: ContentType::Json,
            filter: false,
        }
    }

    /// This failure in the v2/v3 envelope: failures made before a v2/v3
    /// handler ran (auth, overload, routing, framing) keep their status
    /// and say what they said as the detail.
    pub fn into_envelope(self) -> Failure {
        if self.content == ContentType::Json || self.filter {
            return self;
        }
        let code = match self.status {
            403 => ErrorCode::AccessDenied,
            404 => ErrorCode::ResourceNotFound,
            400 => ErrorCode::ParameterValidate,
            _ => ErrorCode::ServerError,
        };
        Failure::envelope(&ApiError::new(self.status, code, self.text))
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Failure {
        Failure::envelope(&e)
    }
}
