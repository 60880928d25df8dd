//! The route table: `(method, path)` to the endpoint it names, over every
//! generation, and what each endpoint is.
//!
//! Every endpoint is one row of `route/table.rs` (method, path, generation,
//! handler family, access, place in a cluster); [`Route`], its accessors, the
//! resolvers ([`route`] for the 1.x core, [`crate::openapi::route::route`]
//! for every generation) and `docs/endpoints.md` are derived from the rows,
//! so the server asks a route what it is ([`Route::needs_token`],
//! [`Route::is_relayed_to_owner`], ...) instead of listing routes again.
//!
//! Endpoints: the naming API under `/nacos/v1/ns/`, the rest of v1 (console
//! namespace writes, liveness, the login), our Prometheus `/metrics`, the
//! cluster's member list, readiness and peer endpoints (see [`crate::distro`]),
//! the v2 Open API, the v3 client and admin APIs and the v3 login. The web
//! console's pages and read-only endpoints are not in the table: the server's
//! `console` module answers them on a miss here.
//!
//! Resolution: one trailing slash is tolerated; `HEAD` resolves like `GET`
//! (as in Spring; the server must then omit the body). Aliases Nacos serves:
//! `/nacos/v1/auth/users/login`, `/health` for `/health/instance` (v1, v2) and
//! `/ops/` for `/operator/` (v2); v2's `/instance/statuses/{key}` takes any
//! method, the key in the path.
//!
//! Errors: a path under `/nacos/v1/ns/` that names no endpoint is 501
//! `no such api:<METHOD>:<path>` (Nacos `DistroFilter`); a known path with a
//! method it does not serve is 405 with an `Allow` list (Nacos answers 501
//! here too, because its lookup is keyed by method and path; 405 is the
//! HTTP-correct answer and no client depends on the difference), except on
//! the path the console shares (`GET /nacos/v1/console/namespaces` is the
//! console's); any other path is 404 (under `/nacos/v2/` and `/nacos/v3/` as
//! Spring answers an unmapped path).
//!
//! # Layout
//! - `table`: the rows, the aliases, the path the console shares;
//! - `index`: the sorted path index built from them at compile time, with
//!   the hottest 1.x paths compared first;
//! - this file: the row type and its classes, the accessors, [`route`].

mod index;
mod table;

pub use table::Route;

use crate::http1::Method;

/// One row of the route table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    /// The route the row declares.
    pub route: Route,
    /// A short stable name (`instance_beat`), for logs and metric labels.
    pub name: &'static str,
    /// The method it answers (`GET` for a route of every method).
    pub method: Method,
    /// Whether it answers every method (a templated path).
    pub any_method: bool,
    /// The path as declared; a template ends in `{key}`.
    pub path: &'static str,
    /// A path that resolves to it: the path, or an example of a template.
    pub example: &'static str,
    /// The API generation of its path.
    pub generation: Generation,
    /// The server's handler family that answers it.
    pub handler: Handler,
    /// Who may call it.
    pub access: Access,
    /// Where a cluster serves it.
    pub in_cluster: InCluster,
}

/// The API generation a route's path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// Nacos 1.x: `/nacos/v1/...` (naming, console, auth, the cluster's).
    V1,
    /// The v2 Open API: `/nacos/v2/...`.
    V2,
    /// The v3 client, admin and auth APIs: `/nacos/v3/...`.
    V3,
    /// Not Nacos's: the registry's own `/metrics`.
    Ours,
}

/// The server's handler family that answers a route (its HTTP door
/// dispatches on it; each family then matches its own routes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// Its own arm in the HTTP door's dispatch: the 1.x naming core and
    /// `/metrics`.
    Core,
    /// A login (v1 and v3), answered as v1 answers: no envelope.
    Login,
    /// The cluster's own endpoints (the cluster answers them; a single node
    /// answers the member list and readiness and refuses the rest).
    Cluster,
    /// The v1 endpoints past the naming core (`http::v1`).
    V1,
    /// The v2/v3 reads and namespaces (`http::openapi`).
    Open,
    /// The v2/v3 instance and service writes, beats and health
    /// (`http::openapi::write`).
    OpenWrite,
    /// The v2/v3 admin views: client views, statuses, checkers, log level
    /// (`http::openapi::admin`).
    OpenAdmin,
}

/// Who may call a route under `--auth-users`. Nothing but a valid token
/// opens the API: never a header, never a source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A valid access token.
    Token,
    /// Anyone: the logins and the probes (liveness, readiness, `/metrics`).
    Open,
    /// Cluster members, which prove it with the cluster secret instead of a
    /// token (see the cluster's endpoints).
    Peer,
}

/// Where a cluster (`--members`) serves a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InCluster {
    /// A client write or beat: relayed to the node responsible for its
    /// service (Nacos's `DistroFilter`); 503 while the node loads. 1.x's,
    /// and the v2/v3 HTTP doors' instance and service writes: their
    /// instances are lease-held like 1.x's, so they are service-owned Distro
    /// data too (Nacos keys its v2/v3 HTTP instances by an ip:port client
    /// and does not proxy them, but here a lease instance written on another
    /// node would be overwritten by the owner's replication).
    Owner,
    /// Served by the node it reaches, once that node has loaded its
    /// peers' snapshot (503 before).
    Here,
    /// Served by the node it reaches even while it loads: the cluster's own
    /// traffic, readiness and `/metrics`.
    Always,
}

impl Route {
    /// The route's row.
    #[inline]
    pub const fn spec(self) -> &'static RouteSpec {
        &table::TABLE[self as usize]
    }

    /// A short stable name (`instance_beat`), for logs and metric labels.
    #[inline]
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// The method and path this route answers (the canonical request line;
    /// for a template, an example of its path).
    #[inline]
    pub const fn endpoint(self) -> (Method, &'static str) {
        (self.spec().method, self.spec().example)
    }

    /// The path as declared (a template ends in `{key}`).
    #[inline]
    pub const fn path(self) -> &'static str {
        self.spec().path
    }

    /// A templated path up to its `{key}`; the whole path otherwise.
    pub const fn path_prefix(self) -> &'static str {
        let path = self.path();
        if self.spec().any_method {
            index::template_prefix(path)
        } else {
            path
        }
    }

    /// The API generation of its path.
    #[inline]
    pub const fn generation(self) -> Generation {
        self.spec().generation
    }

    /// The server's handler family that answers it.
    #[inline]
    pub const fn handler(self) -> Handler {
        self.spec().handler
    }

    /// Who may call it.
    #[inline]
    pub const fn access(self) -> Access {
        self.spec().access
    }

    /// Where a cluster serves it.
    #[inline]
    pub const fn in_cluster(self) -> InCluster {
        self.spec().in_cluster
    }

    /// Whether the route is one of the 1.x core's: what a Nacos 1.x client or
    /// peer calls (the naming core, the v1 login, `/metrics`, the cluster's
    /// endpoints), resolved by [`route`]; every other method of such a path
    /// is too (`PUT /nacos/v1/ns/operator/switches`).
    #[inline]
    pub const fn is_1x_core(self) -> bool {
        matches!(self.generation(), Generation::V1 | Generation::Ours)
            && matches!(
                self.handler(),
                Handler::Core | Handler::Login | Handler::Cluster
            )
    }

    /// Whether the route answers in the v2/v3 `Result` envelope (its errors
    /// too): every v2 and v3 naming and namespace route; not the v3 login,
    /// which answers as the 1.x one does.
    #[inline]
    pub fn is_envelope(self) -> bool {
        matches!(self.generation(), Generation::V2 | Generation::V3)
            && self.handler() != Handler::Login
    }

    /// Whether the route only reads state (what a `READ_ONLY` server still serves).
    #[inline]
    pub fn is_read(self) -> bool {
        self.spec().method == Method::Get
    }

    /// Whether it needs a valid access token under `--auth-users`.
    #[inline]
    pub fn needs_token(self) -> bool {
        self.access() == Access::Token
    }

    /// Whether the cluster answers it itself (see [`Handler::Cluster`]).
    #[inline]
    pub fn is_cluster(self) -> bool {
        self.handler() == Handler::Cluster
    }

    /// Whether a cluster relays it to the service's responsible node.
    #[inline]
    pub fn is_relayed_to_owner(self) -> bool {
        self.in_cluster() == InCluster::Owner
    }

    /// Whether a node serves it while it loads its peers' snapshot.
    #[inline]
    pub fn is_served_while_loading(self) -> bool {
        self.in_cluster() == InCluster::Always
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

/// Resolves a request to its route among the 1.x core's ([`Route::is_1x_core`]):
/// a path of the later generations (or of the v1 endpoints past the core) is
/// a miss here, as it was before they were served: 501 under `/nacos/v1/ns/`,
/// else 404. The server resolves every generation, through
/// [`crate::openapi::route::route`].
#[inline]
pub fn route(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    let request = Lookup::new(method, path);
    match index::find(request.trimmed) {
        Some(entry) if entry.is_1x_core() => entry.resolve(request),
        _ => Err(index::miss(request)),
    }
}

/// Resolves a request to its route, over every generation.
#[inline]
pub(crate) fn route_every(method: Method, path: &str) -> Result<Route, RouteError<'_>> {
    let request = Lookup::new(method, path);
    match index::find(request.trimmed) {
        Some(entry) => entry.resolve(request),
        None => index::resolve_rest(request),
    }
}

/// What a lookup reads first: the path with one trailing slash off, the
/// method to look up (`HEAD` as `GET`), and the 405 of a path the table
/// knows.
#[derive(Clone, Copy)]
pub(crate) struct Lookup<'a> {
    /// The method as sent.
    pub(crate) method: Method,
    /// The path as sent.
    pub(crate) path: &'a str,
    /// The path without one trailing slash (`/` stays `/`).
    pub(crate) trimmed: &'a str,
    /// The method the tables match on.
    pub(crate) lookup: Method,
}

impl<'a> Lookup<'a> {
    /// The lookup of `method` on `path`.
    #[inline]
    pub(crate) fn new(method: Method, path: &'a str) -> Self {
        let trimmed = match path.strip_suffix('/') {
            Some(p) if !p.is_empty() => p,
            _ => path,
        };
        let lookup = if method == Method::Head {
            Method::Get
        } else {
            method
        };
        Lookup {
            method,
            path,
            trimmed,
            lookup,
        }
    }

    /// 405 for this request: the path is known, `allow` lists its methods.
    #[inline]
    pub(crate) fn not_allowed(self, allow: &'static str) -> RouteError<'a> {
        RouteError::MethodNotAllowed {
            method: self.method,
            path: self.path,
            allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_resolves_from_its_endpoint() {
        // The rest are `crate::openapi::route`'s, tested there.
        for r in Route::ALL
            .into_iter()
            .take_while(|r| *r != Route::MetadataBatchUpdate)
        {
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
