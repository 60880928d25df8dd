//! The web console at `/nacos/`: its static pages and the read-only JSON
//! endpoints those pages need that the Nacos API does not give.
//!
//! The console is a client of the registry like any other: every change it
//! makes (weight, enable/disable, deregister, service metadata and
//! threshold, taking an IP offline, creating or deleting a namespace) is a
//! request to the public Nacos API,
//! so it is validated, persisted and pushed like a client's change. This
//! module only reads. Its endpoints reuse Nacos's console names and shapes
//! where they exist (`/v1/ns/catalog/*`, `/v1/console/namespaces`,
//! `/v1/console/server/state`). A service's subscribers come from the API's
//! `/v1/ns/service/subscribers`, which gathers every member's (it waits on
//! the peers, so it is a route of [`crate::http`], not a console read).
//!
//! Cost: a page of services is a page of the store's sorted index, O(page);
//! a search is one pass over that same index ([`search`]), nothing built or
//! cached for it; the counts come from the page's snapshots. Instances,
//! subscribers and details cost O(page). Nothing here takes a shard's
//! writer lock, so the console cannot stall beats; a search delays the
//! creation of a service by at most its own pass (the index's read lock).
//!
//! Served before the naming routes (see `crate::http::answer`): outside the
//! in-flight bound and the per-route metrics, which describe client traffic.
//! With `--auth-users` the JSON endpoints need a valid `accessToken`, as the
//! Nacos API does; the static assets and `server/state` (which says whether
//! login is needed) do not.
//!
//! # Layout
//! - [`assets`]: the HTML, CSS and JavaScript compiled into the binary.
//! - `catalog`: services, one service, its instances.
//! - `hosts`: namespaces and the instances of one IP across services.
//! - `state`: what the console's header and live view show about the server.
//! - [`search`]: searches by name and group substring.

pub mod assets;
mod catalog;
mod hosts;
pub mod search;
mod state;

use std::net::SocketAddr;

use registry_proto::http1::{reason_phrase, Connection, Method, Request};
use registry_proto::params::Params;

use crate::reply::Failure;
use crate::state::App;
use assets::Asset;

/// What a console path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    /// A static file.
    Asset(&'static Asset),
    /// A JSON endpoint.
    Data(Data),
}

/// The console's JSON endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Data {
    /// `GET /nacos/v1/console/server/state`
    ServerState,
    /// `GET /nacos/v1/console/namespaces`
    Namespaces,
    /// `GET /nacos/v1/console/instances?ip=`
    InstancesOfIp,
    /// `GET /nacos/v1/ns/catalog/services`
    Services,
    /// `GET /nacos/v1/ns/catalog/service`
    Service,
    /// `GET /nacos/v1/ns/catalog/instances`
    Instances,
}

impl Endpoint {
    /// The endpoint a path names; `None` for paths the console does not own.
    fn of(path: &str) -> Option<Endpoint> {
        let path = match path.strip_suffix('/') {
            Some(p) if p.len() > "/nacos".len() => p,
            _ => path,
        };
        Some(Endpoint::Data(match path {
            "/nacos/v1/console/server/state" => Data::ServerState,
            "/nacos/v1/console/namespaces" => Data::Namespaces,
            "/nacos/v1/console/instances" => Data::InstancesOfIp,
            "/nacos/v1/ns/catalog/services" => Data::Services,
            "/nacos/v1/ns/catalog/service" => Data::Service,
            "/nacos/v1/ns/catalog/instances" => Data::Instances,
            _ => return assets::find(path).map(Endpoint::Asset),
        }))
    }
}

impl Data {
    /// Whether a request needs an access token when auth is on:
    /// `server/state` tells the page whether to ask for a login.
    fn needs_token(self) -> bool {
        self != Data::ServerState
    }
}

/// True when the console answers `path`; the HTTP layer then hands the
/// request to [`answer`] instead of the naming routes.
pub fn claims(path: &str) -> bool {
    Endpoint::of(path).is_some() || assets::is_asset_path(path)
}

/// Answers one console request into `out`.
pub(crate) fn answer(
    app: &App,
    request: &Request<'_>,
    peer: SocketAddr,
    out: &mut Vec<u8>,
    connection: Connection,
) {
    let head_only = request.method == Method::Head;
    let reply = match Endpoint::of(request.path) {
        None => Err(Failure::new(404, format!("Not Found: {}", request.path))),
        Some(_) if !matches!(request.method, Method::Get | Method::Head) => {
            let text = format!("no such api:{}:{}", request.method_token, request.path);
            let mut body = Response::text(405, text);
            body.headers.push("Allow: GET, HEAD");
            Ok(body)
        }
        Some(Endpoint::Asset(asset)) => Ok(Response::asset(asset)),
        Some(Endpoint::Data(data)) => read(app, data, request, peer),
    };
    let response = reply.unwrap_or_else(|f| Response::text(f.status, f.text.into_owned()));
    response.write(out, head_only, connection);
}

/// Answers a JSON endpoint.
fn read(
    app: &App,
    data: Data,
    request: &Request<'_>,
    peer: SocketAddr,
) -> Result<Response, Failure> {
    let params = Params::from_request(request)?;
    if let (Some(auth), true) = (&app.auth, data.needs_token()) {
        auth.check(params.get("accessToken"))
            .map_err(|d| Failure::new(403, d.to_string()))?;
    }
    let mut body = Vec::with_capacity(1024);
    match data {
        Data::ServerState => state::server_state(app, &mut body)?,
        Data::Namespaces => hosts::namespaces(app, &mut body)?,
        Data::InstancesOfIp => hosts::instances_of_ip(app, &params, &mut body)?,
        Data::Services => catalog::services(app, &params, &mut body)?,
        Data::Service => catalog::service(app, &params, &mut body)?,
        Data::Instances => catalog::instances(app, &params, &mut body)?,
    }
    tracing::debug!(%peer, path = request.path, "console read");
    Ok(Response::json(body))
}

/// Headers on every console response: no MIME sniffing (a JSON body that
/// holds `<script>` must never be read as HTML), no referrer leaving the
/// page, no framing.
const COMMON_HEADERS: [&str; 3] = [
    "X-Content-Type-Options: nosniff",
    "Referrer-Policy: no-referrer",
    "X-Frame-Options: DENY",
];

/// The page's policy: scripts, styles and requests only from this server,
/// no inline script or handler. The pages never build HTML from data, so
/// this is a second wall, not the first.
const CONTENT_SECURITY_POLICY: &str = "Content-Security-Policy: default-src 'none'; \
script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A console response, written with its own headers (the naming API's
/// writer knows only its three content types and adds none).
struct Response {
    status: u16,
    content_type: &'static str,
    body: std::borrow::Cow<'static, [u8]>,
    headers: Vec<&'static str>,
}

impl Response {
    fn text(status: u16, text: String) -> Response {
        Response {
            status,
            content_type: "text/plain;charset=UTF-8",
            body: text.into_bytes().into(),
            headers: vec!["Cache-Control: no-store"],
        }
    }

    fn json(body: Vec<u8>) -> Response {
        Response {
            status: 200,
            content_type: "application/json;charset=UTF-8",
            body: body.into(),
            headers: vec!["Cache-Control: no-store"],
        }
    }

    fn asset(asset: &'static Asset) -> Response {
        let mut headers = vec!["Cache-Control: no-cache"];
        if asset.is_page() {
            headers.push(CONTENT_SECURITY_POLICY);
        }
        Response {
            status: 200,
            content_type: asset.content_type,
            body: asset.body.into(),
            headers,
        }
    }

    fn write(&self, out: &mut Vec<u8>, head_only: bool, connection: Connection) {
        use std::io::Write as _;
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
            self.status,
            reason_phrase(self.status),
            self.content_type,
            self.body.len()
        );
        for h in COMMON_HEADERS.iter().chain(&self.headers) {
            out.extend_from_slice(h.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(match connection {
            Connection::KeepAlive => &b"\r\n"[..],
            Connection::KeepAliveHttp10 => b"Connection: keep-alive\r\n\r\n",
            Connection::Close => b"Connection: close\r\n\r\n",
        });
        if !head_only {
            out.extend_from_slice(&self.body);
        }
    }
}

/// A positive integer parameter with a default and an upper bound, with a
/// plain-text 400 naming the parameter when it is not one.
pub(crate) fn bounded(
    params: &Params<'_>,
    name: &str,
    default: usize,
    max: usize,
) -> Result<usize, Failure> {
    match params
        .optional(name)
        .map(str::trim)
        .filter(|v| !v.is_empty())
    {
        None => Ok(default),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(Failure::new(
                400,
                format!("{name} must be an integer within [1, {max}], got: {v}"),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_paths_are_claimed_and_naming_paths_are_not() {
        for p in [
            "/nacos",
            "/nacos/",
            "/nacos/index.html",
            "/nacos/console/app.js",
            "/nacos/console/nope.js",
            "/nacos/v1/ns/catalog/services",
            "/nacos/v1/ns/catalog/services/",
            "/nacos/v1/console/namespaces",
        ] {
            assert!(claims(p), "{p}");
        }
        for p in [
            "/nacos/v1/ns/instance",
            "/nacos/v1/ns/service",
            "/nacos/v1/ns/service/list",
            "/nacos/v1/ns/catalog",
            // The API's: it waits on the other members.
            "/nacos/v1/ns/service/subscribers",
            "/nacos/v1/core/cluster/nodes",
            "/nacos/v1/auth/login",
            "/metrics",
            "/",
        ] {
            assert!(!claims(p), "{p}");
        }
    }

    /// The HTTP layer asks the console only about paths the route table
    /// misses: a console path that also routed would never reach it.
    #[test]
    fn no_console_path_is_in_the_route_table() {
        use registry_proto::naming::route::{route, Route};
        for r in Route::ALL {
            let (method, path) = r.endpoint();
            // A write on a console path (the namespace writes) is the API's;
            // the console's GET must still miss the route table.
            if method != Method::Get && claims(path) {
                let get = registry_proto::openapi::route::route(Method::Get, path);
                assert!(get.is_err(), "GET {path} routes");
                continue;
            }
            assert!(!claims(path), "{path}");
            assert!(!claims(&format!("{path}/")), "{path}/");
        }
        for p in [
            "/nacos",
            "/nacos/",
            "/nacos/index.html",
            "/nacos/console/app.js",
            "/nacos/v1/ns/catalog/services",
            "/nacos/v1/ns/catalog/service/",
            "/nacos/v1/ns/catalog/instances",
            "/nacos/v1/ns/service/subscribers",
            "/nacos/v1/console/server/state",
            "/nacos/v1/console/namespaces",
            "/nacos/v1/console/instances",
        ] {
            for m in [
                Method::Get,
                Method::Head,
                Method::Post,
                Method::Put,
                Method::Delete,
            ] {
                assert!(route(m, p).is_err(), "{m:?} {p}");
            }
        }
    }

    #[test]
    fn page_parameters_are_bounded_with_a_clear_text() {
        let p = Params::parse("pageNo=0&pageSize=x&ok=7", None).unwrap();
        assert_eq!(
            bounded(&p, "pageNo", 1, 10).unwrap_err().text,
            "pageNo must be an integer within [1, 10], got: 0"
        );
        assert_eq!(bounded(&p, "pageSize", 1, 10).unwrap_err().status, 400);
        assert_eq!(bounded(&p, "ok", 1, 10).unwrap(), 7);
        assert_eq!(bounded(&p, "absent", 3, 10).unwrap(), 3);
    }

    #[test]
    fn responses_carry_the_security_headers() {
        let mut out = Vec::new();
        Response::asset(assets::find("/nacos/").unwrap()).write(
            &mut out,
            true,
            Connection::KeepAlive,
        );
        let head = String::from_utf8(out).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains("Content-Security-Policy: default-src 'none'"));
        assert!(head.contains("X-Content-Type-Options: nosniff"));
        assert!(head.ends_with("\r\n\r\n"));
    }
}
