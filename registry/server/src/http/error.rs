//! The one place errors become Nacos statuses and plain-text bodies.
//!
//! Every status and text the HTTP side answers with, other than a handler's
//! success, is made here: framing errors, routing, the overload and
//! connection bounds, authentication and logins, persistence, and the
//! core's errors. Parse errors carry their own Nacos text
//! (`registry-proto`). Core errors need the operation and names to say what
//! Nacos says, so each operation has its own mapping ([`registry`]).

use registry_core::namespace::NamespaceError;
use registry_core::RegistryError;
use registry_proto::http1::HttpError;
use registry_proto::naming::route::RouteError;
use registry_proto::openapi::envelope::{ApiError, ErrorCode};
use registry_proto::openapi::namespace::{self, Refusal};
use registry_proto::ProtoError;

use crate::auth::Denied;
use crate::namespaces::BookError;
use crate::persist::PersistError;
use crate::write::WriteError;

/// Body of the 503 a connection past `--max-connections` gets.
pub const TOO_MANY_CONNECTIONS: &str = "too many connections, please try again later";

pub use crate::reply::Failure;

/// A namespace change refused, in the v2/v3 envelope (Nacos's codes:
/// 22000 illegal, 22001 missing (404), 22002 exists; 23000 for what Nacos
/// has no code for: the default namespace, one holding services).
pub fn namespace_refusal(e: &BookError) -> ApiError {
    use NamespaceError as N;
    let kind = match e {
        BookError::Refused(N::IllegalId(_) | N::IllegalName(_)) => Refusal::Illegal,
        BookError::Refused(N::DefaultExists(_) | N::Exists(_)) => Refusal::Exists,
        BookError::Refused(N::NotFound(_)) => Refusal::Missing,
        BookError::Refused(_) => Refusal::State,
        BookError::Save(_) => {
            return ApiError::new(500, ErrorCode::ServerError, e.to_string());
        }
    };
    namespace::refusal(kind, e.to_string())
}

/// A register refused by its namespace's quota, in plain text (v1) or the
/// envelope (v2/v3): 400, `{23000}` as Nacos has no quota code for naming.
pub fn quota(e: &NamespaceError, envelope: bool) -> Failure {
    if envelope {
        Failure::envelope(&ApiError::new(400, ErrorCode::IllegalState, e.to_string()))
    } else {
        Failure::new(400, e.to_string())
    }
}

impl From<ProtoError> for Failure {
    fn from(e: ProtoError) -> Failure {
        Failure::new(e.status(), e.to_string())
    }
}

impl From<HttpError> for Failure {
    /// A request that cannot be framed (413, 414, 431, 400, ...): answered,
    /// then the connection is closed.
    fn from(e: HttpError) -> Failure {
        Failure::new(e.status(), e.to_string())
    }
}

impl From<PersistError> for Failure {
    fn from(e: PersistError) -> Failure {
        match e {
            PersistError::Busy | PersistError::Stopped => Failure::new(503, e.to_string()),
            PersistError::Full(_) => Failure::new(507, e.to_string()),
            PersistError::Storage(_) => Failure::new(500, format!("Server failed,{e}")),
        }
    }
}

impl Failure {
    /// No route for the request; Nacos names the method as sent.
    pub fn route(e: &RouteError<'_>, method_token: &str) -> Failure {
        match e {
            RouteError::NoSuchApi { path, .. } | RouteError::MethodNotAllowed { path, .. } => {
                Failure::new(e.status(), format!("no such api:{method_token}:{path}"))
            }
            other => Failure::new(other.status(), other.to_string()),
        }
    }

    /// Past `--max-inflight`.
    pub fn overloaded() -> Failure {
        Failure::new(503, "server is overloaded, please try again later")
    }

    /// Past the request-buffer memory budget (`--max-buffered-bytes`).
    pub fn buffers_exhausted() -> Failure {
        Failure::new(
            503,
            "server is out of request buffer memory, please try again later",
        )
    }

    /// A request head or body that did not arrive within its deadline.
    pub fn request_timeout() -> Failure {
        Failure::new(408, "request not received in time")
    }

    /// No valid access token (or a login refused).
    pub fn denied(d: Denied) -> Failure {
        Failure::new(403, d.to_string())
    }

    /// A login on a server without `--auth-users`.
    pub fn auth_disabled() -> Failure {
        Failure::new(403, "authentication is not enabled on this server")
    }

    /// Past `--auth-max-logins`.
    pub fn too_many_logins() -> Failure {
        Failure::new(503, "too many logins in progress, please try again later")
    }

    /// The key derivation of a login did not finish (its thread died).
    pub fn login_aborted() -> Failure {
        Failure::new(500, "Server failed,login aborted")
    }

    /// A v2/v3 naming request refused by Nacos's parameter checker: 400 and
    /// the message on a line of its own (`ParamCheckerFilter.generate400Response`
    /// writes it with `println`).
    pub fn param_check(message: String) -> Failure {
        Failure {
            filter: true,
            ..Failure::new(400, message + "\r\n")
        }
    }

    /// `GET /service` for a service that does not exist.
    pub fn no_such_service(grouped: &str) -> Failure {
        Failure::new(404, format!("service {grouped} is not found!"))
    }
}

/// Which operation failed, with the names its texts mention.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Register or update an instance (`PUT` from a Java client is strict).
    Write {
        /// Namespace id.
        namespace: &'a str,
        /// Grouped service name.
        service: &'a str,
        /// Instance id.
        instance: &'a str,
    },
    /// `PATCH /instance`.
    Patch,
    /// `GET /instance`.
    Detail {
        /// Grouped service name.
        service: &'a str,
        /// Cluster asked for.
        cluster: &'a str,
    },
    /// `POST /service`.
    ServiceCreate {
        /// Grouped service name.
        service: &'a str,
    },
    /// `PUT /service`.
    ServiceUpdate {
        /// Grouped service name.
        service: &'a str,
    },
    /// `DELETE /service`.
    ServiceDelete {
        /// Grouped service name.
        service: &'a str,
    },
}

/// Maps a refused write for `op` to Nacos's status and text.
pub fn write(e: WriteError, op: Op<'_>) -> Failure {
    match e {
        WriteError::Store(e) => registry(e, op),
        WriteError::Persist(e) => Failure::from(e),
        WriteError::Log(text) => Failure::new(503, text),
        e @ WriteError::TooLarge { .. } => Failure::new(413, e.to_string()),
        WriteError::Invalid(text) => Failure::new(400, text),
        WriteError::Namespace(e @ BookError::Save(_)) => Failure::new(500, e.to_string()),
        WriteError::Namespace(e) => Failure::new(400, e.to_string()),
    }
}

/// Maps a core error for `op` to Nacos's status and text.
pub fn registry(e: RegistryError, op: Op<'_>) -> Failure {
    use RegistryError as E;
    match (e, op) {
        (
            E::ServiceNotFound,
            Op::Write {
                namespace, service, ..
            },
        ) => Failure::new(
            400,
            format!("service not found, namespace: {namespace}, service: {service}"),
        ),
        (E::InstanceNotFound, Op::Write { instance, .. }) => {
            Failure::new(400, format!("instance not exist: {instance}"))
        }
        (E::ServiceNotFound | E::InstanceNotFound | E::ClusterNotFound, Op::Patch) => {
            Failure::new(400, "instance not found")
        }
        (E::ServiceNotFound, Op::Detail { service, .. }) => {
            Failure::new(404, format!("no service {service} found!"))
        }
        (E::ClusterNotFound, Op::Detail { service, cluster }) => Failure::new(
            404,
            format!("no ips found for cluster {cluster} in service {service}"),
        ),
        (E::InstanceNotFound, Op::Detail { .. }) => Failure::new(404, "no matched ip found!"),
        (E::ServiceExists, Op::ServiceCreate { service }) => Failure::new(
            400,
            format!("specified service already exists, serviceName : {service}"),
        ),
        (E::ServiceNotFound, Op::ServiceUpdate { service }) => {
            Failure::new(400, format!("service {service} not found!"))
        }
        (E::ServiceNotFound, Op::ServiceDelete { service }) => Failure::new(
            400,
            format!("specified service not exist, serviceName : {service}"),
        ),
        (E::InvalidWeight, _) => Failure::from(ProtoError::WeightRange),
        (E::InvalidMetadata, _) => Failure::new(
            400,
            "metadata format incorrect: keys must be non-empty and free of NUL",
        ),
        (E::InvalidProtectThreshold, _) => {
            Failure::new(400, "protectThreshold must be within [0.0, 1.0]")
        }
        (E::InvalidName, _) => Failure::new(
            400,
            "namespace, service and cluster names must not be empty",
        ),
        (
            e @ (E::InvalidTimeout { .. } | E::TooManyInstances { .. } | E::TooManyServices { .. }),
            _,
        ) => Failure::new(400, e.to_string()),
        (e, _) => Failure::new(500, format!("Server failed,{e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nacos_texts() {
        let w = Op::Write {
            namespace: "public",
            service: "DEFAULT_GROUP@@a",
            instance: "1.1.1.1#80#DEFAULT#DEFAULT_GROUP@@a",
        };
        assert_eq!(
            registry(RegistryError::ServiceNotFound, w),
            Failure::new(
                400,
                "service not found, namespace: public, service: DEFAULT_GROUP@@a"
            )
        );
        let d = Op::Detail {
            service: "DEFAULT_GROUP@@a",
            cluster: "c1",
        };
        assert_eq!(
            registry(RegistryError::ClusterNotFound, d),
            Failure::new(
                404,
                "no ips found for cluster c1 in service DEFAULT_GROUP@@a"
            )
        );
        assert_eq!(
            registry(RegistryError::InstanceNotFound, d).text,
            "no matched ip found!"
        );
        assert_eq!(
            registry(RegistryError::InvalidWeight, Op::Patch).text,
            "instance format invalid: The weights range from 0.0 to 10000.0"
        );
    }
}
