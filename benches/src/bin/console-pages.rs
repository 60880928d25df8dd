//! Times the web console's pages and JSON endpoints against a registry
//! holding Nacos's capacity profile (600k services, 1.1M instances by
//! default), through real HTTP on loopback, and prints one JSON line per
//! endpoint: `median_ms`, `p90_ms`, `max_ms` over `--rounds` requests on
//! one keep-alive connection.
//!
//! `cargo run --release -p benches --bin console-pages -- --services 600000 --instances 1100000`

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use benches::profile;
use registry_core::Millis;
use registry_proto::http1::{parse_response, write_request, Method};
use registry_server::{Config, Embedded};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn arg(args: &[String], name: &str, default: usize) -> usize {
    match args.iter().position(|a| a == name) {
        None => default,
        Some(i) => match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(v) => v,
            None => {
                eprintln!("console-pages: {name} needs a number\nusage: console-pages [--services N] [--instances N] [--rounds N]");
                std::process::exit(2);
            }
        },
    }
}

/// One GET on a kept-alive connection; returns the status, body length
/// and time to the complete response.
fn get(conn: &mut TcpStream, host: &str, target: &str) -> (u16, usize, Duration) {
    let mut out = Vec::new();
    write_request(&mut out, Method::Get, target, host, None);
    let started = Instant::now();
    conn.write_all(&out).expect("write");
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        if let Ok(Some((r, _))) = parse_response(&buf) {
            return (r.status, r.body.len(), started.elapsed());
        }
        let n = conn.read(&mut chunk).expect("read");
        assert!(n > 0, "server closed the connection on {target}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The console's endpoints timed, each with a target that makes it work
/// at this size (the last service, a deep page, an IP in the middle).
fn endpoints(names: &[String], services: usize, instances: usize) -> Vec<(&'static str, String)> {
    let last = &names[services - 1];
    let (_, last_name) = last.split_once("@@").expect("grouped fixture name");
    let probe_ip = profile::instance_ip(instances / 2);
    let deep_page = (services / 10 / 2).max(1);
    vec![
        ("page /nacos/", "/nacos/".to_string()),
        (
            "services page 1",
            "/nacos/v1/ns/catalog/services?pageNo=1&pageSize=10".to_string(),
        ),
        (
            "services page 1, 100 rows",
            "/nacos/v1/ns/catalog/services?pageNo=1&pageSize=100".to_string(),
        ),
        (
            "services deep page",
            format!("/nacos/v1/ns/catalog/services?pageNo={deep_page}&pageSize=10"),
        ),
        (
            "services search name",
            format!("/nacos/v1/ns/catalog/services?serviceNameParam={last_name}"),
        ),
        (
            "services search group",
            "/nacos/v1/ns/catalog/services?groupNameParam=DEFAULT".to_string(),
        ),
        (
            "service detail",
            format!("/nacos/v1/ns/catalog/service?serviceName={last_name}"),
        ),
        (
            "service instances",
            format!("/nacos/v1/ns/catalog/instances?serviceName={last_name}"),
        ),
        (
            "service subscribers",
            format!("/nacos/v1/ns/service/subscribers?serviceName={last_name}"),
        ),
        ("namespaces", "/nacos/v1/console/namespaces".to_string()),
        (
            "instances of an IP",
            format!("/nacos/v1/console/instances?ip={probe_ip}"),
        ),
        ("server state", "/nacos/v1/console/server/state".to_string()),
        ("metrics (live view)", "/metrics".to_string()),
    ]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let services = arg(&args, "--services", 600_000);
    let instances = arg(&args, "--instances", 1_100_000).max(services);
    let rounds = arg(&args, "--rounds", 20).max(1);

    let mut config = Config::for_test();
    config.workers = 1;
    config.shards = 64;
    // Nothing beats here: keep the fleet healthy and in place while timing.
    config.beat_timeout_ms = 3_600_000;
    config.delete_timeout_ms = 3_600_000;
    config.max_services = config.max_services.max(services);
    let registry = Embedded::start(config).expect("registry starts");
    let filled = Instant::now();
    let names = profile::populate(&registry.app.store, services, instances, Millis(0));
    eprintln!(
        "filled {services} services, {instances} instances in {:.1} s",
        filled.elapsed().as_secs_f64()
    );

    let endpoints = endpoints(&names, services, instances);
    let host = registry.http_addr.to_string();
    let mut conn = TcpStream::connect(registry.http_addr).expect("connect");
    conn.set_nodelay(true).expect("nodelay");
    for (name, target) in &endpoints {
        let mut times: Vec<Duration> = Vec::with_capacity(rounds);
        let mut bytes = 0;
        for _ in 0..rounds {
            let (status, len, took) = get(&mut conn, &host, target);
            assert_eq!(status, 200, "{name}: {target}");
            bytes = len;
            times.push(took);
        }
        times.sort();
        let ms = |d: Duration| (d.as_secs_f64() * 1e5).round() / 1e2;
        println!(
            "{}",
            serde_json::json!({
                "endpoint": name,
                "target": target,
                "services": services,
                "instances": instances,
                "rounds": rounds,
                "body_bytes": bytes,
                "median_ms": ms(times[times.len() / 2]),
                "p90_ms": ms(times[(times.len() * 9 / 10).min(times.len() - 1)]),
                "max_ms": ms(times[times.len() - 1]),
            })
        );
    }
    drop(conn);
    registry.stop().expect("registry stops");
}
