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
    parse_request_using(buf, limits, parse_head)
}

/// [`parse_request`] with every head read by httparse, never by the reader of
/// plain heads: the reference that the tests and the `http_request` fuzz
/// target hold [`parse_request`] to. Not for use elsewhere.
#[doc(hidden)]
pub fn parse_request_with_httparse<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, HttpError> {
    parse_request_using(buf, limits, parse_head_with_httparse)
}

type HeadParser = for<'a> fn(&'a [u8], &Limits) -> Result<Option<Head<'a>>, HttpError>;

fn parse_request_using<'a>(
    buf: &'a [u8],
    limits: &Limits,
    parse_head: HeadParser,
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

/// What a parser found in a complete head, before the checks that both
/// parsers share.
struct RawHead<'a> {
    method: Method,
    method_token: &'a str,
    target: &'a str,
    /// httparse's minor version (`None`: none it knows).
    version: Option<u8>,
    len: usize,
    /// The first error the headers gave, if any.
    fields: Result<Fields<'a>, HttpError>,
}

fn parse_head<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Head<'a>>, HttpError> {
    match plain_head(buf, limits) {
        Some(raw) => finish_head(raw, limits).map(Some),
        None => parse_head_with_httparse(buf, limits),
    }
}

fn parse_head_with_httparse<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Option<Head<'a>>, HttpError> {
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
    let method_token = req.method.unwrap_or("");
    let raw = RawHead {
        method: Method::from_token(method_token.as_bytes()),
        method_token,
        target: req.path.unwrap_or("/"),
        version: req.version,
        len,
        fields: Fields::collect(req.headers),
    };
    finish_head(raw, limits).map(Some)
}

fn finish_head<'a>(raw: RawHead<'a>, limits: &Limits) -> Result<Head<'a>, HttpError> {
    if raw.target.len() > limits.max_url_len {
        return Err(HttpError::UriTooLong);
    }
    if raw.len > limits.max_head_bytes {
        return Err(HttpError::HeadTooLarge);
    }
    let version = version_of(raw.version)?;
    let method = raw.method;
    let fields = raw.fields?;
    let framing = if fields.chunked {
        Framing::Chunked
    } else {
        let n = fields.content_length.unwrap_or(0);
        if n > limits.max_body {
            return Err(HttpError::BodyTooLarge);
        }
        Framing::Length(n)
    };
    let (path, query) = split_target(raw.target);
    Ok(Head {
        request: Request {
            method,
            method_token: raw.method_token,
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
        len: raw.len,
        framing,
    })
}

/// Reads a complete head in the plain shape every client sends: an
/// upper-case method, a printable ASCII target, `HTTP/1.1` or `HTTP/1.0`,
/// and at most `max_headers` lines of a token name, `:`, spaces and a
/// printable ASCII value, every line ended by CRLF. Anything else (a partial
/// head, a tab, a bare LF, a byte above 0x7e, a leading empty line...) gives
/// `None`, and httparse reads the head, errors and all.
///
/// What it reads, httparse reads alike (a property test and the
/// `http_request` fuzz target hold it to that); it exists because httparse
/// costs ~230 instructions per header line, and a Java client's beat has 9.
fn plain_head<'a>(buf: &'a [u8], limits: &Limits) -> Option<RawHead<'a>> {
    let method_len = buf.iter().take_while(|b| b.is_ascii_uppercase()).count();
    if method_len == 0 || buf.get(method_len) != Some(&b' ') {
        return None;
    }
    let method = Method::from_token(&buf[..method_len]);
    let method_token = match method {
        Method::Other => std::str::from_utf8(&buf[..method_len]).ok()?,
        known => known.as_str(),
    };
    let target_start = method_len + 1;
    let target_end = printable_run(buf, target_start, 0x21);
    if target_end == target_start || buf.get(target_end) != Some(&b' ') {
        return None;
    }
    let target = std::str::from_utf8(&buf[target_start..target_end]).ok()?;
    let mut at = target_end + 1;
    let version = match buf.get(at..at + 10)? {
        b"HTTP/1.1\r\n" => 1,
        b"HTTP/1.0\r\n" => 0,
        _ => return None,
    };
    at += 10;
    let cap = limits.max_headers.clamp(1, MAX_HEADERS_CAP);
    let mut fields = Ok(Fields::default());
    let mut count = 0;
    while *buf.get(at)? != b'\r' {
        let name_start = at;
        at = letters_and_dashes(buf, at);
        while is_token(*buf.get(at)?) {
            at += 1;
        }
        if at == name_start || buf[at] != b':' {
            return None;
        }
        let name = &buf[name_start..at];
        at += 1;
        while *buf.get(at)? == b' ' {
            at += 1;
        }
        let value_start = at;
        at = printable_run(buf, at, 0x20);
        if buf.get(at..at + 2)? != b"\r\n" {
            return None;
        }
        // httparse drops the spaces before the CRLF.
        let mut value_end = at;
        while value_end > value_start && buf[value_end - 1] == b' ' {
            value_end -= 1;
        }
        at += 2;
        count += 1;
        if count > cap {
            return None;
        }
        if let Ok(f) = &mut fields {
            if let Err(e) = f.add(name, &buf[value_start..value_end]) {
                fields = Err(e);
            }
        }
    }
    if *buf.get(at + 1)? != b'\n' {
        return None;
    }
    Some(RawHead {
        method,
        method_token,
        target,
        version: Some(version),
        len: at + 2,
        fields: fields.and_then(Fields::finish),
    })
}

/// The offset of the first byte from `at` outside `low..=0x7e` (printable
/// ASCII, from `0x21`, or from `0x20` to take spaces), or the end of `buf`.
///
/// Eight bytes at a time: the lowest flag of each test is a true one (the
/// "has a byte less than" test, the high bits, and a zero byte of the word
/// XOR 0x7f), so the lowest of their union is the first byte outside.
fn printable_run(buf: &[u8], mut at: usize, low: u8) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = buf.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("a slice of 8 bytes"));
        let del = x ^ (ONES * 0x7f);
        let flags = (x.wrapping_sub(ONES * u64::from(low)) & !x & HIGHS)
            | (x & HIGHS)
            | (del.wrapping_sub(ONES) & !del & HIGHS);
        if flags != 0 {
            return at + (flags.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&b) = buf.get(at) {
        if b < low || b > 0x7e {
            break;
        }
        at += 1;
    }
    at
}

/// The offset of the first byte from `at` that is not an ASCII letter or
/// `-` (what header names are made of), or the end of `buf`.
///
/// Eight bytes at a time, with per-byte exact tests: on bytes below 0x80,
/// adding `0x80 - n` to each sets its high bit exactly when it is `>= n`,
/// and no byte carries into the next; bytes from 0x80 are flagged apart.
fn letters_and_dashes(buf: &[u8], mut at: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let at_least = |v: u64, n: u8| v.wrapping_add(ONES * u64::from(0x80 - n)) & HIGHS;
    while let Some(chunk) = buf.get(at..at + 8) {
        let x = u64::from_le_bytes(chunk.try_into().expect("a slice of 8 bytes"));
        let low = x & !HIGHS;
        let folded = low | (ONES * 0x20);
        let letter = at_least(folded, b'a') & !at_least(folded, b'z' + 1);
        let dash = !at_least(low ^ (ONES * u64::from(b'-')), 1) & HIGHS;
        let other = (!(letter | dash) & HIGHS) | (x & HIGHS);
        if other != 0 {
            return at + (other.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while buf
        .get(at)
        .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'-')
    {
        at += 1;
    }
    at
}

/// RFC 9110 `tchar`: the bytes of a header name (httparse's table).
fn is_token(b: u8) -> bool {
    const TABLE: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            t[b] = c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                );
            b += 1;
        }
        t
    };
    TABLE[usize::from(b)]
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
    fn plain_heads_skip_httparse_and_others_do_not() {
        let l = Limits::default();
        let java = b"PUT /nacos/v1/ns/instance/beat?ip=1.2.3.4&port=1 HTTP/1.1\r\n\
Client-Version: Nacos-Java-Client:v1.4.6\r\nUser-Agent: Nacos-Java-Client:v1.4.6\r\n\
Accept-Encoding: gzip,deflate,sdch\r\nRequestId: 0b5c\r\nRequest-Module: Naming\r\n\
Content-Type: application/x-www-form-urlencoded;charset=UTF-8\r\nHost: 127.0.0.1:8848\r\n\
Connection: Keep-Alive\r\nContent-Length: 0\r\n\r\n";
        assert!(plain_head(java, &l).is_some());
        assert_eq!(
            parse_request(java, &l),
            parse_request_with_httparse(java, &l)
        );
        for other in [
            &b"\r\nGET / HTTP/1.1\r\n\r\n"[..],
            b"GET / HTTP/1.1\n\n",
            b"GET /\xc3\xa9 HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nA:\tb\r\n\r\n",
            b"GET / HTTP/1.1\r\nA: b\r\n",
            b"get / HTTP/1.1\r\n\r\n",
        ] {
            assert!(plain_head(other, &l).is_none(), "{other:?}");
        }
        // A header error found by the plain reader is the one httparse's
        // headers give.
        let twice = b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(plain_head(twice, &l).is_some());
        assert_eq!(
            parse_request(twice, &l),
            Err(HttpError::Malformed("conflicting Content-Length"))
        );
    }

    /// One of `valid`, or when `mixed` also one of `odd`.
    fn pick(
        valid: &[&'static str],
        odd: &[&'static str],
        mixed: bool,
    ) -> impl proptest::strategy::Strategy<Value = &'static str> {
        let mut items = valid.to_vec();
        if mixed {
            items.extend_from_slice(odd);
        }
        proptest::sample::select(items)
    }

    /// Heads in the plain shape, or (`mixed`) near it: some pieces off by a
    /// byte or two.
    fn near_plain_head(mixed: bool) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let mut chars = vec!['/', 'a', '?', '=', '&', '%', '#', ':', 'Z', '~', '"'];
        if mixed {
            chars.extend(['é', '\u{7f}', '\t', ' ']);
        }
        let target = proptest::collection::vec(proptest::sample::select(chars), 0..20)
            .prop_map(String::from_iter);
        let header = (
            pick(
                &[
                    "Host",
                    "Content-Length",
                    "content-length",
                    "Transfer-Encoding",
                    "Connection",
                    "User-Agent",
                    "Content-Type",
                    "Expect",
                    "X-A",
                ],
                &["X A", "", "B\u{1}"],
                mixed,
            ),
            pick(&[":", ": ", ":  "], &[" :", ":\t"], mixed),
            pick(
                &[
                    "0",
                    "5",
                    "12",
                    "abc",
                    "chunked",
                    "gzip",
                    "keep-alive",
                    "close",
                    "Keep-Alive, x",
                    "100-continue",
                    "application/x-www-form-urlencoded",
                    "v ",
                    "",
                    "a b  ",
                ],
                &["é", "a\tb", " x", "\u{7f}"],
                mixed,
            ),
            pick(&["\r\n"], &["\n", "\r", "\r\n "], mixed),
        );
        (
            pick(
                &["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD"],
                &["get", "G_T", "", "\r\nPUT"],
                mixed,
            ),
            pick(&[" "], &["  ", "\t"], mixed),
            target,
            pick(
                &[" HTTP/1.1\r\n", " HTTP/1.0\r\n"],
                &[" HTTP/1.1\n", " HTTP/2.0\r\n", "HTTP/1.1\r\n"],
                mixed,
            ),
            proptest::collection::vec(header, 0..6),
            pick(&["\r\n"], &["\n", "", "\r"], mixed),
            proptest::option::of(0usize..200),
        )
            .prop_map(|(method, sp, target, version, headers, end, cut)| {
                let mut head = format!("{method}{sp}{target}{version}");
                for (name, sep, value, eol) in headers {
                    head.push_str(&format!("{name}{sep}{value}{eol}"));
                }
                head.push_str(end);
                head.push_str("hello");
                let mut bytes = head.into_bytes();
                if let Some(cut) = cut {
                    bytes.truncate(cut);
                }
                bytes
            })
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// The plain reader never changes a verdict: whatever the head, the
        /// request, its length or the error are httparse's.
        #[test]
        fn plain_reader_agrees_with_httparse(
            wire in proptest::bool::ANY.prop_flat_map(near_plain_head),
            small in proptest::bool::ANY,
        ) {
            let limits = if small {
                Limits { max_url_len: 16, max_head_bytes: 64, max_headers: 2, max_body: 3 }
            } else {
                Limits::default()
            };
            proptest::prop_assert_eq!(
                parse_request(&wire, &limits),
                parse_request_with_httparse(&wire, &limits)
            );
        }
    }

    #[test]
    fn word_scans_agree_with_byte_loops() {
        let letters_or_dash = |b: u8| b.is_ascii_alphabetic() || b == b'-';
        for b in 0..=255u8 {
            for at in 0..12 {
                let mut buf = b"ab-cDeFgHiJk-Zz".to_vec();
                buf[at] = b;
                let expect = buf
                    .iter()
                    .position(|&c| !letters_or_dash(c))
                    .unwrap_or(buf.len());
                assert_eq!(letters_and_dashes(&buf, 0), expect, "{b:#x} at {at}");
                for low in [0x20, 0x21] {
                    let mut buf = b"GET /a?b=c d%20 e".to_vec();
                    buf[at] = b;
                    let expect = buf
                        .iter()
                        .position(|&c| c < low || c > 0x7e)
                        .unwrap_or(buf.len());
                    assert_eq!(printable_run(&buf, 0, low), expect, "{b:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn targets() {
        assert_eq!(split_target("/a?b=1#f"), ("/a", "b=1"));
        assert_eq!(split_target("http://h"), ("/", ""));
        assert_eq!(split_target("http://h?x=1"), ("/", "x=1"));
        assert_eq!(split_target("/a"), ("/a", ""));
    }
}
