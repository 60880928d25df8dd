//! The DNS door's datagrams in batches: one `recvmmsg` reads what has
//! arrived (up to [`UDP_BATCH`]), each is answered, and one `sendmmsg`
//! sends the answers, so a busy door makes two system calls per batch
//! instead of two per query (a query costs a few hundred nanoseconds to
//! answer from the cache, a system call about as much again).
//!
//! Safe wrappers over `nix`, as [`crate::pusher`]'s are; the headers are
//! built per call, since they hold raw pointers that may not cross an
//! `.await` of a task that moves between threads.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};
use registry_proto::dns::Transport;

use super::{Dns, UDP_READ};

/// Datagrams read (and answers sent) per system call.
pub const UDP_BATCH: usize = 32;

/// Reusable buffers for one batch: the queries read and the answers to
/// send, so a batch allocates nothing but its headers.
pub(super) struct Batch {
    queries: Box<[[u8; UDP_READ]]>,
    /// Sender and length of each query read.
    got: Vec<(Option<SocketAddr>, usize)>,
    answers: Vec<Vec<u8>>,
    /// Where each answer goes, in `answers` order.
    peers: Vec<SockaddrStorage>,
}

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            queries: vec![[0u8; UDP_READ]; UDP_BATCH].into_boxed_slice(),
            got: Vec::with_capacity(UDP_BATCH),
            answers: (0..UDP_BATCH).map(|_| Vec::with_capacity(512)).collect(),
            peers: Vec::with_capacity(UDP_BATCH),
        }
    }
}

impl Batch {
    /// Reads what has arrived, up to [`UDP_BATCH`] datagrams; a datagram
    /// longer than [`UDP_READ`] comes cut (and gets FORMERR).
    ///
    /// # Errors
    /// `WouldBlock` when nothing is waiting, or the socket's error.
    pub(super) fn recv(&mut self, socket: &impl AsRawFd) -> io::Result<usize> {
        self.got.clear();
        let mut slices: Vec<[IoSliceMut<'_>; 1]> = self
            .queries
            .iter_mut()
            .map(|b| [IoSliceMut::new(b)])
            .collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(UDP_BATCH, None);
        let got = recvmmsg(
            socket.as_raw_fd(),
            &mut headers,
            slices.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io::Error::from)?;
        for m in got {
            let from = m.address.and_then(to_socket_addr);
            self.got.push((from, m.bytes.min(UDP_READ)));
        }
        Ok(self.got.len())
    }

    /// Answers the queries read; returns how many answers there are to
    /// send (a query that gets none, or has no sender, is dropped).
    pub(super) fn answer(&mut self, dns: &Dns) -> usize {
        self.peers.clear();
        for (i, &(from, len)) in self.got.iter().enumerate() {
            let Some(from) = from else { continue };
            let out = &mut self.answers[self.peers.len()];
            if dns.answer_into(&self.queries[i][..len], Transport::Udp, out) {
                self.peers.push(SockaddrStorage::from(from));
            }
        }
        self.peers.len()
    }

    /// Sends the answers from the `from`th on, in one `sendmmsg`; returns
    /// how many went.
    ///
    /// # Errors
    /// `WouldBlock` when the socket's buffer is full, or the error of the
    /// `from`th send (the caller skips it: its client's retry to make).
    pub(super) fn send(&self, socket: &impl AsRawFd, from: usize) -> io::Result<usize> {
        let n = self.peers.len();
        let slices: Vec<[IoSlice<'_>; 1]> = self.answers[from..n]
            .iter()
            .map(|a| [IoSlice::new(a)])
            .collect();
        let addrs: Vec<Option<SockaddrStorage>> =
            self.peers[from..].iter().copied().map(Some).collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(n - from, None);
        let sent = sendmmsg(
            socket.as_raw_fd(),
            &mut headers,
            &slices,
            &addrs,
            [],
            MsgFlags::MSG_DONTWAIT,
        )
        .map_err(io::Error::from)?;
        Ok(sent.count())
    }
}

fn to_socket_addr(s: SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    s.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}
