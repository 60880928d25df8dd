//! The DNS door's datagrams in batches: one `recvmmsg` reads what has
//! arrived (up to [`UDP_BATCH`]), each is answered, and one `sendmmsg`
//! sends the answers, so a busy door makes two system calls per batch
//! instead of two per query (a query costs a few hundred nanoseconds to
//! answer from the cache, a system call about as much again).
//!
//! What is left is the kernel's work per datagram (a route lookup, a
//! buffer, a pass through the stack: most of a cached answer's cost). A
//! run of answers to one peer of one size (the last may be shorter), as a
//! busy resolver or forwarder asking many queries gets, goes as one
//! segmented send (UDP GSO, `UDP_SEGMENT`): one pass down the stack, cut
//! into the same datagrams on the way out. Where the kernel or the path
//! refuses it, the socket goes on with `sendmmsg` alone.
//!
//! Safe wrappers over `nix`, as [`crate::pusher`]'s are; the headers are
//! built per call, since they hold raw pointers that may not cross an
//! `.await` of a task that moves between threads.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use nix::sys::socket::{
    recvmmsg, sendmmsg, sendmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};
use registry_proto::dns::Transport;

use super::{Dns, UDP_READ};

/// Datagrams read (and answers sent) per system call.
pub const UDP_BATCH: usize = 32;
/// The most bytes one segmented send carries (a UDP payload's limit).
const GSO_BYTES: usize = 65_507;

/// Reusable buffers for one batch: the queries read and the answers to
/// send, so a batch allocates nothing but its headers.
pub(super) struct Batch {
    queries: Box<[[u8; UDP_READ]]>,
    /// Sender and length of each query read.
    got: Vec<(Option<SocketAddr>, usize)>,
    answers: Vec<Vec<u8>>,
    /// Where each answer goes, in `answers` order.
    peers: Vec<SocketAddr>,
    /// Whether segmented sends still work on this socket.
    gso: bool,
}

impl Default for Batch {
    fn default() -> Batch {
        Batch {
            queries: vec![[0u8; UDP_READ]; UDP_BATCH].into_boxed_slice(),
            got: Vec::with_capacity(UDP_BATCH),
            answers: (0..UDP_BATCH).map(|_| Vec::with_capacity(512)).collect(),
            peers: Vec::with_capacity(UDP_BATCH),
            gso: true,
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
                self.peers.push(from);
            }
        }
        self.peers.len()
    }

    /// Sends answers from the `from`th on, in one system call: a run to
    /// one peer as one segmented send, else the answers up to the next such
    /// run in one `sendmmsg`; returns how many went.
    ///
    /// # Errors
    /// `WouldBlock` when the socket's buffer is full, or the error of the
    /// `from`th send (the caller skips it: its client's retry to make).
    pub(super) fn send(&mut self, socket: &impl AsRawFd, from: usize) -> io::Result<usize> {
        let run = self.run(from);
        if run > 1 {
            match self.send_segmented(socket, from, run) {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                    // Refused (an old kernel, a device without checksum
                    // offload): the same answers go by sendmmsg below.
                    self.gso = false;
                }
                sent => return sent,
            }
        }
        let mut to = from + 1;
        while to < self.peers.len() && self.run(to) == 1 {
            to += 1;
        }
        self.send_each(socket, from, to)
    }

    /// How many answers from the `from`th one segmented send may carry:
    /// to the same peer, each as long as the first but the last.
    fn run(&self, from: usize) -> usize {
        if !self.gso {
            return 1;
        }
        let size = self.answers[from].len();
        let (mut n, mut bytes) = (1, size);
        while let (Some(peer), Some(a)) = (self.peers.get(from + n), self.answers.get(from + n)) {
            if *peer != self.peers[from]
                || a.len() > size
                || a.is_empty()
                || bytes + a.len() > GSO_BYTES
            {
                break;
            }
            n += 1;
            bytes += a.len();
            if a.len() < size {
                break; // a shorter answer can only be the last segment
            }
        }
        n
    }

    fn send_segmented(&self, socket: &impl AsRawFd, from: usize, n: usize) -> io::Result<usize> {
        let slices: Vec<IoSlice<'_>> = self.answers[from..from + n]
            .iter()
            .map(|a| IoSlice::new(a))
            .collect();
        // At most GSO_BYTES, so the size fits.
        let segment = self.answers[from].len() as u16;
        let to = SockaddrStorage::from(self.peers[from]);
        sendmsg(
            socket.as_raw_fd(),
            &slices,
            &[ControlMessage::UdpGsoSegments(&segment)],
            MsgFlags::MSG_DONTWAIT,
            Some(&to),
        )
        .map_err(io::Error::from)?;
        Ok(n)
    }

    fn send_each(&self, socket: &impl AsRawFd, from: usize, to: usize) -> io::Result<usize> {
        let slices: Vec<[IoSlice<'_>; 1]> = self.answers[from..to]
            .iter()
            .map(|a| [IoSlice::new(a)])
            .collect();
        let addrs: Vec<Option<SockaddrStorage>> = self.peers[from..to]
            .iter()
            .map(|&p| Some(SockaddrStorage::from(p)))
            .collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(to - from, None);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers of the sizes given to `peers` (by index), sent as the door
    /// sends them, arrive as separate datagrams with their own bytes.
    fn arrive_whole(sizes: &[(usize, usize)]) {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let clients: Vec<std::net::UdpSocket> = (0..2)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let mut batch = Batch::default();
        for (i, &(peer, size)) in sizes.iter().enumerate() {
            batch.answers[i] = (0..size).map(|b| (b + i) as u8).collect();
            batch.peers.push(clients[peer].local_addr().unwrap());
        }
        let mut sent = 0;
        while sent < sizes.len() {
            sent += batch.send(&server, sent).unwrap();
        }
        let mut buf = [0u8; 4096];
        for (i, &(peer, size)) in sizes.iter().enumerate() {
            clients[peer]
                .set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let n = clients[peer].recv(&mut buf).unwrap();
            assert_eq!(
                &buf[..n],
                &batch.answers[i][..],
                "answer {i} of {size} bytes"
            );
        }
    }

    #[test]
    fn runs_to_one_peer_arrive_as_separate_datagrams() {
        // One run of equal answers and a shorter last; then another peer,
        // a longer answer (a new run), and single answers between peers.
        arrive_whole(&[
            (0, 200),
            (0, 200),
            (0, 200),
            (0, 90),
            (1, 300),
            (0, 120),
            (1, 64),
            (1, 1232),
            (1, 1232),
        ]);
    }

    #[test]
    fn a_run_stops_at_another_peer_a_longer_answer_or_a_short_one() {
        let mut batch = Batch::default();
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        for (i, (peer, size)) in [(a, 10), (a, 10), (a, 5), (a, 5), (b, 5), (a, 6)]
            .into_iter()
            .enumerate()
        {
            batch.answers[i] = vec![0; size];
            batch.peers.push(peer);
        }
        assert_eq!(batch.run(0), 3, "10, 10 and a shorter last");
        assert_eq!(batch.run(3), 1, "then another peer");
        assert_eq!(batch.run(5), 1);
        batch.gso = false;
        assert_eq!(batch.run(0), 1);
    }
}
