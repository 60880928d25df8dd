//! Deterministic fleets shaped like Nacos's capacity profile: realistic
//! service names, one IPv4 address per instance, a few metadata entries
//! drawn from a small set (as deployments share versions and zones).

use std::net::{IpAddr, Ipv4Addr};

use registry_core::{InstanceAddr, InstanceSpec, Metadata, Millis, ServiceRef, Store};

/// Namespace used by every fixture.
pub const NAMESPACE: &str = "public";

/// The grouped name of service `i`, e.g. `DEFAULT_GROUP@@com.example.order.svc000123`.
pub fn service_name(i: usize) -> String {
    let mut name = String::new();
    write_service_name(&mut name, i);
    name
}

/// Writes [`service_name`]`(i)` into `out`, replacing what it held: for
/// loops that must not allocate or read a table of names per operation.
pub fn write_service_name(out: &mut String, i: usize) {
    use std::fmt::Write;
    const DOMAINS: [&str; 6] = ["order", "payment", "user", "inventory", "search", "gateway"];
    out.clear();
    write!(
        out,
        "DEFAULT_GROUP@@com.example.{}.svc{:06}",
        DOMAINS[i % DOMAINS.len()],
        i
    )
    .expect("writing to a String cannot fail");
}

/// The address of instance `j` overall.
pub fn instance_ip(j: usize) -> IpAddr {
    let j = j as u32;
    IpAddr::V4(Ipv4Addr::new(10, (j >> 16) as u8, (j >> 8) as u8, j as u8))
}

/// Metadata of instance `j`: three entries from a small shared set.
pub fn instance_metadata(j: usize) -> Metadata {
    Metadata::from_pairs([
        ("version", format!("1.{}.0", j % 5)),
        ("env", "prod".to_string()),
        ("zone", format!("zone-{}", j % 3)),
    ])
    .expect("fixture metadata is valid")
}

/// Which service instance `j` of `instances` belongs to when spread over
/// `services` services: every service gets one, the rest go round-robin.
pub fn service_of(j: usize, services: usize) -> usize {
    j % services
}

/// Registers `instances` instances over `services` services at time `now`.
/// Returns the service names, indexed by service number.
pub fn populate(store: &Store, services: usize, instances: usize, now: Millis) -> Vec<String> {
    let names: Vec<String> = (0..services).map(service_name).collect();
    let metas: Vec<Metadata> = (0..15).map(instance_metadata).collect();
    for j in 0..instances {
        let svc = service_of(j, services);
        let spec = InstanceSpec {
            metadata: metas[j % metas.len()].clone(),
            ..InstanceSpec::new("DEFAULT", instance_ip(j), 8080)
        };
        store
            .register(ServiceRef::new(NAMESPACE, &names[svc]), &spec, now)
            .expect("fixture registration succeeds");
    }
    names
}

/// The address of instance `j` as a beat names it.
pub fn addr(j: usize) -> InstanceAddr<'static> {
    InstanceAddr {
        cluster: "DEFAULT",
        ip: instance_ip(j),
        port: 8080,
    }
}

/// Fleet sizes to measure: the full ladder under `cargo bench`, the smallest
/// only under `cargo test --benches`, which runs each bench once as a smoke
/// test.
pub fn sizes() -> Vec<usize> {
    if std::env::args().any(|a| a == "--bench") {
        vec![1_000, 100_000, 1_100_000]
    } else {
        vec![1_000]
    }
}

/// Services for a fleet of `instances`, in the capacity profile's ratio
/// (600k services for 1.1M instances).
pub fn services_for(instances: usize) -> usize {
    (instances * 6 / 11).max(1)
}
