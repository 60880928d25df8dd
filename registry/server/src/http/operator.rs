//! `/operator/metrics`, `/operator/switches` and the Prometheus `/metrics`.

use registry_proto::naming::operator::{Metrics, ServerStatus, Switches};
use registry_proto::openapi::admin::{only_status, HostLoad, MetricsCounts, MetricsInfo};

use super::error::Failure;
use super::{Exchange, Reply, Scratch};
use crate::metrics::StoreGauges;
use registry_proto::prometheus::Exposition;

/// `GET /operator/metrics`: the 1.4 shape; clients check `status == "UP"`.
pub(crate) fn metrics(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let stats = ex.app.store.stats();
    let subscribers = ex.app.metrics.push.subscribers.get();
    let m = Metrics {
        status: ServerStatus::Up,
        service_count: stats.services as u64,
        instance_count: stats.instances as u64,
        subscribe_count: subscribers,
        raft_notify_task_count: 0,
        responsible_service_count: stats.services as u64,
        responsible_instance_count: stats.instances as u64,
        cpu: 0.0,
        load: load_average(),
        mem: memory_used_fraction(),
    };
    m.encode(&mut scratch.body);
    Ok(Reply::Json)
}

/// v2/v3 `GET /ops/metrics` (`OperatorControllerV2/V3.metrics`, filled by
/// `OperatorV2Impl.metrics`): the status alone unless `onlyStatus=false`,
/// then the counts with the clients of both kinds (see `ip_port_clients`);
/// v2 adds the host figures. The body goes in the envelope.
pub(crate) fn metrics_v2_v3(ex: &Exchange<'_>, scratch: &mut Scratch, v2: bool) {
    let mut info = MetricsInfo {
        status: "UP",
        counts: None,
        host: None,
    };
    if !only_status(&ex.params) {
        info.counts = Some(client_counts(ex.app));
        info.host = v2.then(|| HostLoad {
            cpu: 0.0,
            load: load_average(),
            mem: memory_used_fraction(),
        });
    }
    info.encode(&mut scratch.body);
}

/// The counts of a full v2/v3 metrics answer. A connection client is this
/// node's responsibility when it is native (`ConnectionBasedClient.isNative`);
/// an address client when Distro maps its `ip:port` here.
fn client_counts(app: &crate::state::App) -> MetricsCounts {
    let stats = app.store.stats();
    let (native, synced) = match &app.cluster {
        Some(c) => c.connection_counts(),
        None => (app.grpc.hub.len(), 0),
    };
    let addresses = crate::ip_port_clients::address_clients(app);
    let ephemeral = addresses.iter().filter(|c| c.ephemeral).count();
    let responsible_addresses = match &app.cluster {
        Some(c) => addresses
            .iter()
            .filter(|a| {
                let tag = a.id.split(crate::ip_port_clients::ID_DELIMITER).next();
                tag.is_some_and(|t| c.responsible_for(t) == c.me())
            })
            .count(),
        None => addresses.len(),
    };
    let n = |v: usize| v as u64;
    MetricsCounts {
        service_count: n(stats.services),
        instance_count: n(stats.instances),
        subscribe_count: app.metrics.push.subscribers.get(),
        client_count: n(native + synced + addresses.len()),
        connection_based_client_count: n(native + synced),
        ephemeral_ip_port_client_count: n(ephemeral),
        persistent_ip_port_client_count: n(addresses.len() - ephemeral),
        responsible_client_count: n(native + responsible_addresses),
    }
}

/// `GET /operator/switches`: the switch values this server runs with.
pub(crate) fn switches(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    current_switches(ex.app).encode(&mut scratch.body);
    Ok(Reply::Json)
}

/// v2/v3 `GET /ops/switches`: the same values under 2.x/3.x's names.
pub(crate) fn switches_3x(ex: &Exchange<'_>, scratch: &mut Scratch) {
    current_switches(ex.app).encode_3x(&mut scratch.body);
}

/// The switch values this server runs with (fixed by its configuration).
pub(crate) fn current_switches(app: &crate::state::App) -> Switches {
    Switches {
        client_beat_interval: u64::from(app.config.beat_interval_ms),
        default_push_cache_millis: crate::notifier::PUSH_CACHE_MILLIS,
        ..Switches::default()
    }
}

/// Why a switch update was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SwitchRefusal {
    /// A value Nacos's `SwitchManager.update` refuses (an
    /// `IllegalArgumentException`: 500 / 30000 on v2/v3).
    Invalid(String),
    /// An entry Nacos does not have, or one fixed by our configuration.
    Refused(String),
}

impl SwitchRefusal {
    /// The text.
    pub(crate) fn text(self) -> String {
        match self {
            SwitchRefusal::Invalid(t) | SwitchRefusal::Refused(t) => t,
        }
    }
}

/// `PUT /operator/switches` (Nacos `OperatorController.updateSwitch`):
/// `entry`*, `value`*. Our switches are fixed by the configuration, so a
/// value equal to the current one is accepted (`ok`, nothing changes) and
/// any other is refused saying so; an entry Nacos does not have is
/// `update entry not found: <entry>`. The push versions answer to their
/// 1.x and their 2.x/3.x names.
pub(crate) fn update_switch(
    app: &crate::state::App,
    entry: &str,
    value: &str,
) -> Result<(), SwitchRefusal> {
    // SwitchManager.update checks the value before anything else.
    if entry == "distroThreshold" && value.parse::<f32>().is_ok_and(|t| t <= 0.0) {
        return Err(SwitchRefusal::Invalid(format!(
            "distroThreshold can not be zero or negative: {value}"
        )));
    }
    let current = serde_json::to_value(current_switches(app)).unwrap_or_default();
    let field = registry_proto::naming::operator::PUSH_VERSION_NAMES
        .iter()
        .find(|(_, new)| *new == entry)
        .map_or(entry, |(old, _)| old);
    let Some(now) = current.get(field) else {
        return Err(SwitchRefusal::Refused(format!(
            "update entry not found: {entry}"
        )));
    };
    let same = match now {
        serde_json::Value::String(s) => s == value,
        serde_json::Value::Bool(b) => value.eq_ignore_ascii_case(if *b { "true" } else { "false" }),
        serde_json::Value::Number(n) => value.parse::<f64>().ok() == n.as_f64(),
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(SwitchRefusal::Refused(format!(
            "switch {entry} is fixed by this server's configuration at {now}; restart with other flags to change it"
        )))
    }
}

/// `GET /metrics`: Prometheus text, every part of the server's families in
/// one exposition.
pub(crate) fn prometheus(ex: &Exchange<'_>, scratch: &mut Scratch) -> Result<Reply, Failure> {
    let app = ex.app;
    let stats = app.store.stats();
    let e = &mut Exposition::new(&mut scratch.body);
    let gauges = StoreGauges {
        services: stats.services,
        instances: stats.instances,
    };
    app.metrics.render(&gauges, e);
    if let Some(p) = &app.persist {
        p.stats.render(e);
    }
    app.health_stats.render(e);
    app.buffers.render(e);
    app.door_metrics.render(e);
    let parts = crate::footprint::Parts {
        store: stats,
        list_cache: app.lists.bytes(),
        read_buffers: app.buffers.used(),
    };
    crate::footprint::render(&parts, e);
    if let Some(a) = &app.auth {
        a.stats.render(e);
    }
    if let Some(c) = &app.cluster {
        c.render(e);
    }
    Ok(Reply::Prometheus)
}

fn load_average() -> f32 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

fn memory_used_fraction() -> f32 {
    let Ok(info) = std::fs::read_to_string("/proc/meminfo") else {
        return 0.0;
    };
    let field = |name: &str| -> Option<f64> {
        let line = info.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    match (field("MemTotal:"), field("MemAvailable:")) {
        (Some(total), Some(avail)) if total > 0.0 => (1.0 - avail / total) as f32,
        _ => 0.0,
    }
}
