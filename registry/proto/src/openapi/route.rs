//! The resolver of every generation, the one the server's HTTP door asks.
//! The table is [`crate::naming::route`]'s (a row per endpoint, v1, v2 and
//! v3 alike), whose own `route` resolves the 1.x core only; this module
//! keeps the name the server and the fuzz targets call, and the prefix of
//! v2's `/instance/statuses/{key}`.

use crate::http1::Method;
use crate::naming::route::{Route, RouteError};

/// Resolves a request to its route, over every generation.
#[inline]
pub fn route(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    crate::naming::route::route_every(method, path)
}

/// The path of v2 `/instance/statuses/{key}`, up to its key.
pub const STATUSES_PREFIX: &str = Route::V2InstanceStatuses.path_prefix();

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
