//! The DNS door's protocol: a query's bytes in, the response's bytes out,
//! with the names of [`name`] and the records a [`Zone`] supplies.
//!
//! The wire format is hickory-proto's (a maintained crate, not our own
//! parser): [`Responder::respond`] decodes the query, reads its name as a
//! Nacos service, cluster or instance, asks the zone, and encodes the
//! answer within the transport's size, hickory setting the TC bit when
//! the answer does not fit. What is answered:
//!
//! - `A`/`AAAA` on a service name: the addresses of the instances the zone
//!   serves (each address once: an RRset holds no duplicates, RFC 2181).
//! - `SRV` on a service name: one record per instance, priority 0, weight
//!   from the instance weight ([`srv_weight`]), the port, and the
//!   instance's own name as target, whose `A`/`AAAA` ride in the additional
//!   section when they fit (dropping them never sets TC, RFC 2181 §9).
//! - `A`/`AAAA` and `TXT` on an instance name: its address, and its
//!   metadata as one `key=value` string each (a pair over 255 bytes does
//!   not fit a TXT string and is left out).
//! - `SOA` at the apex; every negative answer carries that SOA in its
//!   authority section so resolvers may cache it for the TTL (RFC 2308).
//! - A name nothing has: NXDOMAIN; a name that exists (a service, a
//!   namespace or group with services below it) without records of the
//!   type asked: NOERROR with no answer (NODATA, RFC 2308 §2.2).
//! - A name outside the domain or a class other than IN: REFUSED, never
//!   forwarded (RA is 0); an opcode other than QUERY: NOTIMP; a query that
//!   does not decode, or has not exactly one question: FORMERR; an EDNS
//!   version past 0: BADVERS. Fewer than 12 bytes, or a response, get no
//!   answer at all (nothing to answer, and answering responses loops).
//!
//! The header's counts are checked before anything else is decoded: a
//! query has one question, no answers and no authority, and hickory sizes
//! its vectors by the counts it is given, so a 12-byte packet claiming
//! 65,535 records is refused before it can cost memory.

pub mod name;

use std::net::IpAddr;

use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, SOA, SRV, TXT};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncodable, BinEncoder};

use name::{Parent, ServiceName, Target};

/// The largest UDP answer sent, whatever a client's EDNS offers: the DNS
/// flag day 2020 size, which crosses common paths without fragmenting.
pub const MAX_UDP_PAYLOAD: u16 = 1232;
/// The UDP size without EDNS (RFC 1035 §4.2.1).
pub const PLAIN_UDP_PAYLOAD: u16 = 512;
/// How many places a service's records may start at (see
/// [`Responder::respond`]'s `rotate`): every instance of a service of up
/// to this many, and this many evenly spaced ones of a larger service. A
/// bounded number, so that a cache can hold every order of an answer.
pub const ROTATIONS: usize = 16;

/// One instance a service name serves.
#[derive(Clone, Copy, Debug)]
pub struct Host<'a> {
    /// Its address.
    pub ip: IpAddr,
    /// Its port.
    pub port: u16,
    /// Its Nacos weight (0 to 10,000).
    pub weight: f64,
    /// Its cluster, for its SRV target name.
    pub cluster: &'a str,
}

/// What a responder answers from: the registry's current state.
pub trait Zone {
    /// Visits the instances the service (or its cluster) serves. `false`
    /// when no such service, or no instance of it is in that cluster.
    fn hosts(&self, name: &ServiceName, visit: &mut dyn FnMut(Host<'_>)) -> bool;
    /// Visits the metadata of the instance at `ip:port` of the service's
    /// cluster; `false` when there is none (or it is disabled).
    fn instance(
        &self,
        name: &ServiceName,
        ip: IpAddr,
        port: u16,
        meta: &mut dyn FnMut(&str, &str),
    ) -> bool;
    /// Whether any service lives in the namespace (and group).
    fn has_services(&self, parent: &Parent) -> bool;
}

/// How the answer travels, which bounds its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A datagram: 512 bytes, or the EDNS size up to [`MAX_UDP_PAYLOAD`].
    Udp,
    /// A TCP stream: one message of up to 65,535 bytes.
    Tcp,
}

/// The response code an answer carried, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rcode {
    /// NOERROR with records.
    Answer,
    /// NOERROR without records (NODATA).
    NoData,
    /// NXDOMAIN.
    NxDomain,
    /// REFUSED: another zone or class.
    Refused,
    /// FORMERR: the query did not decode or had not one question.
    FormErr,
    /// NOTIMP: an opcode other than QUERY.
    NotImp,
    /// BADVERS: an EDNS version past 0.
    BadVers,
    /// SERVFAIL: the answer could not be encoded.
    ServFail,
}

impl Rcode {
    /// Every value, in the order [`Rcode::index`] numbers them.
    pub const ALL: [Rcode; 8] = [
        Rcode::Answer,
        Rcode::NoData,
        Rcode::NxDomain,
        Rcode::Refused,
        Rcode::FormErr,
        Rcode::NotImp,
        Rcode::BadVers,
        Rcode::ServFail,
    ];

    /// The metrics label.
    pub fn label(self) -> &'static str {
        match self {
            Rcode::Answer => "NOERROR",
            Rcode::NoData => "NODATA",
            Rcode::NxDomain => "NXDOMAIN",
            Rcode::Refused => "REFUSED",
            Rcode::FormErr => "FORMERR",
            Rcode::NotImp => "NOTIMP",
            Rcode::BadVers => "BADVERS",
            Rcode::ServFail => "SERVFAIL",
        }
    }

    /// Its place in [`Rcode::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// An encoded response.
#[derive(Debug)]
pub struct Response {
    /// The message's bytes (without TCP's length prefix).
    pub bytes: Vec<u8>,
    /// What it answered.
    pub rcode: Rcode,
    /// Whether the TC bit is set: not everything fit.
    pub truncated: bool,
    /// How many different orders of its records this answer has: `rotate`
    /// values equal modulo this give the same bytes (1: no order to vary).
    pub rotations: usize,
}

/// Answers queries for one domain.
#[derive(Clone, Debug)]
pub struct Responder {
    domain: Name,
    ttl: u32,
    soa: Record,
}

/// A configuration the responder cannot run with.
#[derive(Debug, thiserror::Error)]
#[error("--dns-domain {domain:?}: {reason}")]
pub struct DomainError {
    domain: String,
    reason: String,
}

impl Responder {
    /// A responder for `domain` (`nacos.`; the trailing dot is optional)
    /// whose records live `ttl` seconds.
    ///
    /// # Errors
    /// When `domain` is not a DNS name.
    pub fn new(domain: &str, ttl: u32) -> Result<Responder, DomainError> {
        let err = |reason: String| DomainError {
            domain: domain.to_owned(),
            reason,
        };
        let mut name = Name::from_ascii(domain).map_err(|e| err(e.to_string()))?;
        name.set_fqdn(true);
        let domain = name.to_lowercase();
        if domain.is_root() {
            return Err(err("the root cannot be the registry's zone".into()));
        }
        let host = |l: &str| {
            domain
                .prepend_label(l.as_bytes())
                .map_err(|e| err(e.to_string()))
        };
        // Synthesised: the zone has no primary to name, only a TTL for
        // negative caching (the SOA's minimum, RFC 2308 §5).
        let soa = SOA::new(host("ns")?, host("hostmaster")?, 1, 3600, 600, 86400, ttl);
        let soa = Record::from_rdata(domain.clone(), ttl, RData::SOA(soa));
        Ok(Responder { domain, ttl, soa })
    }

    /// The domain answered, lower case and fully qualified.
    pub fn domain(&self) -> &Name {
        &self.domain
    }

    /// Answers one query; `None` when it gets no answer (see the module
    /// header). `rotate` shifts where a service's records start, so that
    /// clients taking the first records spread over the instances: at
    /// instance `rotate % n` of `n` up to [`ROTATIONS`], and at one of
    /// [`ROTATIONS`] evenly spaced instances of a larger service (so a
    /// truncated answer still starts anywhere in it). The answer depends
    /// on the query's id and RD bit only in its own id and RD bit: two
    /// queries that differ only there get answers that differ only there.
    pub fn respond(
        &self,
        query: &[u8],
        transport: Transport,
        zone: &dyn Zone,
        rotate: usize,
    ) -> Option<Response> {
        let header = Header::read(&mut BinDecoder::new(query)).ok()?;
        if header.message_type() != MessageType::Query {
            return None;
        }
        let mut out = Message::new();
        out.set_id(header.id())
            .set_message_type(MessageType::Response)
            .set_op_code(header.op_code())
            .set_recursion_desired(header.recursion_desired())
            .set_recursion_available(false);
        if header.op_code() != OpCode::Query {
            return Some(self.finish(out, Rcode::NotImp, transport, u16::MAX));
        }
        if header.query_count() != 1
            || header.answer_count() != 0
            || header.name_server_count() != 0
            || header.additional_count() > 2
        {
            return Some(self.finish(out, Rcode::FormErr, transport, u16::MAX));
        }
        // Decoded with the id and RD bit cleared: a compression pointer
        // into the header would otherwise read them as a name, and the
        // answer must not depend on them (the answer cache's key leaves
        // them out).
        let mut plain = query.to_vec();
        plain[..2].fill(0);
        plain[2] &= !1;
        let Ok(msg) = Message::from_vec(&plain) else {
            return Some(self.finish(out, Rcode::FormErr, transport, u16::MAX));
        };
        let limit = match (transport, msg.extensions()) {
            (Transport::Tcp, _) => u16::MAX,
            (Transport::Udp, None) => PLAIN_UDP_PAYLOAD,
            (Transport::Udp, Some(e)) => e.max_payload().clamp(PLAIN_UDP_PAYLOAD, MAX_UDP_PAYLOAD),
        };
        if let Some(e) = msg.extensions() {
            let mut edns = Edns::new();
            edns.set_max_payload(MAX_UDP_PAYLOAD).set_version(0);
            out.set_edns(edns);
            if e.version() > 0 {
                return Some(self.finish(out, Rcode::BadVers, transport, limit));
            }
        }
        let Some(question) = msg.queries().first() else {
            return Some(self.finish(out, Rcode::FormErr, transport, limit));
        };
        out.add_query(question.clone());
        let mut rotations = 1;
        let rcode = self.lookup(question, &mut out, zone, (rotate, &mut rotations));
        let mut response = self.finish(out, rcode, transport, limit);
        response.rotations = rotations;
        Some(response)
    }

    /// Fills `out` with the answer to `question`; `rotate` is where a
    /// service's records start and where the number of starts it has goes.
    fn lookup(
        &self,
        question: &hickory_proto::op::Query,
        out: &mut Message,
        zone: &dyn Zone,
        rotate: (usize, &mut usize),
    ) -> Rcode {
        let qname = question.name();
        if question.query_class() != DNSClass::IN || !self.domain.zone_of(qname) {
            return Rcode::Refused;
        }
        out.set_authoritative(true);
        // Counted by iterating: `num_labels` leaves a leading `*` out.
        let mut labels: Vec<&[u8]> = qname.iter().collect();
        labels.truncate(labels.len().saturating_sub(self.domain.iter().count()));
        let Some((target, parent)) = name::parse(&labels) else {
            return Rcode::NxDomain;
        };
        let qtype = question.query_type();
        let found = match &target {
            Target::Apex => {
                if qtype == RecordType::SOA {
                    out.add_answer(self.soa.clone());
                }
                true
            }
            Target::Parent(p) => zone.has_services(p),
            Target::Service(s) => {
                self.service(qname, qtype, s, out, zone, rotate)
                    || parent.is_some_and(|p| zone.has_services(&p))
            }
            Target::Instance(s, ip, port) => self.instance(qname, qtype, s, *ip, *port, out, zone),
        };
        match (found, out.answers().is_empty()) {
            (false, _) => Rcode::NxDomain,
            (true, true) => Rcode::NoData,
            (true, false) => Rcode::Answer,
        }
    }

    /// A service name's records; `false` when the service does not exist.
    fn service(
        &self,
        qname: &Name,
        qtype: RecordType,
        s: &ServiceName,
        out: &mut Message,
        zone: &dyn Zone,
        (rotate, rotations): (usize, &mut usize),
    ) -> bool {
        let mut hosts: Vec<(IpAddr, u16, f64, usize)> = Vec::new();
        let mut clusters: Vec<String> = Vec::new();
        let exists = zone.hosts(s, &mut |h| {
            if clusters.last().map(String::as_str) != Some(h.cluster) {
                clusters.push(h.cluster.to_owned());
            }
            hosts.push((h.ip, h.port, h.weight, clusters.len() - 1));
        });
        if !exists || hosts.is_empty() {
            return exists;
        }
        let (start, starts) = rotation(rotate, hosts.len());
        hosts.rotate_left(start);
        if matches!(
            qtype,
            RecordType::A | RecordType::AAAA | RecordType::ANY | RecordType::SRV
        ) {
            *rotations = starts;
        }
        match qtype {
            RecordType::A | RecordType::AAAA | RecordType::ANY => {
                let mut seen = std::collections::HashSet::with_capacity(hosts.len());
                for &(ip, ..) in &hosts {
                    if seen.insert(ip) {
                        if let Some(r) = self.address(qname, qtype, ip) {
                            out.add_answer(r);
                        }
                    }
                }
            }
            RecordType::SRV => {
                for &(ip, port, weight, c) in &hosts {
                    let Some(target) = self.instance_name(s, &clusters[c], ip, port) else {
                        continue;
                    };
                    let srv = SRV::new(0, srv_weight(weight), port, target.clone());
                    out.add_answer(Record::from_rdata(qname.clone(), self.ttl, RData::SRV(srv)));
                    if let Some(r) = self.address(&target, RecordType::ANY, ip) {
                        out.add_additional(r);
                    }
                }
            }
            _ => {}
        }
        true
    }

    /// An instance name's records; `false` when there is no such instance.
    #[allow(clippy::too_many_arguments)] // one call site: lookup's match
    fn instance(
        &self,
        qname: &Name,
        qtype: RecordType,
        s: &ServiceName,
        ip: IpAddr,
        port: u16,
        out: &mut Message,
        zone: &dyn Zone,
    ) -> bool {
        let mut txt = Vec::new();
        let want_txt = qtype == RecordType::TXT;
        let exists = zone.instance(s, ip, port, &mut |k, v| {
            let pair = format!("{k}={v}");
            if want_txt && pair.len() <= 255 {
                txt.push(pair);
            }
        });
        if !exists {
            return false;
        }
        match qtype {
            RecordType::TXT if !txt.is_empty() => {
                txt.sort_unstable();
                out.add_answer(Record::from_rdata(
                    qname.clone(),
                    self.ttl,
                    RData::TXT(TXT::new(txt)),
                ));
            }
            _ => {
                if let Some(r) = self.address(qname, qtype, ip) {
                    out.add_answer(r);
                }
            }
        }
        true
    }

    /// The `A` or `AAAA` record of `ip` at `name`, if `qtype` asks for its
    /// family (`ANY` asks for both).
    fn address(&self, name: &Name, qtype: RecordType, ip: IpAddr) -> Option<Record> {
        let rdata = match (ip, qtype) {
            (IpAddr::V4(v4), RecordType::A | RecordType::ANY) => RData::A(A(v4)),
            (IpAddr::V6(v6), RecordType::AAAA | RecordType::ANY) => RData::AAAA(AAAA(v6)),
            _ => return None,
        };
        Some(Record::from_rdata(name.clone(), self.ttl, rdata))
    }

    /// An instance's name under the domain; `None` when it is over DNS's
    /// 255 bytes (its SRV record is then left out).
    fn instance_name(&self, s: &ServiceName, cluster: &str, ip: IpAddr, port: u16) -> Option<Name> {
        let labels = name::instance_labels(&s.namespace, &s.group, &s.service, cluster, ip, port);
        Name::from_labels(labels.iter().map(|l| l.as_bytes()))
            .ok()?
            .append_domain(&self.domain)
            .ok()
    }

    /// Sets the code, adds the SOA to a negative answer and encodes within
    /// `limit`. When the answer overflows only in its additional section,
    /// it goes again without it: TC means the answer did not fit.
    fn finish(&self, mut out: Message, rcode: Rcode, transport: Transport, limit: u16) -> Response {
        let code = match rcode {
            Rcode::Answer | Rcode::NoData => ResponseCode::NoError,
            Rcode::NxDomain => ResponseCode::NXDomain,
            Rcode::Refused => ResponseCode::Refused,
            Rcode::FormErr => ResponseCode::FormErr,
            Rcode::NotImp => ResponseCode::NotImp,
            Rcode::BadVers => ResponseCode::BADVERS,
            Rcode::ServFail => ResponseCode::ServFail,
        };
        out.set_response_code(code);
        if matches!(rcode, Rcode::NoData | Rcode::NxDomain) {
            out.add_name_server(self.soa.clone());
        }
        let limit = if transport == Transport::Tcp {
            u16::MAX
        } else {
            limit
        };
        let mut response = encode(&out, limit);
        if let Some(r) = &response {
            if r.1 && !out.additionals().is_empty() {
                out.take_additionals();
                response = encode(&out, limit);
            }
        }
        match response {
            Some((bytes, truncated)) => Response {
                bytes,
                rcode,
                truncated,
                rotations: 1,
            },
            None => self.servfail(&out),
        }
    }

    /// SERVFAIL for a message that could not be encoded: its header and
    /// question alone.
    fn servfail(&self, failed: &Message) -> Response {
        let mut out = Message::new();
        out.set_id(failed.id())
            .set_message_type(MessageType::Response)
            .set_op_code(failed.op_code())
            .set_recursion_desired(failed.recursion_desired())
            .set_response_code(ResponseCode::ServFail);
        out.add_queries(failed.queries().iter().cloned());
        let bytes = encode(&out, u16::MAX).map(|r| r.0).unwrap_or_default();
        Response {
            bytes,
            rcode: Rcode::ServFail,
            truncated: false,
            rotations: 1,
        }
    }
}

/// Where `rotate` starts a service of `n` records, and how many starts
/// there are (see [`Responder::respond`]).
fn rotation(rotate: usize, n: usize) -> (usize, usize) {
    if n <= ROTATIONS {
        (rotate % n, n)
    } else {
        ((rotate % ROTATIONS) * n / ROTATIONS, ROTATIONS)
    }
}

/// Encodes within `limit` bytes: the bytes, and whether hickory left
/// records out (and set TC). `None` when even the header and question do
/// not encode.
fn encode(msg: &Message, limit: u16) -> Option<(Vec<u8>, bool)> {
    let mut bytes = Vec::with_capacity(usize::from(limit.min(4096)));
    let mut encoder = BinEncoder::new(&mut bytes);
    encoder.set_max_size(limit);
    msg.emit(&mut encoder).ok()?;
    // A record that did not fit is rolled back by moving the encoder's
    // offset, not by shortening the buffer: what lies past it is junk.
    let len = encoder.offset();
    bytes.truncate(len);
    let truncated = Header::read(&mut BinDecoder::new(&bytes)).ok()?.truncated();
    Some((bytes, truncated))
}

/// The SRV weight of a Nacos weight: hundredths, so two decimals survive,
/// capped at 65,535 (weights above 655.35 all read as the most); a positive
/// weight is at least 1, since RFC 2782 reads 0 as "almost never".
pub fn srv_weight(weight: f64) -> u16 {
    if weight.is_nan() || weight <= 0.0 {
        return 0;
    }
    (weight * 100.0).round().clamp(1.0, 65_535.0) as u16
}

#[cfg(test)]
mod tests;
