//! HTTP/1.1 serving: accept, frame pipelined requests, route, answer.
//!
//! A connection reads into one buffer, answers every complete request in
//! it into one write buffer (so a pipelined batch costs one `write`; large
//! cached bodies are not copied into it but written from the cache, by
//! `writev`), then reads again. Handlers are synchronous: every registry operation is a
//! short, non-blocking call into the store. Two kinds of request finish
//! later: persistent writes, answered once their commit is durable (see
//! [`crate::persist`]), and logins, whose key derivation runs off the
//! runtime threads. Their handlers return [`Reply::Later`]; the connection
//! keeps a place for the response in its write buffer, answers the rest of
//! the batch, then awaits them in order before writing (see `conn`).
//!
//! Bounds: at most `max_connections` open connections (past it a new one
//! gets a 503 and is closed at once); at most `max_inflight` requests being
//! handled across connections, deferred ones included until they finish
//! (past it a request gets a 503); request size limits from the
//! configuration; deadlines for an idle connection, a request head, a
//! body and a write, and one memory budget for every connection's read
//! buffer (see `conn`).
//!
//! With `--auth-users`, every route but the login and `/metrics` needs a
//! valid `accessToken` parameter (see [`crate::auth`]); the check runs
//! before any handler.
//!
//! # Layout
//! - `conn`: the accept loop and the per-connection read/answer/write loop.
//! - `door`: the door the server registers ([`HttpDoor`]: bind, start, drain).
//! - `responses`: a batch's responses, large cached bodies shared, not copied.
//! - `instance`, `service`, `operator`: one handler module per API resource.
//! - `v1`: the v1 endpoints past the 1.x core (batches, health, catalog, ...).
//! - `openapi`: the door of the v2 and v3 APIs (the `Result` envelope).
//! - `namespace`: the namespace endpoints of every door.
//! - `query`: the typed read queries the later doors share.
//! - `writes`: applying a write in a door's format; the batch and health writes.
//! - [`error`]: errors to statuses and texts.

mod conn;
mod door;
pub mod error;
pub(crate) mod instance;
mod namespace;
mod openapi;
mod operator;
mod query;
mod responses;
mod service;
mod v1;
mod writes;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use tokio::time::Instant;

use registry_proto::auth::{LoginRequest, LoginResponse};
use registry_proto::http1::{
    write_response, write_response_head, Connection, ContentType, Method, Request,
};
use registry_proto::naming::route::{Handler, Route, RouteError};
use registry_proto::openapi::param_check;
use registry_proto::openapi::route::route;
use registry_proto::params::Params;

pub use conn::serve;
pub(crate) use conn::Batch;
pub use door::HttpDoor;
pub(crate) use responses::Responses;

use crate::reply::Verdict;
pub(crate) use crate::reply::{Deferred, Done, Failure, Reply};
use crate::state::App;
pub(crate) use crate::state::Exchange;
use crate::write::{Pending, WriteError};

/// Per-connection buffers reused across requests, so the hot paths do not
/// allocate.
#[derive(Default)]
pub(crate) struct Scratch {
    /// A grouped service name being assembled.
    name: String,
    /// A cache key being assembled.
    key: String,
    /// A response body being assembled.
    pub(crate) body: Vec<u8>,
}

/// What [`answer`] did with a request.
pub(crate) enum Answered<'a> {
    /// The response is in the write buffer; whether the connection may stay open.
    Now(bool),
    /// The response comes when [`Later::finish`] is awaited.
    Later(Later<'a>),
}

/// A request whose response is still to come. Counts as in flight until
/// it is finished or dropped.
pub(crate) struct Later<'a> {
    deferred: Deferred,
    inflight: Inflight<'a>,
    route: registry_proto::naming::route::Route,
    started: Instant,
    head_only: bool,
    connection: Connection,
    /// Whether the connection may stay open after this response.
    pub keep_alive: bool,
}

impl Later<'_> {
    /// Waits for the outcome and writes the response into `out`.
    pub(crate) async fn finish(self, out: &mut Vec<u8>) {
        let result = self.deferred.await;
        let app = self.inflight.0;
        let status = match &result {
            Ok(Done::Text(t)) => respond(
                out,
                200,
                ContentType::Text,
                t.as_bytes(),
                self.head_only,
                self.connection,
            ),
            Ok(Done::Json(body)) => respond(
                out,
                200,
                ContentType::Json,
                body,
                self.head_only,
                self.connection,
            ),
            Ok(Done::Relayed(status, ct, body)) => {
                respond(out, *status, *ct, body, self.head_only, self.connection)
            }
            Ok(Done::JsonWithHeader(body, header)) => {
                let start = out.len();
                let status = respond(
                    out,
                    200,
                    ContentType::Json,
                    body,
                    self.head_only,
                    self.connection,
                );
                add_header(out, start, header);
                status
            }
            Err(f) => respond(
                out,
                f.status,
                f.content,
                f.text.as_bytes(),
                self.head_only,
                self.connection,
            ),
        };
        app.metrics
            .request(Some(self.route), status, self.started.elapsed());
    }
}

/// One request counted in `app.inflight` until dropped.
struct Inflight<'a>(&'a App);

impl Drop for Inflight<'_> {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn respond(
    out: &mut Vec<u8>,
    status: u16,
    ct: ContentType,
    body: &[u8],
    head_only: bool,
    connection: Connection,
) -> u16 {
    if head_only {
        write_response_head(out, status, ct, body.len(), connection);
    } else {
        write_response(out, status, ct, body, connection);
    }
    status
}

/// Adds `Allow` to the 405 response just written at `start..`: RFC 9110
/// requires it, and it tells a client which methods the path serves.
fn add_allow_header(out: &mut Vec<u8>, start: usize, allow: &str) {
    add_header(out, start, &format!("Allow: {allow}"));
}

/// Adds one header line (`Name: value`) to the response just written at `start..`.
fn add_header(out: &mut Vec<u8>, start: usize, line: &str) {
    if let Some(end) = out[start..].windows(4).position(|w| w == b"\r\n\r\n") {
        let at = start + end + 2;
        let header = format!("{line}\r\n");
        out.splice(at..at, header.into_bytes());
    }
}

/// Answers one request into `out`, or hands back a [`Later`] for the
/// caller to finish in order.
///
/// `clock` is when this request started: the end of the previous answer of
/// the batch, or the time the batch was read. It is set to when this answer
/// ended, so a pipelined batch reads the clock once per request, not twice
/// (each read is a few percent of a beat); a request's latency then also
/// counts its own framing, which it should.
pub(crate) fn answer<'a>(
    app: &'a App,
    request: &Request<'_>,
    peer: SocketAddr,
    scratch: &mut Scratch,
    out: &mut Responses,
    shutting_down: bool,
    clock: &mut Instant,
) -> Answered<'a> {
    let started = *clock;
    // HTTP/1.0 clients that asked for keep-alive must be told so, or they close.
    let connection = if shutting_down {
        Connection::Close
    } else {
        request.connection()
    };
    let keep_alive = connection != Connection::Close;
    let head_only = request.method == Method::Head;
    let routed = route(request.method, request.path);
    // The console (its pages and read-only endpoints) has its own routes,
    // auth rule and headers, outside the naming API's bounds and metrics.
    // No console path is in the route table (a test in `console` holds
    // that), so asking only on a miss answers the same and costs the API's
    // requests, beats above all, nothing.
    if routed.is_err() && crate::console::claims(request.path) {
        crate::console::answer(app, request, peer, out.bytes(), connection);
        *clock = Instant::now();
        return Answered::Now(keep_alive);
    }
    let result = match routed {
        // Name the method as sent, not our enum's catch-all.
        Err(e) => Err(Failure::route(&e, request.method_token)),
        Ok(r) => {
            let inflight = Inflight(app);
            if app.inflight.fetch_add(1, Ordering::Relaxed) >= app.config.max_inflight {
                app.metrics.requests_shed.inc();
                Err(Failure::overloaded())
            } else {
                let dispatched = dispatch(app, r, request, peer, scratch, started);
                // Errors made before a v2/v3 handler ran (parameters, auth,
                // the cluster) are answered in that generation's envelope.
                let dispatched = match dispatched {
                    Err(f) if r.is_envelope() => Err(f.into_envelope()),
                    other => other,
                };
                match dispatched {
                    Ok(Reply::Later(deferred)) => {
                        *clock = Instant::now();
                        return Answered::Later(Later {
                            deferred,
                            inflight,
                            route: r,
                            started,
                            head_only,
                            connection,
                            keep_alive,
                        });
                    }
                    other => other,
                }
            }
        }
    };
    let status = write_now(out, result, scratch, &routed, head_only, connection);
    *clock = Instant::now();
    app.metrics.request(
        routed.ok(),
        status,
        clock.saturating_duration_since(started),
    );
    Answered::Now(keep_alive)
}

/// Writes an answer made now into `out`; its status. (Inlined: it is the
/// tail of every beat's answer, split out only to keep `answer` readable.)
#[inline]
fn write_now(
    out: &mut Responses,
    result: Result<Reply, Failure>,
    scratch: &Scratch,
    routed: &Result<Route, RouteError<'_>>,
    head_only: bool,
    connection: Connection,
) -> u16 {
    match result {
        Ok(Reply::Cached(c)) if !head_only && c.body.len() >= responses::SHARE_FROM => {
            // Written by reference: see `responses`.
            write_response_head(
                out.bytes(),
                200,
                ContentType::Json,
                c.body.len(),
                connection,
            );
            out.share(c);
            200
        }
        Ok(reply) => {
            let (ct, body): (ContentType, &[u8]) = match &reply {
                Reply::Text(t) => (ContentType::Text, t.as_bytes()),
                Reply::Json => (ContentType::Json, &scratch.body),
                Reply::Cached(c) => (ContentType::Json, &c.body),
                Reply::Prometheus => (ContentType::Prometheus, &scratch.body),
                // Returned above.
                Reply::Later(_) => (ContentType::Text, b""),
            };
            respond(out.bytes(), 200, ct, body, head_only, connection)
        }
        Err(f) => {
            let out = out.bytes();
            let start = out.len();
            let status = respond(
                out,
                f.status,
                f.content,
                f.text.as_bytes(),
                head_only,
                connection,
            );
            if let Err(RouteError::MethodNotAllowed { allow, .. }) = routed {
                add_allow_header(out, start, allow);
            }
            status
        }
    }
}

/// Nacos's filters, in their order: auth, then the parameter checker
/// (`CheckConfiguration`'s order 8 after `NacosAuthConfig`'s 6), which
/// refuses before every v2/v3 naming controller, relayed or not.
fn admit(app: &App, route: Route, params: &Params<'_>) -> Result<(), Failure> {
    if let Some(auth) = &app.auth {
        // Nothing but a valid token opens the API: never a header, never a
        // source address (see `crate::auth`); which routes are open is the
        // route table's (`Access`).
        if route.needs_token() {
            auth.check(params.get("accessToken"))
                .map_err(Failure::denied)?;
        }
    }
    if let Some(extractor) = param_check::extractor(route) {
        param_check::check(extractor, params).map_err(Failure::param_check)?;
    }
    Ok(())
}

fn dispatch(
    app: &App,
    route: Route,
    request: &Request<'_>,
    peer: SocketAddr,
    scratch: &mut Scratch,
    started: Instant,
) -> Result<Reply, Failure> {
    let params = Params::from_request(request)?;
    admit(app, route, &params)?;
    let ex = Exchange {
        app,
        peer,
        request,
        params,
        now: app.clock.at(started),
    };
    scratch.body.clear();
    // A cluster answers its own routes, relays what another node owns and
    // refuses while it loads (see `state::ClusterHook`).
    if let Some(cluster) = &app.cluster {
        if let Verdict::Answer(reply) = cluster.intercept(&ex, route, &mut scratch.body)? {
            return Ok(reply);
        }
    }
    match route {
        Route::InstanceRegister => instance::register(&ex, scratch),
        Route::InstanceDeregister => instance::deregister(&ex),
        Route::InstanceUpdate => instance::update(&ex, scratch),
        Route::InstancePatch => instance::patch(&ex),
        Route::InstanceDetail => instance::detail(&ex, scratch),
        Route::InstanceBeat => instance::beat(&ex, scratch),
        Route::InstanceList => instance::list(&ex, scratch),
        Route::ServiceCreate => service::create(&ex),
        Route::ServiceDelete => service::delete(&ex),
        Route::ServiceUpdate => service::update(&ex),
        Route::ServiceDetail => service::detail(&ex, scratch),
        Route::ServiceList => service::list(&ex, scratch),
        Route::OperatorMetrics => operator::metrics(&ex, scratch),
        Route::OperatorSwitches => operator::switches(&ex, scratch),
        Route::AuthLogin => login(&ex, false),
        Route::V3Login => login(&ex, true),
        Route::PrometheusMetrics => operator::prometheus(&ex, scratch),
        // Every route left goes to its handler family (the route table's).
        r => match r.handler() {
            Handler::Cluster => v1::single_node(&ex, r, scratch),
            Handler::V1 => v1::handle(&ex, r, scratch),
            _ => openapi::handle(&ex, r, scratch),
        },
    }
}

/// `POST /nacos/v1/auth/login` and the v3 `POST /nacos/v3/auth/user/login`
/// (`UserControllerV3.login`: the body adds `username`, and the token also
/// comes as an `Authorization: Bearer` header). The key derivation runs on
/// a blocking thread, at most `--auth-max-logins` at once.
fn login(ex: &Exchange<'_>, v3: bool) -> Result<Reply, Failure> {
    let Some(auth) = &ex.app.auth else {
        return Err(Failure::auth_disabled());
    };
    let req = LoginRequest::parse(&ex.params)?;
    let Some(slot) = auth.login_slot() else {
        return Err(Failure::too_many_logins());
    };
    let (name, password) = (req.username.to_owned(), req.password.to_owned());
    let name_v3 = name.clone();
    let auth = auth.clone();
    Ok(Reply::Later(Box::pin(async move {
        let ttl = auth.ttl_secs();
        let verified = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            auth.login(&name, &password)
        })
        .await;
        match verified {
            Ok(Ok(access_token)) => {
                let mut body = Vec::with_capacity(160);
                if v3 {
                    let header = format!("Authorization: Bearer {access_token}");
                    LoginResponse {
                        access_token,
                        token_ttl: ttl,
                        global_admin: false,
                    }
                    .encode_v3(&name_v3, &mut body);
                    return Ok(Done::JsonWithHeader(body, header));
                }
                LoginResponse {
                    access_token,
                    token_ttl: ttl,
                    global_admin: false,
                }
                .encode(&mut body);
                Ok(Done::Json(body))
            }
            Ok(Err(denied)) => Err(Failure::denied(denied)),
            Err(_) => Err(Failure::login_aborted()),
        }
    })))
}

/// The answer of a write that becomes durable later: `done` once it is,
/// else the failure `render` makes of why not.
pub(crate) fn later(
    pending: Pending,
    done: Done,
    render: impl FnOnce(WriteError) -> Failure + Send + 'static,
) -> Reply {
    Reply::Later(Box::pin(async move {
        pending.await.map(|_| done).map_err(render)
    }))
}
