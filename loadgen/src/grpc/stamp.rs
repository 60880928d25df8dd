//! When a 2.x call's request reached the wire: the connection's socket wrapped so
//! that every write is read as HTTP/2 frames on its way to the kernel, and a write
//! that the socket accepted the last byte of a frame ending a stream (`END_STREAM`)
//! with is stamped for that stream id, at the moment the write call began: the
//! moment the generator handed the byte to the kernel, which is the HTTP lanes' send
//! time too (theirs is read just before their write), so the two fleets' send lags
//! end at the same point and a loopback write's own cost (the kernel delivering the
//! bytes to the server's socket inside the call) is the wire's in both.
//!
//! Why: a unary call is started by the lane (a task spawned, `send_data` queued in
//! `h2`), but its bytes are written only when the connection's task next runs, behind
//! every other task of the worker's thread. Near saturation that wait is long, and it
//! is the generator's, not the server's: a send time taken at the spawn would count it
//! as service time. The write that hands the socket a call's last byte is the one
//! moment no ordering of tasks can move, so the lane reads each call's send time here
//! ([`Stamps::take`]) and records spawn → wire apart
//! ([`crate::recorder::Recorder::client_queue`]).
//!
//! [`Scanner`] is the pure part: it keeps its place across writes (a frame header
//! split over two writes, a frame's payload over many, several frames in one write)
//! and skips the 24-byte client preface. [`Stamped`] is the I/O part: reads pass
//! through, and only the bytes a write reports as accepted are scanned. One lane's
//! connection lives on one worker thread (a `LocalSet`), so the table is an
//! `Rc<RefCell<…>>`, written by the connection's task and read by the calls'.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::schedule::{Clock, Nanos};

/// The client connection preface (`PRI * HTTP/2.0…`), written before any frame.
const PREFACE_LEN: usize = 24;
/// An HTTP/2 frame header: 24-bit length, type, flags, 31-bit stream id.
const HEADER_LEN: usize = 9;
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// Reads outgoing HTTP/2 bytes and reports each stream whose last frame they complete.
#[derive(Debug)]
pub struct Scanner {
    /// Preface bytes still to skip.
    preface_left: usize,
    header: [u8; HEADER_LEN],
    /// Bytes of `header` collected so far.
    have: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: usize,
    /// The stream the current frame ends, once its payload is through.
    ending: Option<u32>,
    /// A stream whose `HEADERS` carried `END_STREAM` but not `END_HEADERS`: it ends
    /// with the `CONTINUATION` that does.
    continued: Option<u32>,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    /// A scanner at the start of a client connection (the preface comes first).
    pub fn new() -> Scanner {
        Scanner {
            preface_left: PREFACE_LEN,
            header: [0; HEADER_LEN],
            have: 0,
            payload_left: 0,
            ending: None,
            continued: None,
        }
    }

    /// Reads `bytes`, the next ones written, and calls `ended(stream)` for every
    /// stream whose final frame's last byte is among them, in order.
    pub fn scan(&mut self, mut bytes: &[u8], mut ended: impl FnMut(u32)) {
        while !bytes.is_empty() {
            if self.preface_left > 0 {
                let n = self.preface_left.min(bytes.len());
                self.preface_left -= n;
                bytes = &bytes[n..];
            } else if self.payload_left > 0 {
                let n = self.payload_left.min(bytes.len());
                self.payload_left -= n;
                bytes = &bytes[n..];
                if self.payload_left == 0 {
                    self.ending.take().into_iter().for_each(&mut ended);
                }
            } else {
                let n = (HEADER_LEN - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == HEADER_LEN {
                    self.have = 0;
                    self.frame_header(&mut ended);
                }
            }
        }
    }

    /// A whole frame header has been read: what its frame ends, and how long it is.
    fn frame_header(&mut self, ended: &mut impl FnMut(u32)) {
        let h = &self.header;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
        self.ending = match kind {
            DATA if flags & END_STREAM != 0 => Some(stream),
            HEADERS if flags & END_STREAM != 0 && flags & END_HEADERS == 0 => {
                self.continued = Some(stream);
                None
            }
            HEADERS if flags & END_STREAM != 0 => Some(stream),
            CONTINUATION if flags & END_HEADERS != 0 && self.continued == Some(stream) => {
                self.continued.take()
            }
            _ => None,
        };
        self.payload_left = len;
        if len == 0 {
            self.ending.take().into_iter().for_each(ended);
        }
    }
}

/// Per stream id, when its request's last byte was accepted by the socket.
#[derive(Debug, Default)]
pub struct Stamps(HashMap<u32, Nanos>);

impl Stamps {
    /// Takes stream `id`'s stamp: `None` if its last byte has not been written.
    pub fn take(&mut self, id: u32) -> Option<Nanos> {
        self.0.remove(&id)
    }

    /// Whether no stamp waits to be taken.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Forgets every stamp (the opening's calls, which nobody takes).
    pub fn clear(&mut self) {
        self.0.clear();
    }
}

/// A unit test's switch: while set on a thread, no socket on it stamps, so a test can
/// show that a call without a stamp is told apart (counted as a fallback).
#[cfg(test)]
pub(crate) mod off {
    thread_local! {
        /// Stamping is off on this thread.
        pub(crate) static OFF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
}

/// A socket whose writes stamp the streams they end into a shared [`Stamps`].
pub struct Stamped<T> {
    io: T,
    scanner: Scanner,
    stamps: Rc<RefCell<Stamps>>,
    clock: Clock,
}

impl<T> Stamped<T> {
    /// Wraps `io`, a client connection not yet written to; stamps go to `stamps`,
    /// read from `clock`.
    pub fn new(io: T, stamps: Rc<RefCell<Stamps>>, clock: Clock) -> Stamped<T> {
        Stamped {
            io,
            scanner: Scanner::new(),
            stamps,
            clock,
        }
    }

    /// The socket accepted `bufs`' first `n` bytes in a write begun at `at`.
    fn accepted<'a>(&mut self, bufs: impl IntoIterator<Item = &'a [u8]>, mut n: usize, at: Nanos) {
        #[cfg(test)]
        if off::OFF.with(std::cell::Cell::get) {
            return;
        }
        for b in bufs {
            if n == 0 {
                break;
            }
            let part = &b[..n.min(b.len())];
            n -= part.len();
            let stamps = &self.stamps;
            self.scanner.scan(part, |s| {
                stamps.borrow_mut().0.insert(s, at);
            });
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Stamped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Stamped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // One clock read per write call (not per stream: all it ends left together).
        let at = self.clock.now();
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            self.accepted([buf], n, at);
        }
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let at = self.clock.now();
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            self.accepted(bufs.iter().map(|b| &b[..]), n, at);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt as _;

    fn frame(kind: u8, flags: u8, stream: u32, len: usize) -> Vec<u8> {
        let l = (len as u32).to_be_bytes();
        let mut f = vec![l[1], l[2], l[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.resize(HEADER_LEN + len, 0xab);
        f
    }

    /// A client's first bytes and one call on stream 1: preface, SETTINGS, HEADERS
    /// (not ending), DATA with END_STREAM.
    fn one_call() -> Vec<u8> {
        let mut b = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        assert_eq!(b.len(), PREFACE_LEN);
        b.extend(frame(0x4, 0, 0, 12));
        b.extend(frame(HEADERS, END_HEADERS, 1, 30));
        b.extend(frame(DATA, END_STREAM, 1, 40));
        b
    }

    /// The index of each byte after which `scan` reported a stream, fed byte by byte.
    fn ends_byte_by_byte(bytes: &[u8]) -> Vec<(usize, u32)> {
        let mut s = Scanner::new();
        let mut out = Vec::new();
        for (i, b) in bytes.iter().enumerate() {
            s.scan(std::slice::from_ref(b), |id| out.push((i, id)));
        }
        out
    }

    #[test]
    fn a_stream_ends_at_the_last_byte_of_its_end_stream_frame_and_the_preface_is_skipped() {
        let bytes = one_call();
        assert_eq!(ends_byte_by_byte(&bytes), vec![(bytes.len() - 1, 1)]);
        // A preface that looked like frames would have been read as a 0x2a-type
        // frame of 5 MB ("PRI"): the call would never have been seen ending.
    }

    #[test]
    fn every_split_into_two_writes_reports_the_end_once_in_the_write_that_completes_it() {
        let bytes = one_call();
        for cut in 0..=bytes.len() {
            let mut s = Scanner::new();
            let (mut first, mut second) = (Vec::new(), Vec::new());
            s.scan(&bytes[..cut], |id| first.push(id));
            s.scan(&bytes[cut..], |id| second.push(id));
            if cut == bytes.len() {
                assert_eq!((first, second), (vec![1], vec![]), "cut {cut}");
            } else {
                assert_eq!((first, second), (vec![], vec![1]), "cut {cut}");
            }
        }
    }

    #[test]
    fn several_frames_in_one_write_end_their_streams_in_order() {
        let mut bytes = one_call();
        bytes.extend(frame(HEADERS, END_HEADERS, 3, 20));
        bytes.extend(frame(DATA, 0, 3, 100)); // not the end of 3 yet
        bytes.extend(frame(HEADERS, END_HEADERS, 5, 20));
        bytes.extend(frame(DATA, END_STREAM, 5, 7));
        bytes.extend(frame(DATA, END_STREAM, 3, 9));
        let mut ended = Vec::new();
        Scanner::new().scan(&bytes, |id| ended.push(id));
        assert_eq!(ended, vec![1, 5, 3]);
    }

    #[test]
    fn empty_frames_headers_only_requests_and_continuations_end_where_their_last_byte_is() {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(DATA, END_STREAM, 7, 0));
        let empty_end = bytes.len() - 1;
        bytes.extend(frame(HEADERS, END_STREAM | END_HEADERS, 9, 15));
        let headers_end = bytes.len() - 1;
        bytes.extend(frame(HEADERS, END_STREAM, 11, 15)); // headers continue
        bytes.extend(frame(CONTINUATION, 0, 11, 4));
        bytes.extend(frame(CONTINUATION, END_HEADERS, 11, 4));
        let continued_end = bytes.len() - 1;
        bytes.extend(frame(0x3, 0, 13, 4)); // RST_STREAM: not a request's end
        assert_eq!(
            ends_byte_by_byte(&bytes),
            vec![(empty_end, 7), (headers_end, 9), (continued_end, 11)]
        );
    }

    /// An in-memory socket that accepts at most `max` bytes per write.
    struct Short {
        out: Vec<u8>,
        max: usize,
    }

    impl AsyncWrite for Short {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.max);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.max - n);
                self.out.extend_from_slice(&b[..take]);
                n += take;
            }
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn a_stream_is_stamped_only_once_the_socket_accepted_its_last_byte() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let stamps = Rc::new(RefCell::new(Stamps::default()));
            let io = Short {
                out: Vec::new(),
                max: 7,
            };
            let mut s = Stamped::new(io, stamps.clone(), Clock::start());
            let bytes = one_call();
            let (most, last) = bytes.split_at(bytes.len() - 1);
            // Offered in one piece, accepted 7 bytes at a time.
            s.write_all(most).await.unwrap();
            assert_eq!(stamps.borrow_mut().take(1), None, "a byte short");
            // A vectored write whose second slice is not accepted is not scanned.
            let more = frame(DATA, END_STREAM, 3, 0);
            let n = s
                .write_vectored(&[IoSlice::new(last), IoSlice::new(&more)])
                .await
                .unwrap();
            assert_eq!(n, 1 + more.len().min(6));
            assert!(stamps.borrow_mut().take(1).is_some(), "its last byte went");
            assert_eq!(stamps.borrow_mut().take(1), None, "taken once");
            assert_eq!(stamps.borrow_mut().take(3), None, "3's header is cut");
            s.write_all(&more[6..]).await.unwrap();
            assert!(stamps.borrow_mut().take(3).is_some());
            assert_eq!(
                s.io.out.len(),
                bytes.len() + more.len(),
                "all passed through"
            );
        });
    }
}
