//! HTTP/1.1 serving: accept, frame pipelined requests, route, answer.
//!
//! A connection reads into one buffer, answers every complete request in
//! it into one write buffer (so a pipelined batch costs one `write`), then
//! reads again. Handlers are synchronous: every registry operation is a
//! short, non-blocking call into the store.
//!
//! Bounds: at most `max_connections` open connections (past it a new one
//! gets a 503 and is closed at once); at most `max_inflight` requests being
//! handled across connections (past it a request gets a 503); request size
//! limits from the configuration; idle connections close after the idle
//! timeout.
//!
//! # Layout
//! - `conn`: the accept loop and the per-connection read/answer/write loop.
//! - `instance`, `service`, `operator`: one handler module per API resource.
//! - [`error`]: errors to statuses and texts.

mod conn;
pub mod error;
pub(crate) mod instance;
mod operator;
mod service;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use registry_proto::http1::{write_response, write_response_head, ContentType, Method, Request};
use registry_proto::naming::route::{route, Route};
use registry_proto::params::Params;

pub use conn::serve;
use error::Failure;
pub(crate) use instance::PUSH_CACHE_MILLIS;

use crate::list_cache::CachedList;
use crate::state::App;

/// Per-connection buffers reused across requests, so the hot paths do not
/// allocate.
#[derive(Default)]
pub(crate) struct Scratch {
    /// A grouped service name being assembled.
    name: String,
    /// A cache key being assembled.
    key: String,
    /// A response body being assembled.
    body: Vec<u8>,
}

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
}

/// What a handler sees.
pub(crate) struct Exchange<'a> {
    pub app: &'a App,
    pub peer: SocketAddr,
    pub request: &'a Request<'a>,
    pub params: Params<'a>,
}

/// Answers one request into `out`. Returns whether the connection may
/// stay open.
pub(crate) fn answer(
    app: &App,
    request: &Request<'_>,
    peer: SocketAddr,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
    shutting_down: bool,
) -> bool {
    let started = std::time::Instant::now();
    let keep_alive = request.keep_alive && !shutting_down;
    let routed = route(request.method, request.path);
    let result = match routed {
        Err(e) => Err(Failure::new(e.status(), e.to_string())),
        Ok(r) => {
            let inflight = app.inflight.fetch_add(1, Ordering::Relaxed);
            let result = if inflight >= app.config.max_inflight {
                app.metrics.requests_shed.inc();
                Err(Failure::new(
                    503,
                    "server is overloaded, please try again later",
                ))
            } else {
                dispatch(app, r, request, peer, scratch)
            };
            app.inflight.fetch_sub(1, Ordering::Relaxed);
            result
        }
    };
    let head_only = request.method == Method::Head;
    let status = match result {
        Ok(reply) => {
            let (ct, body): (ContentType, &[u8]) = match &reply {
                Reply::Text(t) => (ContentType::Text, t.as_bytes()),
                Reply::Json => (ContentType::Json, &scratch.body),
                Reply::Cached(c) => (ContentType::Json, &c.body),
                Reply::Prometheus => (ContentType::Prometheus, &scratch.body),
            };
            if head_only {
                write_response_head(out, 200, ct, body.len(), keep_alive);
            } else {
                write_response(out, 200, ct, body, keep_alive);
            }
            200
        }
        Err(f) => {
            if head_only {
                write_response_head(out, f.status, ContentType::Text, f.text.len(), keep_alive);
            } else {
                write_response(
                    out,
                    f.status,
                    ContentType::Text,
                    f.text.as_bytes(),
                    keep_alive,
                );
            }
            f.status
        }
    };
    app.metrics.request(routed.ok(), status, started.elapsed());
    keep_alive
}

fn dispatch(
    app: &App,
    route: Route,
    request: &Request<'_>,
    peer: SocketAddr,
    scratch: &mut Scratch,
) -> Result<Reply, Failure> {
    let params = Params::from_request(request)?;
    let ex = Exchange {
        app,
        peer,
        request,
        params,
    };
    scratch.body.clear();
    match route {
        Route::InstanceRegister => instance::register(&ex),
        Route::InstanceDeregister => instance::deregister(&ex),
        Route::InstanceUpdate => instance::update(&ex),
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
        Route::AuthLogin => Err(Failure::new(
            403,
            "authentication is not enabled on this server",
        )),
        Route::PrometheusMetrics => operator::prometheus(&ex, scratch),
    }
}
