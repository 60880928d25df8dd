//! Server side: framing one request out of a pipelined read buffer.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use super::{
    chunked, map_httparse, version_of, Connection, Fields, Framing, HttpError, Limits, Method,
    Version, MAX_HEADERS_CAP,
};

/// Bytes a request line has beyond its target (method, spaces, `HTTP/1.1`, CRLF); used
/// to tell an over-long URL (414) from a complete-but-slow request line.
const REQUEST_LINE_SLACK: usize = 32;

/// One parsed request, borrowing from the read buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// The method exactly as sent (`OPTIONS`, `PROPFIND`, ...), for error
    /// texts that name a method [`Method`] has no variant for.
    pub method_token: &'a str,
    /// The target path without the query (`/nacos/v1/ns/instance`). For an absolute-form
    /// target (`http://host/path`) the scheme and authority are removed.
    pub path: &'a str,
    /// The raw query string after `?`, not decoded; empty when there is none.
    pub query: &'a str,
    /// The protocol version.
    pub version: Version,
    /// Whether the connection may serve another request after this one: HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`.
    pub keep_alive: bool,
    /// `Content-Type`, trimmed, as sent; [`Request::content_type`] reads it as text.
    pub raw_content_type: Option<&'a [u8]>,
    /// `User-Agent`, trimmed, as sent; [`Request::user_agent`] reads it as text.
    pub raw_user_agent: Option<&'a [u8]>,
    /// `Host`, trimmed, as sent; [`Request::host`] reads it as text.
    pub raw_host: Option<&'a [u8]>,
    /// Whether the client sent `Expect: 100-continue`.
    pub expect_continue: bool,
    /// The body: borrowed for `Content-Length` framing, owned when it was chunked.
    pub body: Cow<'a, [u8]>,
}

impl<'a> Request<'a> {
    // The headers are kept as bytes and read as text only when asked for:
    // most requests (every beat) never read them, and a UTF-8 check of each
    // was ~130 instructions per header per request.

    /// `Content-Type`, trimmed, if present and UTF-8.
    pub fn content_type(&self) -> Option<&'a str> {
        self.raw_content_type
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// `User-Agent`, trimmed, if present and UTF-8 (Nacos decides push support by it).
    pub fn user_agent(&self) -> Option<&'a str> {
        self.raw_user_agent
            .and_then(|v| std::str::from_utf8(v).ok())
    }

    /// `Host`, trimmed, if present and UTF-8.
    pub fn host(&self) -> Option<&'a str> {
        self.raw_host.and_then(|v| std::str::from_utf8(v).ok())
    }

    /// What the response should say about the connection.
    pub fn connection(&self) -> Connection {
        match (self.keep_alive, self.version) {
            (false, _) => Connection::Close,
            (true, Version::Http11) => Connection::KeepAlive,
            (true, Version::Http10) => Connection::KeepAliveHttp10,
        }
    }

    /// Whether the body is `application/x-www-form-urlencoded` (parameters may be in it).
    pub fn is_form(&self) -> bool {
        const FORM: &[u8] = b"application/x-www-form-urlencoded";
        // What every client sends, known without the general reading below
        // (the essence before `;`, trimmed): that split and trim cost ~150
        // instructions per beat. `trim_ows` already cut the value's ends.
        if let Some(ct) = self.raw_content_type {
            if ct.len() >= FORM.len()
                && ct[..FORM.len()].eq_ignore_ascii_case(FORM)
                && matches!(ct.get(FORM.len()), None | Some(b';'))
            {
                return true;
            }
        }
        self.content_type().is_some_and(|ct| {
            let essence = ct.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
    }
}

/// A complete request head.
struct Head<'a> {
    request: Request<'a>,
    len: usize,
    framing: Framing,
}

/// Frames the first request in `buf`.
///
/// Returns `Ok(None)` when `buf` holds only part of a request (read more and call again
/// with the grown buffer), or the request and the number of bytes it used; the next
/// pipelined request starts at that offset. Errors are final: answer
/// [`HttpError::status`] and close the connection, since the stream cannot be resynced.
///
/// Allocates only to reassemble a chunked body.
pub fn parse_request<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, HttpError> {
    let Some(head) = parse_head(buf, limits)? else {
        return Ok(None);
    };
    let rest = &buf[head.len..];
    let mut request = head.request;
    match head.framing {
        Framing::Length(n) => {
            if rest.len() < n {
                return Ok(None);
            }
            request.body = Cow::Borrowed(&rest[..n]);
            Ok(Some((request, head.len + n)))
        }
        Framing::Chunked => match chunked::measure(rest, limits.max_body)? {
            None => Ok(None),
            Some(m) => {
                request.body = chunked::assemble(rest, &m);
                Ok(Some((request, head.len + m.consumed)))
            }
        },
        // Requests are never close-delimited; `parse_head` does not produce this.
        Framing::UntilClose => Err(HttpError::Malformed("request without length")),
    }
}

/// Whether `buf` holds a complete head that asked for `Expect: 100-continue` and whose
/// body has not fully arrived. A server that gets `Ok(None)` from [`parse_request`]
/// checks this once per request and, if true, writes [`super::CONTINUE`] so the
/// client sends the body without waiting for its own timeout.
pub fn needs_continue(buf: &[u8], limits: &Limits) -> bool {
    matches!(parse_head(buf, limits), Ok(Some(h)) if h.request.expect_continue)
        && matches!(parse_request(buf, limits), Ok(None))
}

fn parse_head<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Head<'a>>, HttpError> {
    let mut slots = [const { MaybeUninit::<httparse::Header<'a>>::uninit() }; MAX_HEADERS_CAP];
    let cap = limits.max_headers.clamp(1, MAX_HEADERS_CAP);
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots[..cap]) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            check_partial(buf, limits)?;
            return Ok(None);
        }
        Err(e) => return Err(map_httparse(e)),
    };
    let target = req.path.unwrap_or("/");
    if target.len() > limits.max_url_len {
        return Err(HttpError::UriTooLong);
    }
    if len > limits.max_head_bytes {
        return Err(HttpError::HeadTooLarge);
    }
    let version = version_of(req.version)?;
    let method_token = req.method.unwrap_or("");
    let method = Method::from_token(method_token.as_bytes());
    let fields = Fields::collect(req.headers)?;
    let framing = if fields.chunked {
        Framing::Chunked
    } else {
        let n = fields.content_length.unwrap_or(0);
        if n > limits.max_body {
            return Err(HttpError::BodyTooLarge);
        }
        Framing::Length(n)
    };
    let (path, query) = split_target(target);
    Ok(Some(Head {
        request: Request {
            method,
            method_token,
            path,
            query,
            version,
            keep_alive: fields.keep_alive(version),
            raw_content_type: fields.content_type,
            raw_user_agent: fields.user_agent,
            raw_host: fields.host,
            expect_continue: fields.expect_continue,
            body: Cow::Borrowed(&[]),
        },
        len,
        framing,
    }))
}

/// Rejects an incomplete head that can no longer become acceptable.
fn check_partial(buf: &[u8], limits: &Limits) -> Result<(), HttpError> {
    let line_budget = limits.max_url_len.saturating_add(REQUEST_LINE_SLACK);
    if buf.len() > line_budget && !buf[..line_budget].contains(&b'\n') {
        return Err(HttpError::UriTooLong);
    }
    if buf.len() > limits.max_head_bytes {
        return Err(HttpError::HeadTooLarge);
    }
    Ok(())
}

/// Splits a request target into path and raw query.
fn split_target(target: &str) -> (&str, &str) {
    let target = strip_authority(target);
    let bytes = target.as_bytes();
    // Clients never send a fragment, but cut one off if present. `memchr`, not
    // a byte loop: a beat's target is ~170 bytes, read on every beat.
    let end = memchr::memchr(b'#', bytes).unwrap_or(bytes.len());
    let (path, query) = match memchr::memchr(b'?', &bytes[..end]) {
        Some(i) => (&target[..i], &target[i + 1..end]),
        None => (&target[..end], ""),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

/// `http://host:port/path?q` → `/path?q` (absolute-form, sent to proxies).
fn strip_authority(target: &str) -> &str {
    let rest = if let Some(r) = target.strip_prefix("http://") {
        r
    } else if let Some(r) = target.strip_prefix("https://") {
        r
    } else {
        return target;
    };
    rest.find(['/', '?']).map_or("/", |i| &rest[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Option<(Request<'_>, usize)>, HttpError> {
        parse_request(buf, &Limits::default())
    }

    #[test]
    fn light_beat_borrows_path_and_query() {
        let wire = b"PUT /nacos/v1/ns/instance/beat?serviceName=G%40%40s&ip=1.2.3.4 HTTP/1.1\r\n\
Host: reg\r\nUser-Agent: Nacos-Java-Client:v1.4.8\r\nContent-Length: 0\r\n\r\n";
        let (req, used) = parse(wire).unwrap().unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(req.method, Method::Put);
        assert_eq!(req.path, "/nacos/v1/ns/instance/beat");
        assert_eq!(req.query, "serviceName=G%40%40s&ip=1.2.3.4");
        assert_eq!(req.host(), Some("reg"));
        assert_eq!(req.user_agent(), Some("Nacos-Java-Client:v1.4.8"));
        assert!(req.keep_alive);
        assert_eq!(req.connection(), Connection::KeepAlive);
        assert!(matches!(req.body, Cow::Borrowed(b"")));
    }

    #[test]
    fn keep_alive_defaults_follow_the_version() {
        let (r, _) = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.keep_alive);
        assert_eq!(r.connection(), Connection::Close);
        let (r, _) = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(r.keep_alive);
        assert_eq!(r.connection(), Connection::KeepAliveHttp10);
        let (r, _) = parse(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!r.keep_alive);
    }

    #[test]
    fn form_body_and_absolute_target() {
        let wire = b"POST http://h:8848/nacos/v1/ns/instance?a=1 HTTP/1.1\r\n\
Content-Type: application/x-www-form-urlencoded; charset=UTF-8\r\nContent-Length: 3\r\n\r\nb=2";
        let (r, used) = parse(wire).unwrap().unwrap();
        assert_eq!(used, wire.len());
        assert_eq!(r.path, "/nacos/v1/ns/instance");
        assert_eq!(r.query, "a=1");
        assert!(r.is_form());
        assert_eq!(&*r.body, b"b=2");
    }

    #[test]
    fn chunked_request_body_is_reassembled() {
        let wire = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\nGET";
        let (r, used) = parse(wire).unwrap().unwrap();
        assert_eq!(&*r.body, b"abc");
        assert_eq!(&wire[used..], b"GET");
    }

    #[test]
    fn framing_errors() {
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            Err(HttpError::TransferEncoding)
        );
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
                .map_err(HttpError::status),
            Err(400)
        );
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
                .map_err(HttpError::status),
            Err(400)
        );
        assert_eq!(
            parse(b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n").map_err(HttpError::status),
            Err(400)
        );
        assert_eq!(
            parse(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").map_err(HttpError::status),
            Err(505)
        );
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n").map_err(HttpError::status),
            Err(400)
        );
    }

    #[test]
    fn size_limits() {
        let limits = Limits {
            max_url_len: 100,
            max_head_bytes: 300,
            max_headers: 4,
            max_body: 10,
        };
        let long_url = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(100));
        assert_eq!(
            parse_request(long_url.as_bytes(), &limits),
            Err(HttpError::UriTooLong)
        );
        // Still streaming in, but already past any acceptable request line.
        let partial = format!("GET /{}", "a".repeat(200));
        assert_eq!(
            parse_request(partial.as_bytes(), &limits),
            Err(HttpError::UriTooLong)
        );
        let big_head = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "v".repeat(300));
        assert_eq!(
            parse_request(big_head.as_bytes(), &limits),
            Err(HttpError::HeadTooLarge)
        );
        let partial_head = format!("GET / HTTP/1.1\r\nX: {}", "v".repeat(300));
        assert_eq!(
            parse_request(partial_head.as_bytes(), &limits),
            Err(HttpError::HeadTooLarge)
        );
        let many = "GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n";
        assert_eq!(
            parse_request(many.as_bytes(), &limits),
            Err(HttpError::TooManyHeaders)
        );
        assert_eq!(
            parse_request(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", &limits),
            Err(HttpError::BodyTooLarge)
        );
        assert_eq!(
            parse_request(
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n123456\r\n6\r\n",
                &limits
            ),
            Err(HttpError::BodyTooLarge)
        );
    }

    #[test]
    fn expect_continue_is_reported_while_the_body_is_missing() {
        let limits = Limits::default();
        let head = b"POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        assert!(needs_continue(head, &limits));
        let mut full = head.to_vec();
        full.extend_from_slice(b"ok");
        assert!(!needs_continue(&full, &limits));
        assert!(
            parse_request(&full, &limits)
                .unwrap()
                .unwrap()
                .0
                .expect_continue
        );
        assert!(!needs_continue(b"GET / HTTP/1.1\r\n\r\n", &limits));
    }

    #[test]
    fn targets() {
        assert_eq!(split_target("/a?b=1#f"), ("/a", "b=1"));
        assert_eq!(split_target("http://h"), ("/", ""));
        assert_eq!(split_target("http://h?x=1"), ("/", "x=1"));
        assert_eq!(split_target("/a"), ("/a", ""));
    }
}
