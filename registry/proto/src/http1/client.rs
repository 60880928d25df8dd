//! Client side: writing requests and framing responses, for the load generator.

use std::borrow::Cow;

use super::{
    chunked, map_httparse, version_of, Fields, Framing, HttpError, Limits, Method, Version,
    MAX_HEADERS_CAP,
};

/// The `User-Agent` [`write_request`] sends. A real Nacos only pushes over UDP to known
/// client types and returns grouped names only to Java clients >= 1.0, so the load
/// generator presents itself as the Java client whose protocol it speaks.
pub const CLIENT_USER_AGENT: &str = "Nacos-Java-Client:v1.4.8";

/// Largest response body [`parse_response`] accepts: a full list of a very large
/// service from a real Nacos is tens of MiB.
pub const RESPONSE_MAX_BODY: usize = 256 * 1024 * 1024;

/// Appends a request: request line, `Host`, `User-Agent`, and for a body its
/// `Content-Type` and `Content-Length`. A POST/PUT/PATCH without a body gets
/// `Content-Length: 0` (some servers answer 411 otherwise).
///
/// `path_and_query` must already be percent-encoded (see [`crate::naming::client`]).
pub fn write_request(
    out: &mut Vec<u8>,
    method: Method,
    path_and_query: &str,
    host: &str,
    body: Option<(&str, &[u8])>,
) {
    out.reserve(96 + path_and_query.len() + host.len() + body.map_or(0, |b| b.1.len()));
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\nUser-Agent: ");
    out.extend_from_slice(CLIENT_USER_AGENT.as_bytes());
    out.extend_from_slice(b"\r\n");
    let mut n = itoa::Buffer::new();
    match body {
        Some((content_type, bytes)) => {
            out.extend_from_slice(b"Content-Type: ");
            out.extend_from_slice(content_type.as_bytes());
            out.extend_from_slice(b"\r\nContent-Length: ");
            out.extend_from_slice(n.format(bytes.len()).as_bytes());
            out.extend_from_slice(b"\r\n\r\n");
            out.extend_from_slice(bytes);
        }
        None if method.expects_body() => out.extend_from_slice(b"Content-Length: 0\r\n\r\n"),
        None => out.extend_from_slice(b"\r\n"),
    }
}

/// One parsed response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response<'a> {
    /// The status code.
    pub status: u16,
    /// The protocol version.
    pub version: Version,
    /// Whether the server left the connection open for the next request. False for
    /// `Connection: close`, HTTP/1.0 without keep-alive, and close-delimited bodies.
    pub keep_alive: bool,
    /// `Content-Type`, if present.
    pub content_type: Option<&'a str>,
    /// `Content-Encoding`, if present. The body is returned as sent, not decompressed;
    /// [`write_request`] sends no `Accept-Encoding`, so servers send identity.
    pub content_encoding: Option<&'a str>,
    /// The body: borrowed for `Content-Length` framing (and single-chunk bodies), owned
    /// when several chunks were joined.
    pub body: Cow<'a, [u8]>,
}

impl Response<'_> {
    /// The body as UTF-8 text, if it is.
    pub fn body_text(&self) -> Option<&str> {
        std::str::from_utf8(&self.body).ok()
    }
}

fn client_limits() -> Limits {
    Limits {
        max_url_len: usize::MAX,
        max_head_bytes: 64 * 1024,
        max_headers: MAX_HEADERS_CAP,
        max_body: RESPONSE_MAX_BODY,
    }
}

/// Frames the first response in `buf`, with a 64 KiB head bound and
/// [`RESPONSE_MAX_BODY`]. `Ok(None)`: need more bytes (including a body delimited by
/// connection close: call [`finish_response_at_eof`] once the peer closes).
///
/// Responses to `HEAD` requests cannot be told apart from the bytes; this client never
/// sends `HEAD`. 1xx, 204 and 304 responses have no body.
pub fn parse_response(buf: &[u8]) -> Result<Option<(Response<'_>, usize)>, HttpError> {
    parse_response_with(buf, &client_limits())
}

/// [`parse_response`] with explicit bounds (`max_head_bytes`, `max_headers`, `max_body`).
pub fn parse_response_with<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<Option<(Response<'a>, usize)>, HttpError> {
    let Some((mut response, head_len, framing)) = parse_head(buf, limits)? else {
        return Ok(None);
    };
    let rest = &buf[head_len..];
    match framing {
        Framing::Length(n) => {
            if n > limits.max_body {
                return Err(HttpError::BodyTooLarge);
            }
            if rest.len() < n {
                return Ok(None);
            }
            response.body = Cow::Borrowed(&rest[..n]);
            Ok(Some((response, head_len + n)))
        }
        Framing::Chunked => match chunked::measure(rest, limits.max_body)? {
            None => Ok(None),
            Some(m) => {
                response.body = chunked::assemble(rest, &m);
                Ok(Some((response, head_len + m.consumed)))
            }
        },
        Framing::UntilClose => {
            if rest.len() > limits.max_body {
                return Err(HttpError::BodyTooLarge);
            }
            Ok(None)
        }
    }
}

/// Frames the response in `buf` after the peer closed the connection: a body without
/// `Content-Length` or chunking ends here. A response cut short is an error.
pub fn finish_response_at_eof(buf: &[u8]) -> Result<(Response<'_>, usize), HttpError> {
    let limits = client_limits();
    let truncated = HttpError::Malformed("connection closed before the end of the message");
    let Some((mut response, head_len, framing)) = parse_head(buf, &limits)? else {
        return Err(truncated);
    };
    if framing == Framing::UntilClose {
        let rest = &buf[head_len..];
        if rest.len() > limits.max_body {
            return Err(HttpError::BodyTooLarge);
        }
        response.body = Cow::Borrowed(rest);
        return Ok((response, buf.len()));
    }
    parse_response_with(buf, &limits)?.ok_or(truncated)
}

type Head<'a> = (Response<'a>, usize, Framing);

fn parse_head<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Head<'a>>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    let cap = limits.max_headers.clamp(1, MAX_HEADERS_CAP);
    let mut res = httparse::Response::new(&mut headers[..cap]);
    let len = match res.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            return if buf.len() > limits.max_head_bytes {
                Err(HttpError::HeadTooLarge)
            } else {
                Ok(None)
            };
        }
        Err(e) => return Err(map_httparse(e)),
    };
    if len > limits.max_head_bytes {
        return Err(HttpError::HeadTooLarge);
    }
    let version = version_of(res.version)?;
    let status = res.code.ok_or(HttpError::Malformed("missing status"))?;
    let fields = Fields::collect(res.headers)?;
    let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::Length(0)
    } else if fields.chunked {
        Framing::Chunked
    } else if let Some(n) = fields.content_length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    let response = Response {
        status,
        version,
        keep_alive: framing != Framing::UntilClose && fields.keep_alive(version),
        content_type: fields
            .content_type
            .and_then(|v| std::str::from_utf8(v).ok()),
        content_encoding: fields.content_encoding,
        body: Cow::Borrowed(&[]),
    };
    Ok(Some((response, len, framing)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_requests() {
        let mut out = Vec::new();
        write_request(&mut out, Method::Put, "/b?x=1", "h:1", None);
        assert_eq!(
            out,
            b"PUT /b?x=1 HTTP/1.1\r\nHost: h:1\r\nUser-Agent: Nacos-Java-Client:v1.4.8\r\nContent-Length: 0\r\n\r\n"
        );
        out.clear();
        write_request(&mut out, Method::Get, "/l", "h", None);
        assert!(out.ends_with(b"v1.4.8\r\n\r\n"));
        out.clear();
        write_request(
            &mut out,
            Method::Post,
            "/p",
            "h",
            Some(("text/plain", b"hi")),
        );
        assert!(out.ends_with(b"Content-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi"));
    }

    #[test]
    fn parses_length_and_chunked() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n1\r\na\r\n1\r\nb\r\n0\r\n\r\n";
        let (r1, n1) = parse_response(wire).unwrap().unwrap();
        assert_eq!(
            (r1.status, &*r1.body, r1.keep_alive),
            (200, &b"ok"[..], true)
        );
        let (r2, n2) = parse_response(&wire[n1..]).unwrap().unwrap();
        assert_eq!(&*r2.body, b"ab");
        assert!(!r2.keep_alive);
        assert_eq!(n1 + n2, wire.len());
    }

    #[test]
    fn close_delimited_body_needs_eof() {
        let wire = b"HTTP/1.0 200 OK\r\n\r\nbody";
        assert_eq!(parse_response(wire), Ok(None));
        let (r, n) = finish_response_at_eof(wire).unwrap();
        assert_eq!(
            (&*r.body, n, r.keep_alive),
            (&b"body"[..], wire.len(), false)
        );
        assert!(finish_response_at_eof(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab").is_err());
    }

    #[test]
    fn no_body_statuses() {
        let (r, n) = parse_response(b"HTTP/1.1 204 No Content\r\n\r\nX")
            .unwrap()
            .unwrap();
        assert_eq!((r.status, r.body.len(), n), (204, 0, 27));
    }
}
