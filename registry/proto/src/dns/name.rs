//! The DNS door's names: how a Nacos service, group, namespace, cluster and
//! instance are spelled as DNS labels, and how a query name under the
//! door's domain reads back as one of them.
//!
//! # Names (left of the domain, `nacos.` by default)
//!
//! | labels | means |
//! | --- | --- |
//! | `SERVICE` | `SERVICE` in `DEFAULT_GROUP` of `public` |
//! | `CLUSTER.SERVICE` | the same, narrowed to one cluster |
//! | `SERVICE.GROUP.NAMESPACE` | `SERVICE` in `GROUP` of `NAMESPACE` |
//! | `CLUSTER.SERVICE.GROUP.NAMESPACE` | the same, narrowed to one cluster |
//! | `INSTANCE.CLUSTER.SERVICE.GROUP.NAMESPACE` | one instance: the target SRV answers name |
//!
//! # The escape
//!
//! A label carries `a`-`z`, `0`-`9` and `-` as themselves. DNS compares
//! names without regard to case and resolvers may change the case of a
//! query (the 0x20 trick), so upper case cannot be carried as itself; nor
//! can `@`, `:`, `.`, `_` or anything else hostnames do not hold. Every
//! other byte of the name's UTF-8 is `_` and its two hex digits:
//! `DEFAULT_GROUP` is `_44_45_46_41_55_4c_54_5f_47_52_4f_55_50`, `a.b` is
//! `a_2eb`, `Orders` is `_4frders`. A label that is `_` alone stands for the
//! default (`DEFAULT` for a cluster, `DEFAULT_GROUP` for a group, `public`
//! for a namespace), so `orders._.dev.nacos.` is `orders` in
//! `DEFAULT_GROUP` of `dev`. A label that does not decode (a `_` not
//! followed by two hex digits, bytes that are not UTF-8) names nothing.
//! A name whose escaped label is over 63 bytes cannot be asked for.
//!
//! The instance label is the address in hex (8 digits for IPv4, 32 for
//! IPv6), `-` and the port in decimal: `7f000001-8080` is 127.0.0.1:8080.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The label that stands for the default cluster, group or namespace.
pub const DEFAULT_LABEL: &str = "_";

/// The group of a name that gives none.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The namespace of a name that gives none.
pub const DEFAULT_NAMESPACE: &str = "public";
/// The cluster `_` stands for.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";

/// A query name under the domain, read as what it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// The apex itself (`nacos.`): the zone's SOA.
    Apex,
    /// A service, or one cluster of it.
    Service(ServiceName),
    /// A name that may hold services below it but is none itself: a
    /// namespace (`NAMESPACE.<domain>`) or a group (`GROUP.NAMESPACE`).
    Parent(Parent),
    /// One instance of a service's cluster (the SRV target).
    Instance(ServiceName, IpAddr, u16),
}

/// Which service a name means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceName {
    /// Nacos namespace id.
    pub namespace: String,
    /// Group name.
    pub group: String,
    /// Service name (without the group).
    pub service: String,
    /// One cluster of it, or all.
    pub cluster: Option<String>,
}

/// A name above services: an empty non-terminal when services exist below
/// it (RFC 8020: an existing name must not be NXDOMAIN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The namespace the name would be (one label), or the namespace of
    /// the group (two labels).
    pub namespace: String,
    /// The group, for a two-label name.
    pub group: Option<String>,
}

/// Reads the labels left of the domain (left to right, as on the wire).
/// Two labels and one label are ambiguous between a service and a parent
/// of services: this returns the service reading first and the parent
/// reading second, the caller asks the store which exists. `None` when
/// no label decodes or the name has too many labels: nothing has it.
pub fn parse(labels: &[&[u8]]) -> Option<(Target, Option<Parent>)> {
    let mut decoded = Vec::with_capacity(labels.len());
    for l in labels {
        decoded.push(decode_label(l)?);
    }
    let d = |i: usize, default: &str| -> String {
        match &decoded[i] {
            Label::Default => default.to_owned(),
            Label::Text(t) => t.clone(),
        }
    };
    let name = |cluster: Option<String>, s: usize, g: Option<usize>| ServiceName {
        service: d(s, ""),
        group: g.map_or_else(|| DEFAULT_GROUP.to_owned(), |g| d(g, DEFAULT_GROUP)),
        namespace: g.map_or_else(
            || DEFAULT_NAMESPACE.to_owned(),
            |g| d(g + 1, DEFAULT_NAMESPACE),
        ),
        cluster,
    };
    let parsed = match decoded.len() {
        0 => (Target::Apex, None),
        1 => (
            Target::Service(name(None, 0, None)),
            Some(Parent {
                namespace: d(0, DEFAULT_NAMESPACE),
                group: None,
            }),
        ),
        2 => (
            Target::Service(name(Some(d(0, DEFAULT_CLUSTER)), 1, None)),
            Some(Parent {
                namespace: d(1, DEFAULT_NAMESPACE),
                group: Some(d(0, DEFAULT_GROUP)),
            }),
        ),
        3 => (Target::Service(name(None, 0, Some(1))), None),
        4 => (
            Target::Service(name(Some(d(0, DEFAULT_CLUSTER)), 1, Some(2))),
            None,
        ),
        5 => {
            let (ip, port) = instance_label(labels[0])?;
            (
                Target::Instance(name(Some(d(1, DEFAULT_CLUSTER)), 2, Some(3)), ip, port),
                None,
            )
        }
        _ => return None,
    };
    // A service needs a name: `_` stands for no default service.
    if let Target::Service(s) | Target::Instance(s, ..) = &parsed.0 {
        if s.service.is_empty() {
            return parsed.1.map(|p| (Target::Parent(p), None));
        }
    }
    Some(parsed)
}

/// One decoded label.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Label {
    /// `_`: the default of its place.
    Default,
    /// Any other label, unescaped.
    Text(String),
}

/// Decodes one label (any case); `None` when it is not a valid escape.
fn decode_label(label: &[u8]) -> Option<Label> {
    if label == DEFAULT_LABEL.as_bytes() {
        return Some(Label::Default);
    }
    let mut out = Vec::with_capacity(label.len());
    let mut i = 0;
    while i < label.len() {
        let b = label[i].to_ascii_lowercase();
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => {
                out.push(b);
                i += 1;
            }
            b'_' => {
                let hex = label.get(i + 1..i + 3)?;
                out.push((hex_digit(hex[0])? << 4) | hex_digit(hex[1])?);
                i += 3;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok().map(Label::Text)
}

fn hex_digit(b: u8) -> Option<u8> {
    match b.to_ascii_lowercase() {
        d @ b'0'..=b'9' => Some(d - b'0'),
        d @ b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    }
}

/// Escapes one Nacos name into a label (see the module header); `default`
/// is the value `_` stands for in its place, written as `_`.
pub fn encode_label(text: &str, default: &str, out: &mut String) {
    if text == default {
        out.push_str(DEFAULT_LABEL);
        return;
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in text.as_bytes() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => out.push(char::from(b)),
            _ => {
                out.push('_');
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 15)]));
            }
        }
    }
}

/// The instance label of an address: hex address, `-`, decimal port.
pub fn encode_instance(ip: IpAddr, port: u16, out: &mut String) {
    use std::fmt::Write as _;
    // Writes into a String cannot fail.
    let _ = match ip {
        IpAddr::V4(v4) => write!(out, "{:08x}-{port}", u32::from(v4)),
        IpAddr::V6(v6) => write!(out, "{:032x}-{port}", u128::from(v6)),
    };
}

fn instance_label(label: &[u8]) -> Option<(IpAddr, u16)> {
    let label = std::str::from_utf8(label).ok()?;
    let (hex, port) = label.rsplit_once('-')?;
    if !port.bytes().all(|b| b.is_ascii_digit()) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let port: u16 = port.parse().ok()?;
    let ip = match hex.len() {
        8 => IpAddr::V4(Ipv4Addr::from(u32::from_str_radix(hex, 16).ok()?)),
        32 => IpAddr::V6(Ipv6Addr::from(u128::from_str_radix(hex, 16).ok()?)),
        _ => return None,
    };
    Some((ip, port))
}

/// The labels of an instance's name, left to right, without the domain:
/// `INSTANCE.CLUSTER.SERVICE.GROUP.NAMESPACE`, each escaped.
pub fn instance_labels(
    namespace: &str,
    group: &str,
    service: &str,
    cluster: &str,
    ip: IpAddr,
    port: u16,
) -> [String; 5] {
    let mut labels: [String; 5] = Default::default();
    encode_instance(ip, port, &mut labels[0]);
    encode_label(cluster, DEFAULT_CLUSTER, &mut labels[1]);
    // The service has no default: `_` would read as no service.
    encode_label(service, "\0", &mut labels[2]);
    encode_label(group, DEFAULT_GROUP, &mut labels[3]);
    encode_label(namespace, DEFAULT_NAMESPACE, &mut labels[4]);
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(name: &str) -> Option<(Target, Option<Parent>)> {
        let labels: Vec<&[u8]> = if name.is_empty() {
            Vec::new()
        } else {
            name.split('.').map(str::as_bytes).collect()
        };
        parse(&labels)
    }

    fn service(ns: &str, g: &str, s: &str, c: Option<&str>) -> Target {
        Target::Service(ServiceName {
            namespace: ns.into(),
            group: g.into(),
            service: s.into(),
            cluster: c.map(Into::into),
        })
    }

    #[test]
    fn every_name_form_reads_back() {
        let (t, p) = parse_str("orders").unwrap();
        assert_eq!(t, service("public", "DEFAULT_GROUP", "orders", None));
        assert_eq!(p.unwrap().namespace, "orders");
        let (t, p) = parse_str("east.orders").unwrap();
        assert_eq!(
            t,
            service("public", "DEFAULT_GROUP", "orders", Some("east"))
        );
        assert_eq!(
            p,
            Some(Parent {
                namespace: "orders".into(),
                group: Some("east".into())
            })
        );
        assert_eq!(
            parse_str("orders.shop.dev").unwrap().0,
            service("dev", "shop", "orders", None)
        );
        assert_eq!(
            parse_str("_.orders._._").unwrap().0,
            service("public", "DEFAULT_GROUP", "orders", Some("DEFAULT"))
        );
        assert_eq!(
            parse_str("7f000001-8080.a.orders.shop.dev").unwrap().0,
            Target::Instance(
                ServiceName {
                    namespace: "dev".into(),
                    group: "shop".into(),
                    service: "orders".into(),
                    cluster: Some("a".into())
                },
                "127.0.0.1".parse().unwrap(),
                8080
            )
        );
        assert_eq!(parse_str("").unwrap().0, Target::Apex);
        assert!(parse_str("a.b.c.d.e.f").is_none());
    }

    #[test]
    fn the_escape_round_trips_and_ignores_case() {
        for name in [
            "DEFAULT_GROUP",
            "a.b",
            "Orders",
            "providers:com.x.Api:1.0:",
            "x@@y",
            "ü",
        ] {
            let mut label = String::new();
            encode_label(name, "", &mut label);
            assert!(label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'));
            assert_eq!(
                decode_label(label.as_bytes()),
                Some(Label::Text(name.into()))
            );
            let upper = label.to_ascii_uppercase();
            assert_eq!(
                decode_label(upper.as_bytes()),
                Some(Label::Text(name.into()))
            );
        }
        assert_eq!(decode_label(b"a_4"), None);
        assert_eq!(decode_label(b"a_zz"), None);
        assert_eq!(decode_label(b"_ff"), None, "not UTF-8");
        assert_eq!(decode_label(b"a*b"), None);
    }

    #[test]
    fn instance_labels_name_the_instance() {
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        let labels = instance_labels("public", "DEFAULT_GROUP", "Orders", "DEFAULT", v6, 53);
        let refs: Vec<&[u8]> = labels.iter().map(|l| l.as_bytes()).collect();
        match parse(&refs).unwrap().0 {
            Target::Instance(s, ip, port) => {
                assert_eq!(
                    (s.service.as_str(), s.cluster.as_deref()),
                    ("Orders", Some("DEFAULT"))
                );
                assert_eq!((ip, port), (v6, 53));
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&[b"7f00001-80", b"a", b"b", b"c", b"d"]).is_none());
        assert!(parse(&[b"7f000001-99999", b"a", b"b", b"c", b"d"]).is_none());
    }

    #[test]
    fn a_default_label_in_the_service_place_is_a_parent() {
        let (t, _) = parse_str("_").unwrap();
        assert_eq!(
            t,
            Target::Parent(Parent {
                namespace: "public".into(),
                group: None
            })
        );
    }
}
