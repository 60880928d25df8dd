//! HTTP/1.1 message framing in both directions, with no sockets.
//!
//! The server side ([`parse_request`], [`write_response`]) is built for pipelined
//! keep-alive connections: a parse borrows everything from the caller's read buffer and
//! reports how many bytes the message used, so the caller parses the next request from
//! the rest without copying. Headers are parsed by `httparse`; only the handful the
//! registry needs are kept. The client side ([`write_request`], [`parse_response`]) is
//! what the load generator speaks to our server or to a real Nacos behind Tomcat, which
//! answers large lists with `Transfer-Encoding: chunked`.
//!
//! Chunked *request* bodies are supported (reassembled into an owned buffer, bounded by
//! [`Limits::max_body`]); any other transfer coding is answered 501.

mod chunked;
mod client;
mod request;
mod response;

pub use client::{
    finish_response_at_eof, parse_response, parse_response_with, write_request, Response,
    CLIENT_USER_AGENT, RESPONSE_MAX_BODY,
};
pub use request::{needs_continue, parse_request, parse_request_with_httparse, Request};
pub use response::{reason_phrase, write_response, write_response_head, CONTINUE};

/// Most header lines a request may carry, whatever [`Limits::max_headers`] says: the
/// parser keeps their slices in a fixed stack array of this size.
pub const MAX_HEADERS_CAP: usize = 64;

/// The request method. `Other` stands for any method the registry has no route for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `PATCH`
    Patch,
    /// `HEAD`
    Head,
    /// Any other method token (`OPTIONS`, `TRACE`, ...).
    Other,
}

impl Method {
    /// Recognises a method token (case-sensitive, as RFC 9110 requires).
    pub fn from_token(token: &[u8]) -> Method {
        match token {
            b"GET" => Method::Get,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"PATCH" => Method::Patch,
            b"HEAD" => Method::Head,
            _ => Method::Other,
        }
    }

    /// The method token. `Other` has no token of its own and reads `OTHER`; it is never
    /// sent by [`write_request`] callers in this workspace.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Head => "HEAD",
            Method::Other => "OTHER",
        }
    }

    /// Whether a request with this method conventionally has a body, so a request
    /// writer sends `Content-Length: 0` when it has none.
    pub fn expects_body(self) -> bool {
        matches!(self, Method::Post | Method::Put | Method::Patch)
    }
}

/// The protocol version of a parsed message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// `HTTP/1.0`: connections close after each message unless `keep-alive` is asked for.
    Http10,
    /// `HTTP/1.1`: connections stay open unless `close` is asked for.
    Http11,
}

/// Size bounds for a parsed request. `Default` gives the values documented per field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request target (path and query), in bytes; longer gives 414. Default
    /// 8 KiB, Tomcat's default header budget, so a URL a real Nacos accepts is accepted.
    pub max_url_len: usize,
    /// Longest request head (request line plus headers), in bytes; longer gives 431.
    /// Default 16 KiB, so that a maximal URL still leaves room for headers.
    pub max_head_bytes: usize,
    /// Most header lines; more gives 431. Capped at [`MAX_HEADERS_CAP`]. Default 64.
    pub max_headers: usize,
    /// Largest body, in bytes (decoded size for chunked bodies); larger gives 413.
    /// Default 1 MiB.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_url_len: 8 * 1024,
            max_head_bytes: 16 * 1024,
            max_headers: MAX_HEADERS_CAP,
            max_body: 1024 * 1024,
        }
    }
}

/// Why a message could not be framed. Each variant maps to the status a server answers
/// before closing the connection ([`HttpError::status`]); `Display` is the plain-text
/// reason for the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The request target is longer than [`Limits::max_url_len`]. Fix: move parameters
    /// into a form body.
    #[error("request URI too long")]
    UriTooLong,
    /// The head is larger than [`Limits::max_head_bytes`]. Fix: send fewer or shorter
    /// headers.
    #[error("request header fields too large")]
    HeadTooLarge,
    /// More header lines than [`Limits::max_headers`].
    #[error("too many header fields")]
    TooManyHeaders,
    /// The body is larger than [`Limits::max_body`] (declared or, for chunked, decoded).
    #[error("payload too large")]
    BodyTooLarge,
    /// A syntax error; the text names the part that is wrong.
    #[error("malformed HTTP message: {0}")]
    Malformed(&'static str),
    /// Not HTTP/1.0 or HTTP/1.1 (e.g. an HTTP/2 preface).
    #[error("HTTP version not supported")]
    Version,
    /// A `Transfer-Encoding` other than exactly `chunked`.
    #[error("transfer-encoding not implemented, only chunked is supported")]
    TransferEncoding,
}

impl HttpError {
    /// The status a server answers with.
    pub fn status(self) -> u16 {
        match self {
            HttpError::UriTooLong => 414,
            HttpError::HeadTooLarge | HttpError::TooManyHeaders => 431,
            HttpError::BodyTooLarge => 413,
            HttpError::Malformed(_) => 400,
            HttpError::Version => 505,
            HttpError::TransferEncoding => 501,
        }
    }
}

/// The `Content-Type` of a response written by [`write_response`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// `application/json;charset=UTF-8`, for JSON bodies (Spring's `@ResponseBody` type).
    Json,
    /// `text/plain;charset=UTF-8`, for `ok` and error texts.
    Text,
    /// `text/plain; version=0.0.4; charset=utf-8`, the Prometheus text exposition format.
    Prometheus,
}

impl ContentType {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Json => "application/json;charset=UTF-8",
            ContentType::Text => "text/plain;charset=UTF-8",
            ContentType::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// What a response says about the connection. `bool` converts: `true` is
/// [`Connection::KeepAlive`], `false` is [`Connection::Close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connection {
    /// Keep the connection open, HTTP/1.1 style: no header (it is the default).
    KeepAlive,
    /// Keep the connection open for an HTTP/1.0 client that asked for it: the client
    /// closes unless the response says `Connection: keep-alive`.
    KeepAliveHttp10,
    /// Close after this response: `Connection: close`.
    Close,
}

impl From<bool> for Connection {
    fn from(keep_alive: bool) -> Self {
        if keep_alive {
            Connection::KeepAlive
        } else {
            Connection::Close
        }
    }
}

/// Removes optional whitespace around a header value.
fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &v[start..end]
}

/// Parses a `Content-Length` value: decimal digits only.
fn parse_content_length(v: &[u8]) -> Result<usize, HttpError> {
    let v = trim_ows(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::Malformed("invalid Content-Length"));
    }
    let mut n: usize = 0;
    for &d in v {
        n = n
            .checked_mul(10)
            .and_then(|n| n.checked_add(usize::from(d - b'0')))
            .ok_or(HttpError::Malformed("invalid Content-Length"))?;
    }
    Ok(n)
}

/// Whether a comma-separated header value contains `token` (case-insensitive).
fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',')
        .any(|t| trim_ows(t).eq_ignore_ascii_case(token.as_bytes()))
}

/// The message-body framing a head announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `Content-Length: n` (absent on a request means 0).
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Response only: the body runs until the connection closes.
    UntilClose,
}

/// The headers both directions care about, collected in one pass.
#[derive(Debug, Default)]
struct Fields<'a> {
    content_length: Option<usize>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    /// Trimmed, not yet checked as UTF-8 (see [`Request::content_type`]).
    content_type: Option<&'a [u8]>,
    content_encoding: Option<&'a str>,
    /// Trimmed, not yet checked as UTF-8.
    user_agent: Option<&'a [u8]>,
    /// Trimmed, not yet checked as UTF-8.
    host: Option<&'a [u8]>,
    expect_continue: bool,
}

impl<'a> Fields<'a> {
    fn collect(headers: &[httparse::Header<'a>]) -> Result<Self, HttpError> {
        let mut f = Fields::default();
        for h in headers {
            f.add(h.name.as_bytes(), h.value)?;
        }
        f.finish()
    }

    /// Takes one header line into account; the first error is final.
    #[inline]
    fn add(&mut self, name: &[u8], value: &'a [u8]) -> Result<(), HttpError> {
        let f = self;
        // Dispatch on length first: most headers are rejected by one comparison.
        match name.len() {
            4 if name_is(name, b"host") => f.host = Some(trim_ows(value)),
            6 if name_is(name, b"expect") => {
                f.expect_continue = trim_ows(value).eq_ignore_ascii_case(b"100-continue");
            }
            10 if name_is(name, b"connection") => {
                // One token, as clients send it, is known without the
                // general split (two passes over the list).
                let v = trim_ows(value);
                if v.eq_ignore_ascii_case(b"keep-alive") {
                    f.keep_alive = true;
                } else if v.eq_ignore_ascii_case(b"close") {
                    f.close = true;
                } else {
                    f.close |= has_token(value, "close");
                    f.keep_alive |= has_token(value, "keep-alive");
                }
            }
            10 if name_is(name, b"user-agent") => {
                f.user_agent = Some(trim_ows(value));
            }
            12 if name_is(name, b"content-type") => {
                f.content_type = Some(trim_ows(value));
            }
            14 if name_is(name, b"content-length") => {
                let n = parse_content_length(value)?;
                if f.content_length.is_some_and(|m| m != n) {
                    return Err(HttpError::Malformed("conflicting Content-Length"));
                }
                f.content_length = Some(n);
            }
            16 if name_is(name, b"content-encoding") => {
                f.content_encoding = text(value);
            }
            17 if name_is(name, b"transfer-encoding") => {
                if !trim_ows(value).eq_ignore_ascii_case(b"chunked") {
                    return Err(HttpError::TransferEncoding);
                }
                if f.chunked {
                    return Err(HttpError::Malformed("chunked applied twice"));
                }
                f.chunked = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// The checks that need every header.
    fn finish(self) -> Result<Self, HttpError> {
        if self.chunked && self.content_length.is_some() {
            // A message with both is a request-smuggling vector (RFC 9112 §6.3).
            return Err(HttpError::Malformed(
                "both Content-Length and Transfer-Encoding",
            ));
        }
        Ok(self)
    }

    fn keep_alive(&self, version: Version) -> bool {
        match version {
            Version::Http11 => !self.close,
            Version::Http10 => self.keep_alive && !self.close,
        }
    }
}

/// Whether the header name `name` (token bytes, as both parsers give them)
/// is `lower` (lower-case letters and `-`) in any case. ORing 0x20 into a
/// token byte gives a lower-case letter only from that letter, and `-` only
/// from `-`: so a word at a time, not a byte-wise case-folding compare
/// (~50 instructions per header line of a beat).
#[inline(always)]
fn name_is(name: &[u8], lower: &[u8]) -> bool {
    let n = lower.len();
    if name.len() != n {
        return false;
    }
    let word = |b: &[u8], at: usize| {
        u64::from_le_bytes(b[at..at + 8].try_into().expect("a slice of 8 bytes"))
    };
    let half = |b: &[u8], at: usize| {
        u32::from_le_bytes(b[at..at + 4].try_into().expect("a slice of 4 bytes"))
    };
    if n >= 8 {
        let mut at = 0;
        while at + 8 < n {
            if word(name, at) | 0x2020_2020_2020_2020 != word(lower, at) {
                return false;
            }
            at += 8;
        }
        word(name, n - 8) | 0x2020_2020_2020_2020 == word(lower, n - 8)
    } else if n >= 4 {
        half(name, 0) | 0x2020_2020 == half(lower, 0)
            && half(name, n - 4) | 0x2020_2020 == half(lower, n - 4)
    } else {
        name.iter().zip(lower).all(|(&a, &b)| a | 0x20 == b)
    }
}

/// A header value as text, trimmed; `None` when it is not UTF-8.
fn text(v: &[u8]) -> Option<&str> {
    std::str::from_utf8(trim_ows(v)).ok()
}

fn version_of(v: Option<u8>) -> Result<Version, HttpError> {
    match v {
        Some(0) => Ok(Version::Http10),
        Some(1) => Ok(Version::Http11),
        _ => Err(HttpError::Version),
    }
}

fn map_httparse(e: httparse::Error) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::Version => HttpError::Version,
        httparse::Error::Token => HttpError::Malformed("invalid token"),
        httparse::Error::NewLine => HttpError::Malformed("invalid line ending"),
        httparse::Error::Status => HttpError::Malformed("invalid status"),
        httparse::Error::HeaderName => HttpError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => HttpError::Malformed("invalid header value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_is_strict() {
        assert_eq!(parse_content_length(b" 42 "), Ok(42));
        for bad in [
            &b""[..],
            b"-1",
            b"+1",
            b"1,1",
            b"0x10",
            b"99999999999999999999",
        ] {
            assert!(parse_content_length(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn statuses() {
        assert_eq!(HttpError::UriTooLong.status(), 414);
        assert_eq!(HttpError::HeadTooLarge.status(), 431);
        assert_eq!(HttpError::TooManyHeaders.status(), 431);
        assert_eq!(HttpError::BodyTooLarge.status(), 413);
        assert_eq!(HttpError::Malformed("x").status(), 400);
        assert_eq!(HttpError::TransferEncoding.status(), 501);
        assert_eq!(HttpError::Version.status(), 505);
    }

    #[test]
    fn header_names_match_in_any_case() {
        // Every token byte against every byte of the names looked for, at
        // the start, middle and end of names of each length class.
        let tokens: Vec<u8> = (0..=255u8)
            .filter(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            .collect();
        for lower in [
            &b"ab"[..],
            b"host",
            b"expect",
            b"connection",
            b"transfer-encoding",
        ] {
            for at in [0, lower.len() / 2, lower.len() - 1] {
                for &t in &tokens {
                    let mut name = lower.to_vec();
                    name[at] = t;
                    assert_eq!(
                        name_is(&name, lower),
                        name.eq_ignore_ascii_case(lower),
                        "{:?} vs {:?}",
                        String::from_utf8_lossy(&name),
                        String::from_utf8_lossy(lower)
                    );
                }
            }
        }
        assert!(name_is(b"Content-Length", b"content-length"));
        assert!(!name_is(b"Content-Lengt", b"content-length"));
    }

    #[test]
    fn tokens() {
        assert!(has_token(b"Keep-Alive, Upgrade", "keep-alive"));
        assert!(!has_token(b"keep-alive-ish", "keep-alive"));
    }
}
