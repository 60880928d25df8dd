//! The Nacos naming API under `/nacos/v1/ns/`: typed, validated requests and the
//! response bodies, one module per API resource.
//!
//! This module owns what every resource shares: the defaults (`public`,
//! `DEFAULT_GROUP`, `DEFAULT`), [`ParseLimits`], the grouped service name
//! ([`ServiceName`], Nacos's `DistroFilter` rewrite plus `checkServiceNameFormat` and the
//! name syntax check), and the field readers for `namespaceId`, `ip`, `port`, cluster
//! and `weight`. Request types borrow from [`crate::params::Params`], so a light beat
//! is parsed without copying any string that had no percent-escape.
//!
//! Deliberate differences from Nacos 1.4.8 (stricter where Nacos accepts garbage that
//! later breaks clients; each is tested):
//! - `ip` made of digits and dots must be a real IPv4 address (Nacos accepts
//!   `999.1.1.1`); other values must be an IPv6 literal or a host name
//!   (`[0-9A-Za-z._-]`, at most 253 bytes), so `#`, spaces or `/` never reach the
//!   instance id `ip#port#cluster#service`.
//! - `port` must be within `0..=65535`; `weight` must parse and NaN is rejected.
//! - The literal cluster `None` (sent by the Python client when no cluster is given)
//!   means `DEFAULT`, so those instances are visible to default subscribers.
//! - Names and metadata are size-bounded by [`ParseLimits`].

pub mod batch;
pub mod beat;
pub mod client;
pub mod health;
pub mod instance;
pub mod list;
pub mod metadata;
pub mod operator;
pub mod route;
pub mod service;

use std::fmt;

use crate::error::ProtoError;
use crate::params::Params;

pub use metadata::Metadata;

/// The namespace used when `namespaceId` is absent.
pub const DEFAULT_NAMESPACE_ID: &str = "public";
/// The group used when a service name has none.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The cluster used when no cluster is named.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";
/// Separates group and service in a grouped name.
pub const GROUP_SEPARATOR: &str = "@@";
/// The path prefix of the naming API.
pub const API_PREFIX: &str = "/nacos/v1/ns";
/// Default client beat interval in milliseconds.
pub const DEFAULT_BEAT_INTERVAL_MS: u64 = 5_000;
/// Default time without beats after which an instance is unhealthy, in milliseconds.
pub const DEFAULT_BEAT_TIMEOUT_MS: u64 = 15_000;
/// Default time without beats after which an instance is deleted, in milliseconds.
pub const DEFAULT_IP_DELETE_TIMEOUT_MS: u64 = 30_000;

/// Size bounds applied while parsing naming requests (Nacos has none; a registry that
/// holds a million instances in memory needs them). `Default` gives the values below.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseLimits {
    /// Longest grouped service name, namespace id, cluster name or app, in bytes.
    /// Default 512.
    pub max_name_len: usize,
    /// Longest `metadata` parameter (its decoded text), in bytes. Default 16 KiB.
    pub max_metadata_bytes: usize,
    /// Most metadata entries. Default 128.
    pub max_metadata_entries: usize,
    /// Longest `beat` JSON, in bytes. Default 64 KiB.
    pub max_beat_bytes: usize,
}

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            max_name_len: 512,
            max_metadata_bytes: 16 * 1024,
            max_metadata_entries: 128,
            max_beat_bytes: 64 * 1024,
        }
    }
}

/// A service name split into group and name; `Display` gives the grouped form
/// `group@@name` that Nacos uses as the service key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceName<'a> {
    /// The group (`DEFAULT_GROUP` unless named).
    pub group: &'a str,
    /// The service name without group.
    pub name: &'a str,
}

impl<'a> ServiceName<'a> {
    /// A name from parts, without validation (for building responses and requests).
    pub fn new(group: &'a str, name: &'a str) -> Self {
        ServiceName { group, name }
    }

    /// The grouped name's pieces, `group`, `@@`, `name`, for writers that
    /// encode or copy them without joining them first.
    pub fn parts(&self) -> [&'a str; 3] {
        [self.group, GROUP_SEPARATOR, self.name]
    }

    /// Splits and validates a `serviceName` value as Nacos does: a name containing `@@`
    /// is already grouped (and `group_name` is ignored); otherwise `group_name`, or
    /// `DEFAULT_GROUP` when it is `None` or blank, is put in front. The grouped result
    /// must have a non-empty group and service part and only `[0-9a-zA-Z@.:_-]`.
    pub fn parse(
        service_name: &'a str,
        group_name: Option<&'a str>,
        limits: &ParseLimits,
    ) -> Result<Self, ProtoError> {
        let sn = match find_separator(service_name) {
            Some(i) => {
                // Java's `split("@@")` drops trailing empty parts: when everything after
                // the first separator is more separators (`G@@`, `G@@@@`) only the group
                // part is left, which Nacos rejects as not grouped.
                let rest = &service_name[i + GROUP_SEPARATOR.len()..];
                if rest.len() % 2 == 0 && rest.bytes().all(|b| b == b'@') {
                    return Err(ProtoError::ServiceNameFormat);
                }
                if i == 0 {
                    return Err(ProtoError::GroupNameEmpty);
                }
                ServiceName {
                    group: &service_name[..i],
                    name: &service_name[i + GROUP_SEPARATOR.len()..],
                }
            }
            None => ServiceName {
                group: group_name
                    .map(crate::params::java_trim)
                    .filter(|g| !g.is_empty())
                    .unwrap_or(DEFAULT_GROUP),
                name: service_name,
            },
        };
        if sn.name.is_empty() {
            return Err(ProtoError::Required("serviceName"));
        }
        let len = sn.grouped_len();
        if len > limits.max_name_len {
            return Err(ProtoError::TooLong {
                param: "serviceName",
                len,
                max: limits.max_name_len,
            });
        }
        if !(all_service_chars(sn.group) && all_service_chars(sn.name)) {
            return Err(ProtoError::ServiceNameSyntax(sn.to_string().into()));
        }
        Ok(sn)
    }

    /// Reads `serviceName` (falling back to the pre-0.8 `dom`) and `groupName`.
    pub fn from_params(params: &'a Params<'_>, limits: &ParseLimits) -> Result<Self, ProtoError> {
        let raw = params
            .optional("serviceName")
            .or_else(|| params.optional("dom"))
            .ok_or(ProtoError::Required("serviceName"))?;
        ServiceName::parse(raw, params.get("groupName"), limits)
    }

    /// The grouped form, `group@@name`.
    pub fn grouped(&self) -> String {
        let mut s = String::with_capacity(self.grouped_len());
        self.write_grouped(&mut s);
        s
    }

    /// Appends the grouped form to `out`.
    pub fn write_grouped(&self, out: &mut String) {
        out.push_str(self.group);
        out.push_str(GROUP_SEPARATOR);
        out.push_str(self.name);
    }

    /// Length of the grouped form in bytes.
    pub fn grouped_len(&self) -> usize {
        self.group.len() + GROUP_SEPARATOR.len() + self.name.len()
    }
}

impl fmt::Display for ServiceName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.group)?;
        f.write_str(GROUP_SEPARATOR)?;
        f.write_str(self.name)
    }
}

impl serde::Serialize for ServiceName<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The byte offset of the first `@@`: found from each `@` (grouped names have
/// their separator at the first `@`; a pairwise scan of every byte cost more).
fn find_separator(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'@', &b[from..]) {
        let at = from + i;
        if b.get(at + 1) == Some(&b'@') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// Splits `group@@name` at the first separator: `(Some(group), name)`, or `(None, s)`
/// when `s` is not grouped. No validation.
pub fn split_grouped(s: &str) -> (Option<&str>, &str) {
    match s.split_once(GROUP_SEPARATOR) {
        Some((g, n)) => (Some(g), n),
        None => (None, s),
    }
}

/// `[0-9a-zA-Z@.:_-]`, Nacos `Service.SERVICE_NAME_SYNTAX`.
const fn is_service_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'@' | b'.' | b':' | b'_' | b'-')
}

/// Whether every byte of `s` is a [`is_service_char`]: one table load per
/// byte, not five comparisons (every beat checks ~60 bytes).
fn all_service_chars(s: &str) -> bool {
    const TABLE: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            t[b] = is_service_char(b as u8);
            b += 1;
        }
        t
    };
    s.bytes().all(|b| TABLE[usize::from(b)])
}

/// `namespaceId`, default `public`, bounded by `max_name_len`.
pub fn namespace_id<'a>(
    params: &'a Params<'_>,
    limits: &ParseLimits,
) -> Result<&'a str, ProtoError> {
    let ns = params.optional_or("namespaceId", DEFAULT_NAMESPACE_ID);
    bounded("namespaceId", ns, limits)
}

fn bounded<'s>(
    param: &'static str,
    v: &'s str,
    limits: &ParseLimits,
) -> Result<&'s str, ProtoError> {
    if v.len() > limits.max_name_len {
        return Err(ProtoError::TooLong {
            param,
            len: v.len(),
            max: limits.max_name_len,
        });
    }
    Ok(v)
}

/// Checks an instance address: a dotted quad (each part 1-3 digits, at most 255), an
/// IPv6 literal, or a host name of `[0-9A-Za-z._-]` up to 253 bytes.
pub fn validate_ip(ip: &str) -> Result<(), ProtoError> {
    let ok = if ip.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        is_dotted_quad(ip)
    } else if ip.contains(':') {
        ip.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !ip.is_empty()
            && ip.len() <= 253
            && ip
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    if ok {
        Ok(())
    } else {
        Err(ProtoError::InvalidIp)
    }
}

/// Four dot-separated parts of 1-3 digits, each at most 255 (leading zeros allowed, as
/// Nacos's pattern allows them). `ip` holds only digits and dots.
fn is_dotted_quad(ip: &str) -> bool {
    let (mut parts, mut digits, mut value) = (1, 0, 0u16);
    for b in ip.bytes() {
        if b == b'.' {
            if digits == 0 {
                return false;
            }
            parts += 1;
            digits = 0;
            value = 0;
        } else {
            digits += 1;
            value = value * 10 + u16::from(b - b'0');
            if digits > 3 || value > 255 {
                return false;
            }
        }
    }
    parts == 4 && digits > 0
}

/// Parses an integer the way Java's `Integer.parseInt` does (optional sign, ASCII
/// digits, 32-bit range), failing with `For input string: "<s>"`.
pub fn parse_java_int(s: &str) -> Result<i32, ProtoError> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProtoError::NumberFormat(s.into()));
    }
    s.parse::<i32>()
        .map_err(|_| ProtoError::NumberFormat(s.into()))
}

/// Parses a port: a Java integer within `0..=65535`.
pub fn parse_port(param: &'static str, s: &str) -> Result<u16, ProtoError> {
    // Up to 5 plain digits (every client's port) fit any integer type and
    // read as `parseInt` reads them; anything else takes the general path.
    if (1..=5).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        let v = s.bytes().fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        return u16::try_from(v).map_err(|_| ProtoError::OutOfRange {
            param,
            value: i64::from(v),
            min: 0,
            max: 65_535,
        });
    }
    let v = parse_java_int(s)?;
    u16::try_from(v).map_err(|_| ProtoError::OutOfRange {
        param,
        value: i64::from(v),
        min: 0,
        max: 65_535,
    })
}

/// Parses a `double` like Java's `Double.parseDouble` (a trailing `d`/`f` suffix is
/// allowed), failing with `For input string: "<s>"`.
pub fn parse_java_double(s: &str) -> Result<f64, ProtoError> {
    let body = s.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(s);
    body.parse::<f64>()
        .map_err(|_| ProtoError::NumberFormat(s.into()))
}

/// Parses and range-checks a weight: NaN or outside `[0, 10000]` is rejected.
pub fn parse_weight(s: &str) -> Result<f64, ProtoError> {
    check_weight(parse_java_double(s)?)
}

/// Range-checks a weight.
pub fn check_weight(w: f64) -> Result<f64, ProtoError> {
    if (0.0..=10_000.0).contains(&w) {
        Ok(w)
    } else {
        Err(ProtoError::WeightRange)
    }
}

/// Normalises and validates a cluster name: absent, blank and the literal `None` mean
/// `DEFAULT`; otherwise it must match `[0-9a-zA-Z-]+` and fit `max_name_len`.
pub fn normalize_cluster<'s>(
    cluster: Option<&'s str>,
    limits: &ParseLimits,
) -> Result<&'s str, ProtoError> {
    let c = match cluster.map(crate::params::java_trim) {
        None | Some("") | Some("None") => return Ok(DEFAULT_CLUSTER),
        Some(c) => c,
    };
    let c = bounded("clusterName", c, limits)?;
    if !c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        return Err(ProtoError::ClusterNameSyntax(c.into()));
    }
    Ok(c)
}

/// The cluster of an instance request: `clusterName`, then `cluster`, then `DEFAULT`
/// (a `None` in `clusterName` also falls through to `cluster`).
pub fn cluster_param<'a>(
    params: &'a Params<'_>,
    limits: &ParseLimits,
) -> Result<&'a str, ProtoError> {
    let named = params
        .optional("clusterName")
        .filter(|c| *c != "None")
        .or_else(|| params.optional("cluster"));
    normalize_cluster(named, limits)
}

/// The instance id Nacos's `simple` generator gives: `ip#port#cluster#group@@name`.
pub fn instance_id(ip: &str, port: u16, cluster: &str, service: &ServiceName<'_>) -> String {
    let mut port_buf = itoa::Buffer::new();
    let port = port_buf.format(port);
    let mut s =
        String::with_capacity(ip.len() + port.len() + cluster.len() + service.grouped_len() + 3);
    s.push_str(ip);
    s.push('#');
    s.push_str(port);
    s.push('#');
    s.push_str(cluster);
    s.push('#');
    service.write_grouped(&mut s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sn<'a>(s: &'a str, g: Option<&'a str>) -> Result<ServiceName<'a>, ProtoError> {
        ServiceName::parse(s, g, &ParseLimits::default())
    }

    #[test]
    fn grouping_rules() {
        assert_eq!(sn("demo", None).unwrap().to_string(), "DEFAULT_GROUP@@demo");
        assert_eq!(sn("demo", Some("G1")).unwrap().to_string(), "G1@@demo");
        assert_eq!(sn("demo", Some(" ")).unwrap().group, "DEFAULT_GROUP");
        let g = sn("G1@@demo", Some("ignored")).unwrap();
        assert_eq!((g.group, g.name), ("G1", "demo"));
        assert_eq!(sn("G@@", None), Err(ProtoError::ServiceNameFormat));
        assert_eq!(sn("G@@@@", None), Err(ProtoError::ServiceNameFormat));
        assert_eq!(sn("@@", None), Err(ProtoError::ServiceNameFormat));
        assert_eq!(sn("@@svc", None), Err(ProtoError::GroupNameEmpty));
        assert_eq!(
            sn("a b", None).unwrap_err().to_string(),
            "dom name can only have these characters: 0-9a-zA-Z-._:, current: DEFAULT_GROUP@@a b"
        );
        assert!(matches!(
            sn("s", Some("g/h")),
            Err(ProtoError::ServiceNameSyntax(_))
        ));
        assert!(sn("a.b:c_d-e@f", None).is_ok());
        let long = "x".repeat(600);
        assert!(matches!(sn(&long, None), Err(ProtoError::TooLong { .. })));
    }

    #[test]
    fn ips() {
        for ok in [
            "127.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "010.1.1.1",
            "::1",
            "fe80::1:2",
            "my-host.local",
            "svc_1",
        ] {
            assert_eq!(validate_ip(ok), Ok(()), "{ok}");
        }
        for bad in [
            "999.1.1.1",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            "1.2.3.",
            "",
            "a b",
            "h#1",
            "1:2:3:4:5:6:7:8:9",
            "x/y",
        ] {
            assert_eq!(validate_ip(bad), Err(ProtoError::InvalidIp), "{bad}");
        }
    }

    #[test]
    fn numbers_like_java() {
        assert_eq!(parse_port("port", "8080"), Ok(8080));
        assert_eq!(parse_port("port", "+80"), Ok(80));
        assert_eq!(
            parse_port("port", "abc").unwrap_err().to_string(),
            "For input string: \"abc\""
        );
        assert_eq!(
            parse_port("port", "70000").unwrap_err().to_string(),
            "Param 'port' is illegal, it should be between 0 and 65535, current: 70000"
        );
        assert!(matches!(
            parse_port("port", "-1"),
            Err(ProtoError::OutOfRange { value: -1, .. })
        ));
        assert!(matches!(
            parse_port("port", "99999999999"),
            Err(ProtoError::NumberFormat(_))
        ));
        assert!(matches!(
            parse_port("port", "8080.0"),
            Err(ProtoError::NumberFormat(_))
        ));
        assert_eq!(parse_weight("1.0"), Ok(1.0));
        assert_eq!(parse_weight("2d"), Ok(2.0));
        assert_eq!(parse_weight("10000"), Ok(10_000.0));
        for bad in ["NaN", "-1", "10001", "Infinity"] {
            assert_eq!(parse_weight(bad), Err(ProtoError::WeightRange), "{bad}");
        }
        assert!(matches!(
            parse_weight("heavy"),
            Err(ProtoError::NumberFormat(_))
        ));
    }

    #[test]
    fn clusters() {
        let l = ParseLimits::default();
        assert_eq!(normalize_cluster(None, &l), Ok("DEFAULT"));
        assert_eq!(normalize_cluster(Some("None"), &l), Ok("DEFAULT"));
        assert_eq!(normalize_cluster(Some(""), &l), Ok("DEFAULT"));
        assert_eq!(normalize_cluster(Some("c-1"), &l), Ok("c-1"));
        assert_eq!(
            normalize_cluster(Some("c_1"), &l).unwrap_err().to_string(),
            "cluster name can only have these characters: 0-9a-zA-Z-, current: c_1"
        );
        let p = Params::parse("clusterName=None&cluster=c2", None).unwrap();
        assert_eq!(cluster_param(&p, &l), Ok("c2"));
        let p = Params::parse("clusterName=c1&cluster=c2", None).unwrap();
        assert_eq!(cluster_param(&p, &l), Ok("c1"));
    }

    #[test]
    fn ids() {
        let s = ServiceName::new("DEFAULT_GROUP", "svc");
        assert_eq!(
            instance_id("10.10.10.10", 8888, "DEFAULT", &s),
            "10.10.10.10#8888#DEFAULT#DEFAULT_GROUP@@svc"
        );
        assert_eq!(split_grouped("G@@a@@b"), (Some("G"), "a@@b"));
        assert_eq!(split_grouped("a"), (None, "a"));
    }
}
