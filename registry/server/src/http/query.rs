//! The read queries of the v2/v3 doors and the v1 catalog, typed: each
//! door parses its form into a query here and renders the rows it gets.
//!
//! Two selections of a service's instances exist in Nacos, and a door
//! picks one:
//! - [`Selection::Client`]: what a client may call (v2 list, v3 client
//!   list): enabled instances only, the protect threshold applied (every
//!   instance reported healthy when the healthy share falls to it);
//! - [`Selection::Admin`]: what an operator sees (v3 admin list, catalog):
//!   every instance as it is, `healthyOnly` on the real health.

use std::sync::Arc;

use registry_core::{Instance, ServiceKey, ServiceRef, ServiceSnapshot, View};
use registry_proto::naming::list::HeartbeatTimes;
use registry_proto::naming::ServiceName;
use registry_proto::openapi::instance::{self as instance_body, InstanceView, ServiceInfoView};

use crate::convert::MetadataJson;
use crate::state::App;

/// Which of Nacos's two selections (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Selection {
    /// Enabled only, protect threshold applied.
    Client,
    /// Every instance as it is.
    Admin,
}

/// The instances a query selected, with the snapshot they borrow from.
pub(crate) struct Rows {
    /// The service's snapshot; `None` when it does not exist.
    pub snapshot: Option<Arc<ServiceSnapshot>>,
}

impl Rows {
    /// The client selection with its protect-threshold flag.
    pub fn client_list(&self, clusters: &[&str], healthy_only: bool) -> ClientList<'_> {
        let Some(s) = &self.snapshot else {
            return ClientList {
                rows: Vec::new(),
                reach_protection_threshold: false,
            };
        };
        let selected = s.select(&View {
            clusters,
            healthy_only,
        });
        ClientList {
            rows: selected.hosts,
            reach_protection_threshold: selected.reach_protection_threshold,
        }
    }

    /// The rows: each instance with the health it is reported with.
    pub fn each(
        &self,
        clusters: &[&str],
        healthy_only: bool,
        selection: Selection,
    ) -> Vec<(&Instance, bool)> {
        let Some(s) = &self.snapshot else {
            return Vec::new();
        };
        match selection {
            Selection::Client => self.client_list(clusters, healthy_only).rows,
            Selection::Admin => s
                .instances()
                .iter()
                .filter(|i| clusters.is_empty() || clusters.contains(&&*i.cluster))
                .filter(|i| i.healthy || !healthy_only)
                .map(|i| (i, i.healthy))
                .collect(),
        }
    }
}

/// The snapshot of `namespace`'s `grouped` service.
pub(crate) fn service(app: &App, namespace: &str, grouped: &str) -> Rows {
    let snapshot = app.store.snapshot(ServiceRef::new(namespace, grouped));
    Rows { snapshot }
}

/// An instance as the v2/v3 `Instance` body, borrowing `ip` from `ips`.
pub(crate) fn view<'a>(
    i: &'a Instance,
    healthy: bool,
    ip: &'a str,
    service: ServiceName<'a>,
) -> InstanceView<'a, MetadataJson<'a>> {
    InstanceView {
        ip,
        port: i.port,
        weight: i.weight,
        healthy,
        enabled: i.enabled,
        ephemeral: i.ephemeral,
        cluster_name: &i.cluster,
        service,
        metadata: MetadataJson(&i.metadata),
        heartbeat: HeartbeatTimes {
            interval_ms: u64::from(i.timeouts.beat_interval_ms),
            timeout_ms: u64::from(i.timeouts.beat_timeout_ms),
            delete_timeout_ms: u64::from(i.timeouts.delete_timeout_ms),
        },
        id_generator: instance_body::id_generator(
            i.metadata.is_empty(),
            i.metadata.get(instance_body::ID_GENERATOR_KEY),
        ),
    }
}

/// What a client's list shows of a service: [`Selection::Client`]'s rows
/// and whether the protect threshold was reached.
pub(crate) struct ClientList<'a> {
    /// The selected instances with the health they are reported with.
    pub rows: Vec<(&'a Instance, bool)>,
    /// `reachProtectionThreshold`.
    pub reach_protection_threshold: bool,
}

/// Appends `list` as Nacos 3's `ServiceInfo` (the v2 list's data).
pub(crate) fn encode_service_info(
    list: &ClientList<'_>,
    service: ServiceName<'_>,
    clusters: &str,
    out: &mut Vec<u8>,
) {
    let ips = ips_of(&list.rows);
    let hosts = views(&list.rows, &ips, service);
    let info = ServiceInfoView {
        service,
        clusters,
        // The switch `defaultPushCacheMillis` (`SwitchDomain`), which
        // `ServiceStorage` copies into every ServiceInfo.
        cache_millis: 10_000,
        hosts: &hosts,
        last_ref_time: crate::clock::Clock::wall_ms(),
        reach_protection_threshold: list.reach_protection_threshold,
    };
    instance_body::encode_instance(out, &info);
}

/// Appends `rows` as a JSON array of `Instance` bodies.
pub(crate) fn encode_rows(rows: &[(&Instance, bool)], service: ServiceName<'_>, out: &mut Vec<u8>) {
    let ips = ips_of(rows);
    registry_proto::openapi::instance::encode_instances(out, &views(rows, &ips, service));
}

/// The rows' addresses as text, which their views borrow.
fn ips_of(rows: &[(&Instance, bool)]) -> Vec<String> {
    rows.iter().map(|(i, _)| i.ip.to_string()).collect()
}

/// The rows as `Instance` bodies, their `ip` borrowed from `ips`.
fn views<'a>(
    rows: &[(&'a Instance, bool)],
    ips: &'a [String],
    service: ServiceName<'a>,
) -> Vec<InstanceView<'a, MetadataJson<'a>>> {
    rows.iter()
        .zip(ips)
        .map(|((i, h), ip)| view(i, *h, ip, service))
        .collect()
}

/// A service's name split back into group and name.
pub(crate) fn split_grouped(grouped: &str) -> (&str, &str) {
    grouped
        .split_once(registry_proto::naming::GROUP_SEPARATOR)
        .unwrap_or((registry_proto::naming::DEFAULT_GROUP, grouped))
}

/// One service's counts for a list page (`ServiceView`).
pub(crate) struct Counts {
    /// Distinct clusters.
    pub clusters: usize,
    /// Instances.
    pub instances: usize,
    /// Healthy instances.
    pub healthy: usize,
    /// Whether the protect threshold is reached.
    pub trigger: bool,
}

/// The counts of `key`'s service (zeros when it vanished meanwhile).
pub(crate) fn counts(app: &App, key: &ServiceKey) -> Counts {
    let Some(s) = app.store.snapshot(key.as_ref()) else {
        return Counts {
            clusters: 0,
            instances: 0,
            healthy: 0,
            trigger: false,
        };
    };
    let instances = s.instances().len();
    let healthy = s.instances().iter().filter(|i| i.healthy).count();
    let trigger =
        instances > 0 && (healthy as f64 / instances as f64) <= f64::from(s.protect_threshold());
    Counts {
        clusters: s.cluster_names().len(),
        instances,
        healthy,
        trigger,
    }
}

/// The services of `namespace` whose group contains `group` and name
/// contains `name` (empty: any), sorted; without empty ones when
/// `ignore_empty`. A scan of the namespace's index: admin pages only.
pub(crate) fn search(
    app: &App,
    namespace: &str,
    group: &str,
    name: &str,
    ignore_empty: bool,
) -> Vec<ServiceKey> {
    let mut found = Vec::new();
    app.store.scan_services(namespace, |k| {
        let (g, n) = split_grouped(k.grouped_name());
        if g.contains(group) && n.contains(name) {
            found.push(k.clone());
        }
        true
    });
    if ignore_empty {
        found.retain(|k| {
            app.store
                .snapshot(k.as_ref())
                .is_some_and(|s| !s.instances().is_empty())
        });
    }
    found
}
