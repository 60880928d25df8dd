//! Batched UDP I/O for pushes: `sendmmsg` of one encoded packet to many
//! subscribers and `recvmmsg` of many acks, one syscall per batch.
//!
//! Safe wrappers over `nix`; the notifier drives them from tokio readiness,
//! and the fan-out bench calls them on a plain socket.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

use nix::sys::socket::{recvmmsg, sendmmsg, MsgFlags, MultiHeaders, SockaddrStorage};

/// Datagrams per `sendmmsg` / `recvmmsg` call.
pub const BATCH: usize = 64;
/// Ack datagrams are small; anything longer than this is refused unread.
pub const ACK_BUFFER: usize = 2048;

/// One `sendmmsg` of `packet` to each of `addrs`; returns how many went.
pub fn send_batch(udp: &impl AsRawFd, packet: &[u8], addrs: &[SocketAddr]) -> io::Result<usize> {
    let slices: Vec<[IoSlice<'_>; 1]> = addrs.iter().map(|_| [IoSlice::new(packet)]).collect();
    let names: Vec<Option<SockaddrStorage>> = addrs
        .iter()
        .map(|a| Some(SockaddrStorage::from(*a)))
        .collect();
    let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(addrs.len(), None);
    let sent = sendmmsg(
        udp.as_raw_fd(),
        &mut headers,
        &slices,
        &names,
        [],
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(io::Error::from)?;
    Ok(sent.count())
}

/// Reusable buffers for `recvmmsg`: the notifier keeps one, so reading acks
/// allocates nothing per batch.
pub struct RecvBatch {
    bufs: Box<[[u8; ACK_BUFFER]]>,
    got: Vec<(Option<SocketAddr>, usize, bool)>,
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            bufs: vec![[0u8; ACK_BUFFER]; BATCH].into_boxed_slice(),
            got: Vec::with_capacity(BATCH),
        }
    }
}

impl RecvBatch {
    /// One `recvmmsg` of up to `BATCH` datagrams; returns how many arrived.
    ///
    /// # Errors
    /// `WouldBlock` when nothing is waiting, or the socket's error.
    pub fn recv(&mut self, udp: &impl AsRawFd) -> io::Result<usize> {
        self.got.clear();
        let mut slices: Vec<[IoSliceMut<'_>; 1]> =
            self.bufs.iter_mut().map(|b| [IoSliceMut::new(b)]).collect();
        let mut headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
        let got = recvmmsg(
            udp.as_raw_fd(),
            &mut headers,
            slices.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io::Error::from)?;
        for m in got {
            let truncated = m.flags.contains(MsgFlags::MSG_TRUNC);
            self.got
                .push((m.address.and_then(to_socket_addr), m.bytes, truncated));
        }
        Ok(self.got.len())
    }

    /// The datagrams of the last `recv`, with their senders; one that did
    /// not fit the buffer comes back as `None`.
    pub fn datagrams(&self) -> impl Iterator<Item = (SocketAddr, Option<&[u8]>)> {
        self.got
            .iter()
            .zip(self.bufs.iter())
            .filter_map(|((from, len, truncated), buf)| {
                let from = (*from)?;
                Some((from, (!truncated).then(|| &buf[..*len])))
            })
    }
}

fn to_socket_addr(s: SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(SocketAddr::from((v4.ip(), v4.port())));
    }
    s.as_sockaddr_in6()
        .map(|v6| SocketAddr::from((v6.ip(), v6.port())))
}

/// Sends `packet` to every address in batches, blocking on a blocking
/// socket; returns how many datagrams went. Addresses that fail are skipped.
pub fn send_all(udp: &impl AsRawFd, packet: &[u8], addrs: &[SocketAddr]) -> usize {
    let mut sent = 0;
    let mut rest = addrs;
    while !rest.is_empty() {
        let n = rest.len().min(BATCH);
        match send_batch(udp, packet, &rest[..n]) {
            Ok(k) if k > 0 => {
                sent += k;
                rest = &rest[k..];
            }
            _ => rest = &rest[1..],
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reaches_every_receiver_and_acks_come_back_in_one_call() {
        let receivers: Vec<std::net::UdpSocket> = (0..5)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let addrs: Vec<SocketAddr> = receivers.iter().map(|r| r.local_addr().unwrap()).collect();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(send_all(&sender, b"hello", &addrs), 5);
        let mut buf = [0u8; 16];
        for r in &receivers {
            let (n, from) = r.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"hello");
            r.send_to(b"ack", from).unwrap();
        }
        let mut batch = RecvBatch::default();
        let mut got = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while got < 5 && std::time::Instant::now() < deadline {
            if batch.recv(&sender).is_ok() {
                assert!(batch.datagrams().all(|(_, d)| d == Some(&b"ack"[..])));
                got += batch.datagrams().count();
            }
        }
        assert_eq!(got, 5);
    }

    #[test]
    fn oversized_datagrams_are_flagged_not_read() {
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .send_to(&vec![b'x'; ACK_BUFFER + 10], receiver.local_addr().unwrap())
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut batch = RecvBatch::default();
        assert_eq!(batch.recv(&receiver).unwrap(), 1);
        assert!(batch.datagrams().next().unwrap().1.is_none());
    }
}
