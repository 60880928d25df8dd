//! Admission of raw TCP connections on the gRPC port, before any HTTP/2 or Nacos
//! message is read.
//!
//! `--grpc-max-connections` bounds *set-up* connections (those that sent a
//! `ConnectionSetupRequest`), but every accepted socket costs a file descriptor and
//! its HTTP/2 state (~44 KiB) from the moment it is accepted, and a client that
//! never sets up was not bounded at all. [`Incoming`] caps the sockets open at once
//! (`--grpc-max-sockets`): one over the cap is accepted and closed at once (the
//! client sees the connection closed, never a hang) and counted in
//! `registry_grpc_sockets_refused_total`. The cap is checked at accept, so a flood
//! of sockets cannot take the descriptors the set-up clients need.

use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::Stream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use crate::state::App;

/// The accepted sockets of the gRPC port, at most `max` open at once.
pub struct Incoming {
    listener: TcpListener,
    app: Arc<App>,
}

impl Incoming {
    /// Accepts from `listener` under the app's socket cap, counting into its metrics.
    pub fn new(listener: TcpListener, app: Arc<App>) -> Incoming {
        Incoming { listener, app }
    }
}

impl Stream for Incoming {
    type Item = io::Result<Admitted>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            let (stream, _) = match this.listener.poll_accept(cx) {
                Poll::Ready(Ok(accepted)) => accepted,
                // tonic logs and skips accept errors (e.g. out of descriptors).
                Poll::Ready(Err(e)) => return Poll::Ready(Some(Err(e))),
                Poll::Pending => return Poll::Pending,
            };
            let grpc = &this.app.grpc;
            // Only this task increments, so a load then an add cannot overshoot.
            if grpc.sockets.load(Ordering::Acquire) >= grpc.limits.max_sockets {
                grpc.metrics.sockets_refused.inc();
                // Closed at once: no HTTP/2 state is ever built for it.
                drop(stream);
                continue;
            }
            let open = grpc.sockets.fetch_add(1, Ordering::AcqRel) + 1;
            grpc.metrics.sockets.set(open as u64);
            // Pushes and answers are small and latency-bound.
            let _ = stream.set_nodelay(true);
            return Poll::Ready(Some(Ok(Admitted {
                stream,
                _slot: Slot {
                    app: this.app.clone(),
                },
            })));
        }
    }
}

/// Gives the socket's place back when the connection is dropped.
struct Slot {
    app: Arc<App>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let grpc = &self.app.grpc;
        let left = grpc.sockets.fetch_sub(1, Ordering::AcqRel) - 1;
        grpc.metrics.sockets.set(left as u64);
    }
}

/// An admitted socket; it holds its place under the cap until dropped.
pub struct Admitted {
    stream: TcpStream,
    /// Held for its `Drop`.
    _slot: Slot,
}

impl Connected for Admitted {
    // The same info as a bare `TcpStream`, so `Request::remote_addr` still works.
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
