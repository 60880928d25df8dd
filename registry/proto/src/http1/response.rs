//! Server side: writing a response into an output buffer.
//!
//! Called once per request on the hot path, so it formats nothing: the status line,
//! header names and content types are static byte strings and numbers go through
//! `itoa`. Responses carry no `Date` or `Server` header: no Nacos client reads them.

use super::{Connection, ContentType};

/// The interim response a server writes when [`super::needs_continue`] is true.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The reason phrase for a status code (`"OK"` for 200); `"Unknown"` for codes the
/// registry never sends.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

/// Appends a complete response: status line, `Content-Type`, `Content-Length`, the
/// connection header `connection` calls for (pass a `bool` or
/// [`super::Request::connection`]), and `body`.
pub fn write_response(
    out: &mut Vec<u8>,
    status: u16,
    content_type: ContentType,
    body: &[u8],
    connection: impl Into<Connection>,
) {
    out.reserve(128 + body.len());
    write_response_head(out, status, content_type, body.len(), connection);
    out.extend_from_slice(body);
}

/// Appends only the head of a response whose body is `content_length` bytes: for `HEAD`
/// requests (head without body) or a body written separately.
///
/// `status` must be a three-digit code; anything outside `100..=999` is written as 500.
pub fn write_response_head(
    out: &mut Vec<u8>,
    status: u16,
    content_type: ContentType,
    content_length: usize,
    connection: impl Into<Connection>,
) {
    let status = if (100..=999).contains(&status) {
        status
    } else {
        500
    };
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(&[
        b'0' + (status / 100) as u8,
        b'0' + (status / 10 % 10) as u8,
        b'0' + (status % 10) as u8,
        b' ',
    ]);
    out.extend_from_slice(reason_phrase(status).as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_str().as_bytes());
    out.extend_from_slice(b"\r\nContent-Length: ");
    let mut n = itoa::Buffer::new();
    out.extend_from_slice(n.format(content_length).as_bytes());
    out.extend_from_slice(match connection.into() {
        Connection::KeepAlive => &b"\r\n\r\n"[..],
        Connection::KeepAliveHttp10 => b"\r\nConnection: keep-alive\r\n\r\n",
        Connection::Close => b"\r\nConnection: close\r\n\r\n",
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exact_bytes() {
        let mut out = Vec::new();
        write_response(&mut out, 200, ContentType::Text, b"ok", true);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain;charset=UTF-8\r\nContent-Length: 2\r\n\r\nok"
        );
        out.clear();
        write_response(&mut out, 400, ContentType::Text, b"bad", false);
        assert_eq!(
            out,
            b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain;charset=UTF-8\r\nContent-Length: 3\r\nConnection: close\r\n\r\nbad"
        );
        out.clear();
        write_response_head(
            &mut out,
            200,
            ContentType::Json,
            10,
            Connection::KeepAliveHttp10,
        );
        assert!(out.ends_with(b"Content-Length: 10\r\nConnection: keep-alive\r\n\r\n"));
    }

    #[test]
    fn appends_without_clearing() {
        let mut out = b"prev".to_vec();
        write_response(&mut out, 503, ContentType::Json, b"{}", true);
        assert!(out.starts_with(b"prevHTTP/1.1 503 Service Unavailable\r\n"));
        out.clear();
        write_response(&mut out, 42, ContentType::Json, b"", true);
        assert!(out.starts_with(b"HTTP/1.1 500 Internal Server Error\r\n"));
    }
}
