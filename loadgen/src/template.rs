//! Request templates: the whole bytes of each instance request kind (register,
//! deregister, light beat) and of a query, built once per worker by the real
//! builders (`registry_proto::naming::client` and `http1::write_request`), with
//! holes where the service number and the instance IP go.
//!
//! Why: at 3× `nacos-1x-report` one loadgen core must issue ~700k requests/s, and
//! building each request from its parameters (formatting the name and IP, then
//! percent-encoding every key and value, then framing) was the largest share of
//! loadgen's CPU. Only the service number and the IP differ between two beats of a
//! run; everything else (method, path, the encoded group, prefix, namespace and
//! cluster, port, headers) is the same bytes every time.
//!
//! How the holes are found: the template is built with markers in place of the
//! number and the IP. Markers, digits and dots are all unreserved characters, which
//! the percent-encoder copies as they are, so the marker appears verbatim in the
//! built request, and replacing it with digits gives what the builder gives for
//! those digits. A template is used only when each marker occurs exactly once (a
//! profile whose names happen to contain a marker gets no template, and its requests
//! are built the slow way); the property test in this module holds the template's
//! bytes to the builders' for arbitrary names, numbers and addresses.

use std::net::Ipv4Addr;

use registry_proto::http1::{write_request, Method};
use registry_proto::naming::client::{InstanceSpec, ListSpec};
use registry_proto::naming::ServiceName;

use crate::dialect::Dialect;
use crate::fleet::Naming;

/// Stands for the service number inside the service name `prefix-N`.
const SERVICE_MARK: &str = "~svc~";
/// Stands for the instance IP.
const IP_MARK: &str = "~ip~";

/// What fills a hole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hole {
    Service,
    Ip,
}

/// One request kind's bytes: fixed pieces with a hole after each but the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Box<[u8]>>,
    holes: Vec<Hole>,
}

impl Template {
    /// Cuts `built` at the markers it must hold exactly once each (`ip`: whether
    /// the IP marker is one of them). `None` when a marker is missing or repeated.
    fn cut(built: &[u8], ip: bool) -> Option<Template> {
        let mut marks: Vec<(usize, usize, Hole)> = Vec::with_capacity(2);
        let mut find = |mark: &str, hole: Hole| -> Option<()> {
            let mut at = occurrences(built, mark.as_bytes());
            let first = at.next()?;
            if at.next().is_some() {
                return None;
            }
            marks.push((first, mark.len(), hole));
            Some(())
        };
        find(SERVICE_MARK, Hole::Service)?;
        if ip {
            find(IP_MARK, Hole::Ip)?;
        } else if occurrences(built, IP_MARK.as_bytes()).next().is_some() {
            return None;
        }
        marks.sort_unstable_by_key(|m| m.0);
        let mut pieces = Vec::with_capacity(marks.len() + 1);
        let mut holes = Vec::with_capacity(marks.len());
        let mut from = 0;
        for (at, len, hole) in marks {
            if at < from {
                return None; // overlapping markers: the cut would be ambiguous
            }
            pieces.push(built[from..at].into());
            holes.push(hole);
            from = at + len;
        }
        pieces.push(built[from..].into());
        Some(Template { pieces, holes })
    }

    /// Appends the request for service number `service` and instance address `ip`
    /// (ignored by a template without an IP hole).
    pub fn write(&self, out: &mut Vec<u8>, service: u32, ip: Ipv4Addr) {
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(&self.pieces[0]);
        for (hole, piece) in self.holes.iter().zip(&self.pieces[1..]) {
            match hole {
                Hole::Service => out.extend_from_slice(digits.format(service).as_bytes()),
                Hole::Ip => write_ip(out, ip),
            }
            out.extend_from_slice(piece);
        }
    }
}

/// Where `needle` starts in `hay`, overlapping occurrences included.
fn occurrences<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| *w == needle)
        .map(|(i, _)| i)
}

/// Dotted-quad text, as `Ipv4Addr`'s `Display` writes it.
fn write_ip(out: &mut Vec<u8>, ip: Ipv4Addr) {
    let mut digits = itoa::Buffer::new();
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push(b'.');
        }
        out.extend_from_slice(digits.format(octet).as_bytes());
    }
}

/// The templates of one worker's requests; `None` where the slow builder is used.
#[derive(Debug, Clone, Default)]
pub struct Templates {
    /// `POST` register (also a re-registration).
    pub register: Option<Template>,
    /// `DELETE` deregister.
    pub deregister: Option<Template>,
    /// `PUT` light beat.
    pub beat_light: Option<Template>,
    /// `GET` list without subscription (a query).
    pub query: Option<Template>,
}

impl Templates {
    /// Builds every template for `naming`'s names, the `Host` header `host`, in
    /// `dialect`.
    pub fn new(naming: &Naming, host: &str, dialect: Dialect) -> Templates {
        let name = format!("{}-{SERVICE_MARK}", naming.prefix);
        let spec = InstanceSpec {
            namespace_id: &naming.namespace,
            cluster: &naming.cluster,
            ..InstanceSpec::new(ServiceName::new(&naming.group, &name), IP_MARK, naming.port)
        };
        let instance = |build: fn(Dialect, &mut String, &InstanceSpec<'_>) -> Method| {
            let mut path = String::new();
            let method = build(dialect, &mut path, &spec);
            let mut out = Vec::new();
            write_request(&mut out, method, &path, host, None);
            Template::cut(&out, true)
        };
        let mut path = String::new();
        dialect.list(&mut path, &query_spec(naming, &name), &naming.cluster);
        let mut query = Vec::new();
        write_request(&mut query, Method::Get, &path, host, None);
        Templates {
            register: instance(Dialect::register),
            deregister: instance(Dialect::deregister),
            beat_light: instance(Dialect::beat),
            query: Template::cut(&query, false),
        }
    }
}

/// The list call a query makes for the service named `name`.
pub fn query_spec<'a>(naming: &'a Naming, name: &'a str) -> ListSpec<'a> {
    ListSpec {
        namespace_id: &naming.namespace,
        service: ServiceName::new(&naming.group, name),
        clusters: "",
        healthy_only: false,
        udp_port: 0,
        client_ip: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::Segment;
    use proptest::prelude::*;

    fn naming(namespace: &str, group: &str, prefix: &str, cluster: &str, port: u16) -> Naming {
        Naming {
            namespace: namespace.into(),
            group: group.into(),
            prefix: prefix.into(),
            cluster: cluster.into(),
            services: 10,
            watched: 0,
            port,
            segment: Segment::WHOLE,
        }
    }

    /// What the worker's slow path writes for one request.
    fn built(
        n: &Naming,
        host: &str,
        kind: usize,
        service: u32,
        ip: Ipv4Addr,
        d: Dialect,
    ) -> Vec<u8> {
        let name = format!("{}-{service}", n.prefix);
        let ip = ip.to_string();
        let spec = InstanceSpec {
            namespace_id: &n.namespace,
            cluster: &n.cluster,
            ..InstanceSpec::new(ServiceName::new(&n.group, &name), &ip, n.port)
        };
        let mut path = String::new();
        let method = match kind {
            0 => d.register(&mut path, &spec),
            1 => d.deregister(&mut path, &spec),
            2 => d.beat(&mut path, &spec),
            _ => {
                d.list(&mut path, &query_spec(n, &name), &n.cluster);
                Method::Get
            }
        };
        let mut out = Vec::new();
        write_request(&mut out, method, &path, host, None);
        out
    }

    fn pick(t: &Templates, kind: usize) -> Option<&Template> {
        [&t.register, &t.deregister, &t.beat_light, &t.query][kind.min(3)].as_ref()
    }

    #[test]
    fn the_default_names_get_every_template_and_match_the_builders() {
        let n = naming("public", "DEFAULT_GROUP", "svc", "DEFAULT", 8080);
        let t = Templates::new(&n, "127.0.0.1:8848", Dialect::V1);
        for kind in 0..4 {
            let tpl = pick(&t, kind).expect("a template for the default names");
            for (s, ip) in [
                (0, Ipv4Addr::new(10, 0, 0, 0)),
                (599_999, Ipv4Addr::new(10, 16, 201, 255)),
                (u32::MAX, Ipv4Addr::new(255, 255, 255, 255)),
            ] {
                let mut out = b"left".to_vec();
                tpl.write(&mut out, s, ip);
                let mut want = b"left".to_vec();
                want.extend(built(&n, "127.0.0.1:8848", kind, s, ip, Dialect::V1));
                assert_eq!(
                    String::from_utf8_lossy(&out),
                    String::from_utf8_lossy(&want),
                    "kind {kind}"
                );
            }
        }
        let mut beat = Vec::new();
        t.beat_light
            .as_ref()
            .unwrap()
            .write(&mut beat, 7, Ipv4Addr::new(10, 0, 0, 9));
        assert!(beat
            .starts_with(b"PUT /nacos/v1/ns/instance/beat?serviceName=DEFAULT_GROUP%40%40svc-7&"));
    }

    #[test]
    fn a_marker_inside_a_name_leaves_the_slow_path() {
        let n = naming("public", "g", &format!("a{SERVICE_MARK}"), "DEFAULT", 1);
        let t = Templates::new(&n, "h", Dialect::V1);
        assert!(t.beat_light.is_none() && t.query.is_none());
        let n = naming(IP_MARK, "g", "p", "DEFAULT", 1);
        let t = Templates::new(&n, "h", Dialect::V1);
        assert!(t.register.is_none() && t.query.is_none(), "{t:?}");
    }

    fn text() -> impl Strategy<Value = String> {
        // Names with characters that need escaping, the markers' own characters
        // and multi-byte UTF-8, so a template that is made must still be exact.
        proptest::string::string_regex("[a-zA-Z0-9._~@%&=+ /é\u{1F600}svcip-]{0,12}").unwrap()
    }

    proptest! {
        #[test]
        fn a_template_writes_what_the_builders_write(
            namespace in text(),
            group in text(),
            prefix in text(),
            cluster in text(),
            host in text(),
            port in any::<u16>(),
            service in any::<u32>(),
            ip in any::<u32>(),
            kind in 0usize..4,
            v3 in any::<bool>(),
        ) {
            let d = if v3 { Dialect::V3 } else { Dialect::V1 };
            let n = naming(&namespace, &group, &prefix, &cluster, port);
            let t = Templates::new(&n, &host, d);
            let ip = Ipv4Addr::from(ip);
            if let Some(tpl) = pick(&t, kind) {
                let mut out = Vec::new();
                tpl.write(&mut out, service, ip);
                prop_assert_eq!(out, built(&n, &host, kind, service, ip, d));
            }
        }
    }
}
