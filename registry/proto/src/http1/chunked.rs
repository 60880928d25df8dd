//! `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1), for requests and responses.
//!
//! Decoding is two passes so that an incomplete body costs no copying: [`measure`] walks
//! the chunk headers (hopping over the data, so re-checking a growing buffer costs per
//! chunk, not per byte) and says whether the body is complete; [`assemble`] then joins the
//! data. A body that arrived as one chunk is borrowed, not copied.

use std::borrow::Cow;

use super::HttpError;

/// Longest chunk-size line (with extensions) or trailer section we wait for.
const MAX_LINE: usize = 4096;

/// Where a complete chunked body lies in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Measured {
    /// Decoded body length.
    pub body_len: usize,
    /// Bytes of the buffer the encoded body (including trailers) uses.
    pub consumed: usize,
    /// The data range when the body is a single non-empty chunk.
    single: Option<(usize, usize)>,
}

/// Checks whether `buf` starts with a complete chunked body. `Ok(None)`: need more bytes.
pub(super) fn measure(buf: &[u8], max_body: usize) -> Result<Option<Measured>, HttpError> {
    let mut pos = 0;
    let mut body_len = 0usize;
    let mut chunks = 0usize;
    let mut single = None;
    loop {
        let (line_len, size) = match httparse::parse_chunk_size(&buf[pos..]) {
            Ok(httparse::Status::Complete(v)) => v,
            Ok(httparse::Status::Partial) => {
                return if buf.len() - pos > MAX_LINE {
                    Err(HttpError::Malformed("chunk size line too long"))
                } else {
                    Ok(None)
                };
            }
            Err(_) => return Err(HttpError::Malformed("invalid chunk size")),
        };
        pos += line_len;
        if size == 0 {
            return match trailers_end(&buf[pos..])? {
                None => Ok(None),
                Some(n) => Ok(Some(Measured {
                    body_len,
                    consumed: pos + n,
                    single: if chunks == 1 { single } else { None },
                })),
            };
        }
        let size = usize::try_from(size).map_err(|_| HttpError::BodyTooLarge)?;
        if size > max_body - body_len {
            return Err(HttpError::BodyTooLarge);
        }
        let data_end = pos + size;
        if buf.len() < data_end + 2 {
            return Ok(None);
        }
        if &buf[data_end..data_end + 2] != b"\r\n" {
            return Err(HttpError::Malformed("chunk data not followed by CRLF"));
        }
        single = Some((pos, data_end));
        chunks += 1;
        body_len += size;
        pos = data_end + 2;
    }
}

/// The length of the trailer section including its final empty line, if complete.
fn trailers_end(buf: &[u8]) -> Result<Option<usize>, HttpError> {
    let mut pos = 0;
    loop {
        let Some(nl) = buf[pos..].iter().position(|&b| b == b'\n') else {
            return if buf.len() > MAX_LINE {
                Err(HttpError::Malformed("trailer section too long"))
            } else {
                Ok(None)
            };
        };
        let line = &buf[pos..pos + nl];
        pos += nl + 1;
        if line.is_empty() || line == b"\r" {
            return Ok(Some(pos));
        }
        if pos > MAX_LINE {
            return Err(HttpError::Malformed("trailer section too long"));
        }
    }
}

/// Joins the data of a body [`measure`] found complete.
pub(super) fn assemble<'a>(buf: &'a [u8], m: &Measured) -> Cow<'a, [u8]> {
    if let Some((start, end)) = m.single {
        return Cow::Borrowed(&buf[start..end]);
    }
    let mut body = Vec::with_capacity(m.body_len);
    let mut pos = 0;
    while let Ok(httparse::Status::Complete((line_len, size))) =
        httparse::parse_chunk_size(&buf[pos..])
    {
        pos += line_len;
        if size == 0 {
            break;
        }
        // `measure` already checked these bounds; the cast and slice cannot fail.
        let end = pos + size as usize;
        body.extend_from_slice(&buf[pos..end]);
        pos = end + 2;
    }
    Cow::Owned(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, HttpError> {
        Ok(measure(buf, 1 << 20)?.map(|m| (assemble(buf, &m).into_owned(), m.consumed)))
    }

    #[test]
    fn joins_chunks_and_skips_extensions_and_trailers() {
        let wire = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (body, used) = decode(wire).unwrap().unwrap();
        assert_eq!(body, b"Wikipedia");
        assert_eq!(&wire[used..], b"NEXT");
    }

    #[test]
    fn single_chunk_is_borrowed() {
        let wire = b"3\r\nabc\r\n0\r\n\r\n";
        let m = measure(wire, 100).unwrap().unwrap();
        assert!(matches!(assemble(wire, &m), Cow::Borrowed(b"abc")));
    }

    #[test]
    fn every_prefix_is_incomplete() {
        let wire = b"4\r\nWiki\r\n5\r\npedia\r\n0\r\n\r\n";
        for cut in 0..wire.len() {
            assert_eq!(decode(&wire[..cut]), Ok(None), "cut at {cut}");
        }
        assert!(decode(wire).unwrap().is_some());
    }

    #[test]
    fn rejects_bad_framing_and_oversize() {
        assert!(decode(b"zz\r\n").is_err());
        assert_eq!(
            decode(b"3\r\nabcX\r\n"),
            Err(HttpError::Malformed("chunk data not followed by CRLF"))
        );
        assert_eq!(
            measure(b"10\r\n", 15),
            Err(HttpError::BodyTooLarge),
            "declared chunk over the bound fails before the data arrives"
        );
        assert_eq!(
            measure(b"8\r\n12345678\r\n8\r\n", 15),
            Err(HttpError::BodyTooLarge)
        );
    }
}
