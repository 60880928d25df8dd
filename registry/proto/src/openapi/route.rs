//! The route table of the endpoints past the 1.x naming core: the rest of
//! v1 (metadata batches, health, operator, Raft leader, console namespace
//! writes and liveness; the catalog and the namespace list are the web
//! console's, served by the server's `console` module on a miss here), the v2 Open API, the v3 client and admin APIs,
//! and the v3 login.
//!
//! [`route`] asks the 1.x table ([`crate::naming::route::route`]) first and
//! this one only when that finds nothing, so the hot 1.x requests (beat,
//! list, register) are resolved exactly as before, by the same
//! comparisons; a request reaches this table only on a miss there. One
//! trailing slash is tolerated and `HEAD` resolves like `GET`, as there.
//! Aliases Nacos serves: `/health` for `/health/instance` (v1, v2) and
//! `/ops/` for `/operator/` (v2).

use crate::http1::Method;
use crate::naming::route::{Lookup, Route, RouteError};

/// The path of v2 `/instance/statuses/{key}`, up to its key.
pub const STATUSES_PREFIX: &str = "/nacos/v2/ns/instance/statuses/";

/// Resolves a request to its route, over every generation.
#[inline]
pub fn route(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    match crate::naming::route::route(method, path) {
        Ok(r) => Ok(r),
        Err(first @ RouteError::MethodNotAllowed { .. }) => Err(first),
        Err(first) => match open_route(method, path) {
            Some(found) => found,
            None => Err(first),
        },
    }
}

/// The table of this module; `None` when it does not know the path.
///
/// One match is the whole table of the v2/v3 paths, read top to bottom as
/// `naming::route` is: longer than 80 lines because the table is.
fn open_route(method: Method, path: &str) -> Option<Result<Route, RouteError<'_>>> {
    let request = Lookup::new(method, path);
    let canonical = alias(request.trimmed);
    let lookup = request.lookup;
    let not_allowed = |allow| request.not_allowed(allow);
    // `@RequestMapping("/statuses/{key}")`: every method, the key in the path.
    if canonical
        .strip_prefix(STATUSES_PREFIX)
        .is_some_and(|key| !key.is_empty() && !key.contains('/'))
    {
        return Some(Ok(Route::V2InstanceStatuses));
    }
    let found = match canonical.as_ref() {
        "/nacos/v1/ns/instance/metadata/batch" => match lookup {
            Method::Put => Ok(Route::MetadataBatchUpdate),
            Method::Delete => Ok(Route::MetadataBatchDelete),
            _ => Err(not_allowed("PUT, DELETE")),
        },
        "/nacos/v1/ns/health/instance" => match lookup {
            Method::Put => Ok(Route::HealthUpdate),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v1/ns/operator/servers" => match lookup {
            Method::Get => Ok(Route::OperatorServers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v1/ns/raft/leader" => match lookup {
            Method::Get => Ok(Route::RaftLeader),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v1/ns/service/subscribers" => match lookup {
            Method::Get => Ok(Route::ServiceSubscribers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v1/console/health/liveness" => match lookup {
            Method::Get => Ok(Route::Liveness),
            _ => Err(not_allowed("GET, HEAD")),
        },
        // GET is the console's (`crate::console` in the server): it lists
        // the namespaces with their service counts.
        "/nacos/v1/console/namespaces" => match lookup {
            Method::Post => Ok(Route::NamespacesCreate),
            Method::Put => Ok(Route::NamespacesUpdate),
            Method::Delete => Ok(Route::NamespacesDelete),
            _ => return None,
        },
        "/nacos/v2/ns/instance" => match lookup {
            Method::Post => Ok(Route::V2InstanceRegister),
            Method::Delete => Ok(Route::V2InstanceDeregister),
            Method::Put => Ok(Route::V2InstanceUpdate),
            Method::Patch => Ok(Route::V2InstancePatch),
            Method::Get => Ok(Route::V2InstanceDetail),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, PATCH, DELETE")),
        },
        "/nacos/v2/ns/instance/list" => match lookup {
            Method::Get => Ok(Route::V2InstanceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/instance/beat" => match lookup {
            Method::Put => Ok(Route::V2InstanceBeat),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v2/ns/instance/metadata/batch" => match lookup {
            Method::Put => Ok(Route::V2MetadataBatchUpdate),
            Method::Delete => Ok(Route::V2MetadataBatchDelete),
            _ => Err(not_allowed("PUT, DELETE")),
        },
        "/nacos/v2/ns/service" => match lookup {
            Method::Post => Ok(Route::V2ServiceCreate),
            Method::Delete => Ok(Route::V2ServiceDelete),
            Method::Put => Ok(Route::V2ServiceUpdate),
            Method::Get => Ok(Route::V2ServiceDetail),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
        },
        "/nacos/v2/ns/service/list" => match lookup {
            Method::Get => Ok(Route::V2ServiceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/health/instance" => match lookup {
            Method::Put => Ok(Route::V2HealthUpdate),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v2/ns/operator/switches" => match lookup {
            Method::Get => Ok(Route::V2Switches),
            Method::Put => Ok(Route::V2SwitchesUpdate),
            _ => Err(not_allowed("GET, HEAD, PUT")),
        },
        "/nacos/v2/ns/operator/metrics" => match lookup {
            Method::Get => Ok(Route::V2Metrics),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client/list" => match lookup {
            Method::Get => Ok(Route::V2ClientList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client" => match lookup {
            Method::Get => Ok(Route::V2ClientDetail),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client/publish/list" => match lookup {
            Method::Get => Ok(Route::V2ClientPublished),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client/subscribe/list" => match lookup {
            Method::Get => Ok(Route::V2ClientSubscribed),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client/service/publisher/list" => match lookup {
            Method::Get => Ok(Route::V2ServicePublishers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/ns/client/service/subscriber/list" => match lookup {
            Method::Get => Ok(Route::V2ServiceSubscriberClients),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/console/namespace/list" => match lookup {
            Method::Get => Ok(Route::V2NamespaceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v2/console/namespace" => match lookup {
            Method::Get => Ok(Route::V2NamespaceDetail),
            Method::Post => Ok(Route::V2NamespaceCreate),
            Method::Put => Ok(Route::V2NamespaceUpdate),
            Method::Delete => Ok(Route::V2NamespaceDelete),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
        },
        "/nacos/v3/client/ns/instance" => match lookup {
            Method::Post => Ok(Route::V3ClientRegister),
            Method::Delete => Ok(Route::V3ClientDeregister),
            _ => Err(not_allowed("POST, DELETE")),
        },
        "/nacos/v3/client/ns/instance/list" => match lookup {
            Method::Get => Ok(Route::V3ClientList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/instance" => match lookup {
            Method::Post => Ok(Route::V3InstanceRegister),
            Method::Delete => Ok(Route::V3InstanceDeregister),
            Method::Put => Ok(Route::V3InstanceUpdate),
            Method::Get => Ok(Route::V3InstanceDetail),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
        },
        "/nacos/v3/admin/ns/instance/partial" => match lookup {
            Method::Put => Ok(Route::V3InstancePartial),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v3/admin/ns/instance/list" => match lookup {
            Method::Get => Ok(Route::V3InstanceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/instance/metadata/batch" => match lookup {
            Method::Put => Ok(Route::V3MetadataBatchUpdate),
            Method::Delete => Ok(Route::V3MetadataBatchDelete),
            _ => Err(not_allowed("PUT, DELETE")),
        },
        "/nacos/v3/admin/ns/service" => match lookup {
            Method::Post => Ok(Route::V3ServiceCreate),
            Method::Delete => Ok(Route::V3ServiceDelete),
            Method::Put => Ok(Route::V3ServiceUpdate),
            Method::Get => Ok(Route::V3ServiceDetail),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
        },
        "/nacos/v3/admin/ns/service/list" => match lookup {
            Method::Get => Ok(Route::V3ServiceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/health/instance" => match lookup {
            Method::Put => Ok(Route::V3HealthUpdate),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v3/admin/ns/ops/switches" => match lookup {
            Method::Get => Ok(Route::V3Switches),
            Method::Put => Ok(Route::V3SwitchesUpdate),
            _ => Err(not_allowed("GET, HEAD, PUT")),
        },
        "/nacos/v3/admin/ns/ops/metrics" => match lookup {
            Method::Get => Ok(Route::V3Metrics),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/list" => match lookup {
            Method::Get => Ok(Route::V3ClientListAdmin),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client" => match lookup {
            Method::Get => Ok(Route::V3ClientDetail),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/publish/list" => match lookup {
            Method::Get => Ok(Route::V3ClientPublished),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/subscribe/list" => match lookup {
            Method::Get => Ok(Route::V3ClientSubscribed),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/service/publisher/list" => match lookup {
            Method::Get => Ok(Route::V3ServicePublishers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/service/subscriber/list" => match lookup {
            Method::Get => Ok(Route::V3ServiceSubscriberClients),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/client/distro" => match lookup {
            Method::Get => Ok(Route::V3ClientDistro),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/cluster" => match lookup {
            Method::Put => Ok(Route::V3ClusterUpdate),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v3/admin/ns/service/subscribers" => match lookup {
            Method::Get => Ok(Route::V3ServiceSubscribers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/service/selector/types" => match lookup {
            Method::Get => Ok(Route::V3SelectorTypes),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/health/checkers" => match lookup {
            Method::Get => Ok(Route::V3HealthCheckers),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/ns/ops/log" => match lookup {
            Method::Put => Ok(Route::V3OpsLog),
            _ => Err(not_allowed("PUT")),
        },
        "/nacos/v3/admin/core/namespace/list" => match lookup {
            Method::Get => Ok(Route::V3NamespaceList),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/admin/core/namespace" => match lookup {
            Method::Get => Ok(Route::V3NamespaceDetail),
            Method::Post => Ok(Route::V3NamespaceCreate),
            Method::Put => Ok(Route::V3NamespaceUpdate),
            Method::Delete => Ok(Route::V3NamespaceDelete),
            _ => Err(not_allowed("GET, HEAD, POST, PUT, DELETE")),
        },
        "/nacos/v3/admin/core/namespace/check" => match lookup {
            Method::Get => Ok(Route::V3NamespaceCheck),
            _ => Err(not_allowed("GET, HEAD")),
        },
        "/nacos/v3/auth/user/login" => match lookup {
            Method::Post => Ok(Route::V3Login),
            _ => Err(not_allowed("POST")),
        },
        _ => return unknown_under_api(method, path),
    };
    Some(found)
}

/// A path under a v2 or v3 prefix that names no endpoint: 404 with the
/// path, as Spring answers an unmapped path (the 1.x prefix keeps its 501).
fn unknown_under_api(_method: Method, path: &str) -> Option<Result<Route, RouteError<'_>>> {
    if path.starts_with("/nacos/v2/") || path.starts_with("/nacos/v3/") {
        return Some(Err(RouteError::NotFound { path }));
    }
    None
}

/// The canonical spelling of an aliased path.
fn alias(path: &str) -> std::borrow::Cow<'_, str> {
    match path {
        "/nacos/v1/ns/health" => "/nacos/v1/ns/health/instance".into(),
        "/nacos/v2/ns/health" => "/nacos/v2/ns/health/instance".into(),
        p => match p.strip_prefix("/nacos/v2/ns/ops/") {
            Some(rest) => format!("/nacos/v2/ns/operator/{rest}").into(),
            None => p.into(),
        },
    }
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
    }

    #[test]
    fn aliases_and_errors() {
        assert_eq!(
            route(Method::Put, "/nacos/v1/ns/health"),
            Ok(Route::HealthUpdate)
        );
        assert_eq!(
            route(Method::Get, "/nacos/v2/ns/ops/metrics"),
            Ok(Route::V2Metrics)
        );
        assert_eq!(
            route(Method::Head, "/nacos/v3/client/ns/instance/list"),
            Ok(Route::V3ClientList)
        );
        let e = route(Method::Get, "/nacos/v3/client/ns/instance").unwrap_err();
        assert!(matches!(
            e,
            RouteError::MethodNotAllowed {
                allow: "POST, DELETE",
                ..
            }
        ));
        assert_eq!(
            route(Method::Get, "/nacos/v3/admin/ns/nope")
                .unwrap_err()
                .status(),
            404
        );
        // The 1.x prefix keeps Nacos's 501 for an unknown endpoint.
        assert_eq!(
            route(Method::Get, "/nacos/v1/ns/nope")
                .unwrap_err()
                .status(),
            501
        );
        assert_eq!(
            route(Method::Put, "/nacos/v1/ns/operator/switches"),
            Ok(Route::OperatorSwitchesUpdate)
        );
        assert_eq!(route(Method::Get, "/nacos/v4/x").unwrap_err().status(), 404);
    }
}
