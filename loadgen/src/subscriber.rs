//! Push subscribers: real UDP sockets that receive Nacos 1.x pushes and ack them.
//!
//! A subscriber is one UDP socket bound to a loopback source address, subscribed to
//! one service by polling `instance/list` with `udpPort` (and `clientIP`, which a real
//! Nacos 1.x pushes to) through a connection bound to the same address, since our
//! registry pushes to the HTTP peer's address. Its re-polls are on the worker's
//! timing wheel; only its socket's readiness needs a task ([`receive`]), which owns no
//! buffer of its own (the worker lends one) so an idle subscriber costs a socket, a
//! small task and a 40-byte [`crate::fleet::Subscriber`].
//!
//! Each datagram is decoded ([`read_push`]: gzip-aware, per the protocol), acked from
//! the same socket to the sender (`push-ack`, `dump-ack` or `unknown-ack` echoing
//! `lastRefTime`), and its host list is reduced to a [`HostList`]: the grouped name and
//! the fingerprint the worker compares against the expected set and the change log.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;

use registry_proto::naming::list::ServiceInfo;
use registry_proto::udp::ack::{encode_ack_of, AckKind};
use registry_proto::udp::push::{decode_push, PushError, PushKind};
use tokio::net::UdpSocket;

use crate::fleet::{Endpoint, SetHash};

/// A host list reduced to what convergence and latency need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostList {
    /// The grouped service name it is for.
    pub name: String,
    /// Its endpoints, sorted (for membership tests against the change log).
    pub endpoints: Vec<Endpoint>,
    /// Their fingerprint.
    pub hash: SetHash,
}

impl HostList {
    /// From a list response or push data. Hosts whose IP is not IPv4 text are counted
    /// in the fingerprint by a placeholder so that they still cause a mismatch.
    pub fn from_info(info: &ServiceInfo) -> HostList {
        let endpoints: Vec<Endpoint> = info
            .hosts
            .iter()
            .map(|h| Endpoint::parse(&h.ip, h.port).unwrap_or(Endpoint(u64::MAX)))
            .collect();
        HostList::new(info.grouped_name(), endpoints)
    }

    /// The list of the service grouped as `name` holding `endpoints` (any order).
    pub fn new(name: String, mut endpoints: Vec<Endpoint>) -> HostList {
        endpoints.sort_unstable();
        HostList {
            name,
            hash: SetHash::of(endpoints.iter().copied()),
            endpoints,
        }
    }

    /// Whether `e` is in the list.
    pub fn contains(&self, e: Endpoint) -> bool {
        self.endpoints.binary_search(&e).is_ok()
    }
}

/// A decoded datagram: what to ack, and the host list if it carried one.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// The ack to send.
    pub ack: AckKind,
    /// `lastRefTime` to echo.
    pub last_ref_time: u64,
    /// The host list of a `dom`/`service` push.
    pub list: Option<HostList>,
}

/// Why a datagram was not a usable push.
#[derive(Debug, thiserror::Error)]
pub enum ReceiveError {
    /// Not a push packet (bad gzip, bad JSON, missing fields).
    #[error(transparent)]
    Packet(#[from] PushError),
    /// A push whose `data` is not a service info.
    #[error("push data is not a service info: {0}")]
    Data(#[from] serde_json::Error),
}

/// Decodes a push datagram (inflating gzip) and reads its host list.
pub fn read_push(datagram: &[u8]) -> Result<Received, ReceiveError> {
    let packet = decode_push(datagram)?;
    let (ack, list) = match packet.kind {
        PushKind::Dom | PushKind::Service => (
            AckKind::PushAck,
            Some(HostList::from_info(&packet.service_info()?)),
        ),
        PushKind::Dump => (AckKind::DumpAck, None),
        PushKind::Other => (AckKind::UnknownAck, None),
    };
    Ok(Received {
        ack,
        last_ref_time: packet.last_ref_time,
        list,
    })
}

/// Appends the ack for `r` to `out`, as the Java client words it (empty `data`).
pub fn encode_ack(r: &Received, out: &mut Vec<u8>) {
    encode_ack_of(r.ack, r.last_ref_time, out);
}

/// A UDP socket on `ip`, any port, registered with the current runtime.
pub fn bind(ip: IpAddr) -> io::Result<UdpSocket> {
    let socket = std::net::UdpSocket::bind(SocketAddr::new(ip, 0))?;
    socket.set_nonblocking(true)?;
    UdpSocket::from_std(socket)
}

/// What a subscriber's receive task needs from its worker.
pub trait Inbox {
    /// Receives and handles one datagram for subscriber `index` of `generation` from
    /// `socket` (acking it). `Ok(false)`: the subscriber was replaced, stop.
    /// `Err(WouldBlock)`: nothing more to read.
    fn receive(&self, index: u32, generation: u32, socket: &UdpSocket) -> io::Result<bool>;
    /// Whether the worker's driver is due to run (see [`crate::schedule::DriverDue`]):
    /// the receiver then yields the thread before its next datagram.
    fn driver_due(&self) -> bool;
}

/// Receives pushes on one subscriber's socket until it is replaced or aborted.
pub async fn receive<I: Inbox>(inbox: Rc<I>, socket: UdpSocket, index: u32, generation: u32) {
    loop {
        if socket.readable().await.is_err() {
            return;
        }
        loop {
            match inbox.receive(index, generation, &socket) {
                Ok(true) => {
                    if inbox.driver_due() {
                        tokio::task::yield_now().await;
                    }
                }
                Ok(false) => return,
                // WouldBlock clears the readiness; anything else (an ICMP error
                // reported on the socket) is not fatal for a receiver either.
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_proto::udp::push::encode_push;

    #[test]
    fn reads_plain_and_gzip_pushes_and_acks_them() {
        let mut hosts = String::new();
        for i in 0..40 {
            if i > 0 {
                hosts.push(',');
            }
            hosts.push_str(&format!(
                r#"{{"ip":"10.0.0.{i}","port":8080,"healthy":true}}"#
            ));
        }
        for n in [1usize, 40] {
            let hs: Vec<&str> = hosts.split("},").take(n).collect();
            let mut list = hs.join("},");
            if !list.ends_with('}') {
                list.push('}');
            }
            let data = format!(r#"{{"name":"DEFAULT_GROUP@@s","clusters":"","hosts":[{list}]}}"#);
            let mut dgram = Vec::new();
            let enc = encode_push(data.as_bytes(), 42, &mut dgram);
            let r = read_push(&dgram).unwrap();
            assert_eq!((r.ack, r.last_ref_time), (AckKind::PushAck, 42));
            let l = r.list.unwrap();
            assert_eq!(l.name, "DEFAULT_GROUP@@s");
            assert_eq!(l.endpoints.len(), n, "{enc:?}");
            assert!(l.contains(Endpoint::parse("10.0.0.0", 8080).unwrap()));
            let mut ack = Vec::new();
            encode_ack(
                &Received {
                    ack: AckKind::PushAck,
                    last_ref_time: 42,
                    list: None,
                },
                &mut ack,
            );
            let parsed = registry_proto::udp::ack::parse_ack(&ack).unwrap();
            assert_eq!(parsed.last_ref_time, 42);
        }
    }

    #[test]
    fn other_kinds_and_garbage() {
        let r = read_push(br#"{"type":"dump","data":"","lastRefTime":7}"#).unwrap();
        assert_eq!((r.ack, r.list), (AckKind::DumpAck, None));
        let r = read_push(br#"{"type":"weird","data":"","lastRefTime":7}"#).unwrap();
        assert_eq!(r.ack, AckKind::UnknownAck);
        assert!(read_push(b"\x1f\x8bnot gzip").is_err());
        assert!(read_push(br#"{"type":"dom","data":"[1]","lastRefTime":1}"#).is_err());
    }

    #[test]
    fn fingerprints_match_the_expected_set() {
        let info = ServiceInfo::parse(
            br#"{"name":"s","groupName":"G","hosts":[{"ip":"10.0.0.2","port":1},{"ip":"10.0.0.1","port":1}]}"#,
        )
        .unwrap();
        let l = HostList::from_info(&info);
        assert_eq!(l.name, "G@@s");
        let want = SetHash::of([
            Endpoint::parse("10.0.0.1", 1).unwrap(),
            Endpoint::parse("10.0.0.2", 1).unwrap(),
        ]);
        assert_eq!(l.hash, want);
    }
}
