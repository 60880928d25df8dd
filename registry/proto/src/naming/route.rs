//! The route table: `(method, path)` to the endpoint it names.
//!
//! Covers every endpoint the registry serves: the naming API under `/nacos/v1/ns/`, the
//! login endpoint, our Prometheus `/metrics`, and the cluster's member list, readiness
//! and peer endpoints (see [`crate::distro`]). One trailing slash is tolerated.
//! `HEAD` resolves like `GET` (as in Spring); the server must then omit the body.
//!
//! Errors: a path under `/nacos/v1/ns/` that names no endpoint is 501
//! `no such api:<METHOD>:<path>` (Nacos `DistroFilter`); a known path with a method it
//! does not serve is 405 with an `Allow` list (Nacos answers 501 here too, because its
//! lookup is keyed by method and path; 405 is the HTTP-correct answer and no client
//! depends on the difference); any other path is 404.

use super::API_PREFIX;
use crate::http1::Method;

/// An endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /nacos/v1/ns/instance`
    InstanceRegister,
    /// `DELETE /nacos/v1/ns/instance`
    InstanceDeregister,
    /// `PUT /nacos/v1/ns/instance`
    InstanceUpdate,
    /// `PATCH /nacos/v1/ns/instance`
    InstancePatch,
    /// `GET /nacos/v1/ns/instance`
    InstanceDetail,
    /// `PUT /nacos/v1/ns/instance/beat`
    InstanceBeat,
    /// `GET /nacos/v1/ns/instance/list`
    InstanceList,
    /// `POST /nacos/v1/ns/service`
    ServiceCreate,
    /// `DELETE /nacos/v1/ns/service`
    ServiceDelete,
    /// `PUT /nacos/v1/ns/service`
    ServiceUpdate,
    /// `GET /nacos/v1/ns/service`
    ServiceDetail,
    /// `GET /nacos/v1/ns/service/list`
    ServiceList,
    /// `GET /nacos/v1/ns/operator/metrics`
    OperatorMetrics,
    /// `GET /nacos/v1/ns/operator/switches`
    OperatorSwitches,
    /// `POST /nacos/v1/auth/login` (also `/nacos/v1/auth/users/login`)
    AuthLogin,
    /// `GET /metrics` (Prometheus text)
    PrometheusMetrics,
    /// `GET /nacos/v1/core/cluster/nodes`: the cluster's members
    ClusterNodes,
    /// `POST /nacos/v1/core/cluster/report`: a peer's probe
    ClusterReport,
    /// `PUT /nacos/v1/ns/distro/datum`: replicated service states
    DistroReplicate,
    /// `POST /nacos/v1/ns/distro/datum`: a peer fetches named services
    DistroFetch,
    /// `PUT /nacos/v1/ns/distro/checksum`: a peer's checksums
    DistroChecksum,
    /// `POST /nacos/v1/ns/distro/datums`: a part of the full snapshot
    DistroSnapshot,
    /// `GET /nacos/v1/console/health/readiness`
    Readiness,
    /// `POST /nacos/v1/core/raft`: a Raft peer message
    RaftRpc,
    /// `POST /nacos/v1/core/cluster/member`: an operator adds a member
    ClusterMemberAdd,
    /// `DELETE /nacos/v1/core/cluster/member`: an operator removes one
    ClusterMemberRemove,
}

impl Route {
    /// Every route, for tests and metric label tables.
    pub const ALL: [Route; 26] = [
        Route::InstanceRegister,
        Route::InstanceDeregister,
        Route::InstanceUpdate,
        Route::InstancePatch,
        Route::InstanceDetail,
        Route::InstanceBeat,
        Route::InstanceList,
        Route::ServiceCreate,
        Route::ServiceDelete,
        Route::ServiceUpdate,
        Route::ServiceDetail,
        Route::ServiceList,
        Route::OperatorMetrics,
        Route::OperatorSwitches,
        Route::AuthLogin,
        Route::PrometheusMetrics,
        Route::ClusterNodes,
        Route::ClusterReport,
        Route::DistroReplicate,
        Route::DistroFetch,
        Route::DistroChecksum,
        Route::DistroSnapshot,
        Route::Readiness,
        Route::RaftRpc,
        Route::ClusterMemberAdd,
        Route::ClusterMemberRemove,
    ];

    /// A short stable name (`instance_beat`), for logs and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Route::InstanceRegister => "instance_register",
            Route::InstanceDeregister => "instance_deregister",
            Route::InstanceUpdate => "instance_update",
            Route::InstancePatch => "instance_patch",
            Route::InstanceDetail => "instance_detail",
            Route::InstanceBeat => "instance_beat",
            Route::InstanceList => "instance_list",
            Route::ServiceCreate => "service_create",
            Route::ServiceDelete => "service_delete",
            Route::ServiceUpdate => "service_update",
            Route::ServiceDetail => "service_detail",
            Route::ServiceList => "service_list",
            Route::OperatorMetrics => "operator_metrics",
            Route::OperatorSwitches => "operator_switches",
            Route::AuthLogin => "auth_login",
            Route::PrometheusMetrics => "prometheus_metrics",
            Route::ClusterNodes => "cluster_nodes",
            Route::ClusterReport => "cluster_report",
            Route::DistroReplicate => "distro_replicate",
            Route::DistroFetch => "distro_fetch",
            Route::DistroChecksum => "distro_checksum",
            Route::DistroSnapshot => "distro_snapshot",
            Route::Readiness => "readiness",
            Route::RaftRpc => "raft_rpc",
            Route::ClusterMemberAdd => "cluster_member_add",
            Route::ClusterMemberRemove => "cluster_member_remove",
        }
    }

    /// The method and path this route answers (the canonical request line).
    pub fn endpoint(self) -> (Method, &'static str) {
        match self {
            Route::InstanceRegister => (Method::Post, "/nacos/v1/ns/instance"),
            Route::InstanceDeregister => (Method::Delete, "/nacos/v1/ns/instance"),
            Route::InstanceUpdate => (Method::Put, "/nacos/v1/ns/instance"),
            Route::InstancePatch => (Method::Patch, "/nacos/v1/ns/instance"),
            Route::InstanceDetail => (Method::Get, "/nacos/v1/ns/instance"),
            Route::InstanceBeat => (Method::Put, "/nacos/v1/ns/instance/beat"),
            Route::InstanceList => (Method::Get, "/nacos/v1/ns/instance/list"),
            Route::ServiceCreate => (Method::Post, "/nacos/v1/ns/service"),
            Route::ServiceDelete => (Method::Delete, "/nacos/v1/ns/service"),
            Route::ServiceUpdate => (Method::Put, "/nacos/v1/ns/service"),
            Route::ServiceDetail => (Method::Get, "/nacos/v1/ns/service"),
            Route::ServiceList => (Method::Get, "/nacos/v1/ns/service/list"),
            Route::OperatorMetrics => (Method::Get, "/nacos/v1/ns/operator/metrics"),
            Route::OperatorSwitches => (Method::Get, "/nacos/v1/ns/operator/switches"),
            Route::AuthLogin => (Method::Post, "/nacos/v1/auth/login"),
            Route::PrometheusMetrics => (Method::Get, "/metrics"),
            Route::ClusterNodes => (Method::Get, crate::distro::NODES_PATH),
            Route::ClusterReport => (Method::Post, crate::distro::REPORT_PATH),
            Route::DistroReplicate => (Method::Put, crate::distro::DATUM_PATH),
            Route::DistroFetch => (Method::Post, crate::distro::DATUM_PATH),
            Route::DistroChecksum => (Method::Put, crate::distro::CHECKSUM_PATH),
            Route::DistroSnapshot => (Method::Post, crate::distro::SNAPSHOT_PATH),
            Route::Readiness => (Method::Get, crate::distro::READINESS_PATH),
            Route::RaftRpc => (Method::Post, crate::distro::RAFT_PATH),
            Route::ClusterMemberAdd => (Method::Post, crate::distro::MEMBER_PATH),
            Route::ClusterMemberRemove => (Method::Delete, crate::distro::MEMBER_PATH),
        }
    }

    /// Whether the route only reads state (what a `READ_ONLY` server still serves).
    pub fn is_read(self) -> bool {
        self.endpoint().0 == Method::Get
    }
}

/// Why a request has no route. `Display` is the plain-text body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RouteError<'a> {
    /// A path outside the API.
    #[error("Not Found: {path}")]
    NotFound {
        /// The request path.
        path: &'a str,
    },
    /// A path under `/nacos/v1/ns/` that names no endpoint.
    #[error("no such api:{}:{path}", method.as_str())]
    NoSuchApi {
        /// The request method.
        method: Method,
        /// The request path.
        path: &'a str,
    },
    /// A known path with a method it does not serve.
    #[error("no such api:{}:{path}", method.as_str())]
    MethodNotAllowed {
        /// The request method.
        method: Method,
        /// The request path.
        path: &'a str,
        /// The `Allow` header value.
        allow: &'static str,
    },
}

impl RouteError<'_> {
    /// The status to answer: 404, 501 or 405.
    pub fn status(&self) -> u16 {
        match self {
            RouteError::NotFound { .. } => 404,
            RouteError::NoSuchApi { .. } => 501,
            RouteError::MethodNotAllowed { .. } => 405,
        }
    }
}

/// Resolves a request to its route.
pub fn route(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    let trimmed = match path.strip_suffix('/') {
        Some(p) if !p.is_empty() => p,
        _ => path,
    };
    let lookup = if method == Method::Head {
        Method::Get
    } else {
        method
    };
    let not_allowed = |allow| RouteError::MethodNotAllowed {
        method,
        path,
        allow,
    };
    if let Some(rest) = trimmed
        .strip_prefix(API_PREFIX)
        .and_then(|r| r.strip_prefix('/'))
    {
        return match rest {
            "instance" => match lookup {
                Method::Post => Ok(Route::InstanceRegister),
                Method::Delete => Ok(Route::InstanceDeregister),
                Method::Put => Ok(Route::InstanceUpdate),
                Method::Patch => Ok(Route::InstancePatch),
                Method::Get => Ok(Route::InstanceDetail),
                _ => Err(not_allowed("GET, HEAD, POST, PUT, PATCH, DELETE")),
            },
            "instance/beat" => match lookup {
                Method::Put => Ok(Route::InstanceBeat),
                _ => Err(not_allowed("PUT")),
            },
            "instance/list" => {
                get_only(lookup, Route::InstanceList).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "service" => match lookup {
                Method::Post => Ok(Route::ServiceCreate),
                Method::Delete => Ok(Route::ServiceDelete),
                Method::Put => Ok(Route::ServiceUpdate),
                Method::Get => Ok(Route::ServiceDetail),
                _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
            },
            "service/list" => {
                get_only(lookup, Route::ServiceList).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "operator/metrics" => {
                get_only(lookup, Route::OperatorMetrics).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "operator/switches" => {
                get_only(lookup, Route::OperatorSwitches).ok_or_else(|| not_allowed("GET, HEAD"))
            }
            "distro/datum" => match lookup {
                Method::Put => Ok(Route::DistroReplicate),
                Method::Post => Ok(Route::DistroFetch),
                _ => Err(not_allowed("POST, PUT")),
            },
            "distro/checksum" => match lookup {
                Method::Put => Ok(Route::DistroChecksum),
                _ => Err(not_allowed("PUT")),
            },
            "distro/datums" => match lookup {
                Method::Post => Ok(Route::DistroSnapshot),
                _ => Err(not_allowed("POST")),
            },
            _ => Err(RouteError::NoSuchApi { method, path }),
        };
    }
    match trimmed {
        "/nacos/v1/auth/login" | "/nacos/v1/auth/users/login" => match lookup {
            Method::Post => Ok(Route::AuthLogin),
            _ => Err(not_allowed("POST")),
        },
        "/metrics" => {
            get_only(lookup, Route::PrometheusMetrics).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        crate::distro::NODES_PATH => {
            get_only(lookup, Route::ClusterNodes).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        crate::distro::REPORT_PATH => match lookup {
            Method::Post => Ok(Route::ClusterReport),
            _ => Err(not_allowed("POST")),
        },
        crate::distro::RAFT_PATH => match lookup {
            Method::Post => Ok(Route::RaftRpc),
            _ => Err(not_allowed("POST")),
        },
        crate::distro::MEMBER_PATH => match lookup {
            Method::Post => Ok(Route::ClusterMemberAdd),
            Method::Delete => Ok(Route::ClusterMemberRemove),
            _ => Err(not_allowed("POST, DELETE")),
        },
        crate::distro::READINESS_PATH => {
            get_only(lookup, Route::Readiness).ok_or_else(|| not_allowed("GET, HEAD"))
        }
        _ => Err(RouteError::NotFound { path }),
    }
}

fn get_only(method: Method, route: Route) -> Option<Route> {
    (method == Method::Get).then_some(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_resolves_from_its_endpoint() {
        for r in Route::ALL {
            let (m, p) = r.endpoint();
            assert_eq!(route(m, p), Ok(r), "{p}");
            assert_eq!(route(m, &format!("{p}/")), Ok(r), "{p}/");
        }
        assert_eq!(
            route(Method::Head, "/nacos/v1/ns/instance/list"),
            Ok(Route::InstanceList)
        );
        assert!(Route::InstanceList.is_read() && !Route::InstanceBeat.is_read());
    }

    #[test]
    fn errors() {
        let e = route(Method::Get, "/nacos/v1/ns/nope").unwrap_err();
        assert_eq!(
            (e.status(), e.to_string()),
            (501, "no such api:GET:/nacos/v1/ns/nope".to_owned())
        );
        let e = route(Method::Get, "/nacos/v1/ns/instance/beat").unwrap_err();
        assert_eq!(e.status(), 405);
        assert!(matches!(
            e,
            RouteError::MethodNotAllowed { allow: "PUT", .. }
        ));
        assert_eq!(route(Method::Get, "/").unwrap_err().status(), 404);
        assert_eq!(
            route(Method::Get, "/nacos/v1/nsx").unwrap_err().status(),
            404
        );
        assert_eq!(
            route(Method::Get, "/nacos/v1/ns/instance//")
                .unwrap_err()
                .status(),
            501
        );
    }
}
