//! Unit tests of the store's operations, driven with explicit time.

use std::net::IpAddr;

use super::*;
use crate::metadata::Metadata;
use crate::model::{preserved, InstanceAddr, InstancePatch, ServiceSpec};
use crate::snapshot::View;

const NS: &str = "public";
const SVC: &str = "DEFAULT_GROUP@@demo";

fn svc() -> ServiceRef<'static> {
    ServiceRef::new(NS, SVC)
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn addr(port: u16) -> InstanceAddr<'static> {
    InstanceAddr {
        cluster: "DEFAULT",
        ip: ip("10.0.0.1"),
        port,
    }
}

fn spec(port: u16) -> InstanceSpec<'static> {
    InstanceSpec::new("DEFAULT", ip("10.0.0.1"), port)
}

fn store() -> Store {
    Store::new(StoreConfig {
        shards: 4,
        ..StoreConfig::default()
    })
}

fn ports(s: &Store) -> Vec<u16> {
    s.snapshot(svc())
        .map(|s| s.instances().iter().map(|i| i.port).collect())
        .unwrap_or_default()
}

#[test]
fn register_creates_service_and_is_visible() {
    let s = store();
    let w = s.register(svc(), &spec(80), Millis(0)).unwrap();
    let ev = w.event.expect("visible change");
    assert_eq!(ev.service.grouped_name(), SVC);
    assert_eq!(ev.revision, w.revision);
    let snap = s.snapshot(svc()).unwrap();
    assert_eq!(snap.revision(), w.revision);
    assert_eq!(ports(&s), vec![80]);
    assert_eq!(s.stats().services, 1);
    assert_eq!(s.stats().instances, 1);
}

#[test]
fn identical_reregistration_is_a_no_op() {
    let s = store();
    let first = s.register(svc(), &spec(80), Millis(0)).unwrap();
    let again = s.register(svc(), &spec(80), Millis(10)).unwrap();
    assert_eq!(again.event, None);
    assert_eq!(again.revision, first.revision);
    let mut heavier = spec(80);
    heavier.weight = 2.0;
    let changed = s.register(svc(), &heavier, Millis(20)).unwrap();
    assert!(changed.revision > first.revision);
    assert_eq!(s.stats().instances, 1);
    assert_eq!(s.snapshot(svc()).unwrap().instances()[0].weight, 2.0);
}

#[test]
fn revisions_only_grow_even_across_delete_and_recreate() {
    let s = store();
    let mut last = 0;
    for round in 0..3u16 {
        for p in 0..5 {
            let w = s.register(svc(), &spec(p + round * 10), Millis(0)).unwrap();
            assert!(w.revision > last);
            last = w.revision;
        }
        let w = s.delete_service(svc()).unwrap();
        assert!(w.revision > last);
        last = w.revision;
        assert!(s.snapshot(svc()).is_none());
    }
}

#[test]
fn update_requires_existing_service_and_instance() {
    let s = store();
    assert_eq!(
        s.update(svc(), &spec(80), Millis(0)),
        Err(RegistryError::ServiceNotFound)
    );
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    assert_eq!(
        s.update(svc(), &spec(81), Millis(0)),
        Err(RegistryError::InstanceNotFound)
    );
    let mut disabled = spec(80);
    disabled.enabled = false;
    assert!(s
        .update(svc(), &disabled, Millis(0))
        .unwrap()
        .event
        .is_some());
    assert!(!s.snapshot(svc()).unwrap().instances()[0].enabled);
}

#[test]
fn deregister_of_missing_things_is_ok_without_event() {
    let s = store();
    assert_eq!(
        s.deregister(svc(), addr(80), true, Millis(0))
            .unwrap()
            .event,
        None
    );
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    assert_eq!(
        s.deregister(svc(), addr(81), true, Millis(0))
            .unwrap()
            .event,
        None
    );
    assert!(s
        .deregister(svc(), addr(80), true, Millis(0))
        .unwrap()
        .event
        .is_some());
    assert_eq!(ports(&s), Vec::<u16>::new());
    assert_eq!(s.stats().instances, 0);
}

#[test]
fn ephemeral_and_persistent_are_kept_apart() {
    let s = store();
    let mut persistent = spec(80);
    persistent.ephemeral = false;
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    s.register(svc(), &persistent, Millis(0)).unwrap();
    assert_eq!(ports(&s), vec![80, 80]);
    s.deregister(svc(), addr(80), true, Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    assert_eq!(snap.instances().len(), 1);
    assert!(!snap.instances()[0].ephemeral);
}

#[test]
fn patch_changes_only_given_fields() {
    let s = store();
    let mut sp = spec(80);
    sp.metadata = Metadata::from_pairs([("a", "1")]).unwrap();
    s.register(svc(), &sp, Millis(0)).unwrap();
    let p = InstancePatch {
        weight: Some(3.0),
        ..InstancePatch::default()
    };
    s.patch(svc(), addr(80), None, &p, Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    let i = &snap.instances()[0];
    assert_eq!(i.weight, 3.0);
    assert_eq!(i.metadata.get("a"), Some("1"));
    assert_eq!(
        s.patch(svc(), addr(99), None, &p, Millis(0)),
        Err(RegistryError::InstanceNotFound)
    );
    let bad = InstancePatch {
        weight: Some(f64::NAN),
        ..InstancePatch::default()
    };
    assert_eq!(
        s.patch(svc(), addr(80), None, &bad, Millis(0)),
        Err(RegistryError::InvalidWeight)
    );
}

#[test]
fn beat_renews_without_a_new_revision() {
    let s = store();
    let w = s.register(svc(), &spec(80), Millis(0)).unwrap();
    assert_eq!(
        s.beat(svc(), addr(80), Millis(5_000)),
        BeatOutcome::Renewed { interval_ms: 5_000 }
    );
    assert_eq!(s.snapshot(svc()).unwrap().revision(), w.revision);
    assert_eq!(
        s.beat(svc(), addr(81), Millis(5_000)),
        BeatOutcome::NotFound
    );
    let other = ServiceRef::new(NS, "DEFAULT_GROUP@@nope");
    assert_eq!(
        s.beat(other, addr(80), Millis(5_000)),
        BeatOutcome::NotFound
    );
}

#[test]
fn silent_instance_turns_unhealthy_then_is_deleted() {
    let s = store();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    s.register(svc(), &spec(81), Millis(0)).unwrap();
    // 81 keeps beating; 80 goes silent.
    for t in (5_000..=30_000).step_by(5_000) {
        s.beat(svc(), addr(81), Millis(t));
    }
    assert!(s.expire(Millis(14_999)).events.is_empty());
    let r = s.expire(Millis(15_000));
    assert_eq!((r.unhealthy, r.removed, r.events.len()), (1, 0, 1));
    let snap = s.snapshot(svc()).unwrap();
    assert!(!snap.find(addr(80), true).unwrap().healthy);
    assert!(snap.find(addr(81), true).unwrap().healthy);
    // Nothing more happens before the delete timeout.
    assert_eq!(s.expire(Millis(20_000)), ExpireReport::default());
    let r = s.expire(Millis(30_000));
    assert_eq!((r.unhealthy, r.removed), (0, 1));
    assert_eq!(ports(&s), vec![81]);
    assert_eq!(s.stats().instances, 1);
}

#[test]
fn beat_revives_an_unhealthy_instance() {
    let s = store();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    s.expire(Millis(16_000));
    assert!(!s.snapshot(svc()).unwrap().instances()[0].healthy);
    match s.beat(svc(), addr(80), Millis(17_000)) {
        BeatOutcome::Revived { interval_ms, event } => {
            assert_eq!(interval_ms, 5_000);
            assert_eq!(event.service.grouped_name(), SVC);
        }
        other => panic!("expected a revival, got {other:?}"),
    }
    assert!(s.snapshot(svc()).unwrap().instances()[0].healthy);
    // The revived lease counts from the beat, not from the registration.
    assert_eq!(s.expire(Millis(31_000)), ExpireReport::default());
    assert_eq!(s.expire(Millis(32_000)).unhealthy, 1);
}

#[test]
fn preserved_metadata_overrides_timing() {
    let s = store();
    let mut sp = spec(80);
    sp.metadata = Metadata::from_pairs([
        (preserved::BEAT_INTERVAL, "1000"),
        (preserved::BEAT_TIMEOUT, "3000"),
        (preserved::DELETE_TIMEOUT, "6000"),
    ])
    .unwrap();
    s.register(svc(), &sp, Millis(0)).unwrap();
    assert_eq!(
        s.beat(svc(), addr(80), Millis(0)),
        BeatOutcome::Renewed { interval_ms: 1000 }
    );
    assert_eq!(s.expire(Millis(3_000)).unhealthy, 1);
    assert_eq!(s.expire(Millis(6_000)).removed, 1);
}

#[test]
fn delete_timeout_shorter_than_beat_timeout_deletes_directly() {
    let s = store();
    let mut sp = spec(80);
    sp.metadata = Metadata::from_pairs([(preserved::DELETE_TIMEOUT, "2000")]).unwrap();
    s.register(svc(), &sp, Millis(0)).unwrap();
    let r = s.expire(Millis(2_000));
    assert_eq!((r.unhealthy, r.removed), (0, 1));
}

#[test]
fn persistent_instances_are_never_expired() {
    let s = store();
    let mut sp = spec(80);
    sp.ephemeral = false;
    s.register(svc(), &sp, Millis(0)).unwrap();
    assert_eq!(s.expire(Millis(10_000_000)), ExpireReport::default());
    assert_eq!(ports(&s), vec![80]);
    // A beat for it is acknowledged, not 20404.
    assert_eq!(
        s.beat(svc(), addr(80), Millis(1)),
        BeatOutcome::Renewed { interval_ms: 5_000 }
    );
    // Health checks mark it.
    let w = s
        .set_health(svc(), addr(80), false, false, Millis(2))
        .unwrap();
    assert!(w.event.is_some());
    assert!(!s.snapshot(svc()).unwrap().instances()[0].healthy);
}

#[test]
fn empty_auto_created_services_are_removed_after_ttl_explicit_ones_kept() {
    let s = store();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    let explicit = ServiceRef::new(NS, "DEFAULT_GROUP@@kept");
    s.create_service(explicit, &ServiceSpec::default(), Millis(0))
        .unwrap();
    s.deregister(svc(), addr(80), true, Millis(1_000)).unwrap();
    assert_eq!(s.expire(Millis(60_999)).services_removed, 0);
    assert_eq!(s.expire(Millis(61_000)).services_removed, 1);
    assert!(s.snapshot(svc()).is_none());
    assert!(s.snapshot(explicit).is_some());
    assert_eq!(s.stats().services, 1);
}

#[test]
fn a_service_that_refills_is_not_removed() {
    let s = store();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    s.deregister(svc(), addr(80), true, Millis(0)).unwrap();
    s.register(svc(), &spec(81), Millis(1)).unwrap();
    s.beat(svc(), addr(81), Millis(59_000));
    assert_eq!(s.expire(Millis(61_000)).services_removed, 0);
    assert_eq!(ports(&s), vec![81]);
}

#[test]
fn service_api_semantics() {
    let s = store();
    let spec = ServiceSpec {
        protect_threshold: 0.5,
        metadata: Metadata::from_pairs([("owner", "team")]).unwrap(),
        selector: None,
    };
    s.create_service(svc(), &spec, Millis(0)).unwrap();
    assert_eq!(
        s.create_service(svc(), &spec, Millis(0)),
        Err(RegistryError::ServiceExists)
    );
    s.update_service(svc(), 0.25, None, None, Millis(0))
        .unwrap();
    let snap = s.snapshot(svc()).unwrap();
    assert_eq!(snap.protect_threshold(), 0.25);
    assert_eq!(snap.metadata().get("owner"), Some("team"));
    assert_eq!(
        s.update_service(ServiceRef::new(NS, "G@@x"), 0.1, None, None, Millis(0)),
        Err(RegistryError::ServiceNotFound)
    );
    assert_eq!(
        s.update_service(svc(), 1.5, None, None, Millis(0)),
        Err(RegistryError::InvalidProtectThreshold)
    );
    s.register(svc(), &super::tests::spec(80), Millis(0))
        .unwrap();
    s.delete_service(svc()).unwrap();
    assert_eq!(
        s.stats(),
        StoreStats {
            lease_bytes: s.stats().lease_bytes,
            ..StoreStats::default()
        }
    );
    assert_eq!(s.delete_service(svc()), Err(RegistryError::ServiceNotFound));
}

#[test]
fn list_services_pages_by_group() {
    let s = store();
    for n in 0..25 {
        let g = if n % 2 == 0 { "A" } else { "B" };
        let name = format!("{g}@@svc{n:02}");
        s.register(ServiceRef::new(NS, &name), &spec(80), Millis(0))
            .unwrap();
    }
    s.register(
        ServiceRef::new("other", "A@@elsewhere"),
        &spec(80),
        Millis(0),
    )
    .unwrap();
    let page = s.list_services(NS, Some("A"), 1, 5);
    assert_eq!(page.count, 13);
    let names: Vec<_> = page.services.iter().map(|k| k.service_name()).collect();
    assert_eq!(names, ["svc00", "svc02", "svc04", "svc06", "svc08"]);
    let last = s.list_services(NS, Some("A"), 3, 5);
    assert_eq!(last.services.len(), 3);
    assert_eq!(s.list_services(NS, None, 1, 100).count, 25);
    assert!(s.list_services(NS, Some("A"), 9, 5).services.is_empty());
}

#[test]
fn select_filters_clusters_health_and_disabled() {
    let s = store();
    let mut c1 = InstanceSpec::new("c1", ip("10.0.0.2"), 1);
    s.register(svc(), &c1, Millis(0)).unwrap();
    c1.addr.port = 2;
    c1.healthy = false;
    s.register(svc(), &c1, Millis(0)).unwrap();
    c1.addr.port = 3;
    c1.healthy = true;
    c1.enabled = false;
    s.register(svc(), &c1, Millis(0)).unwrap();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    let ports_of = |v: View<'_>| -> Vec<(u16, bool)> {
        snap.select(&v)
            .hosts
            .iter()
            .map(|(i, h)| (i.port, *h))
            .collect()
    };
    // Sorted by cluster name, then address: "DEFAULT" sorts before "c1".
    assert_eq!(
        ports_of(View::default()),
        vec![(80, true), (1, true), (2, false)]
    );
    assert_eq!(
        ports_of(View {
            clusters: &["c1"],
            healthy_only: true
        }),
        vec![(1, true)]
    );
    assert_eq!(
        ports_of(View {
            clusters: &["DEFAULT"],
            healthy_only: false
        }),
        vec![(80, true)]
    );
    assert_eq!(
        ports_of(View {
            clusters: &["nope"],
            healthy_only: false
        }),
        vec![]
    );
}

#[test]
fn protect_threshold_reports_everything_healthy() {
    let s = store();
    s.create_service(
        svc(),
        &ServiceSpec {
            protect_threshold: 0.6,
            ..ServiceSpec::default()
        },
        Millis(0),
    )
    .unwrap();
    let mut sp = spec(1);
    s.register(svc(), &sp, Millis(0)).unwrap();
    sp.addr.port = 2;
    sp.healthy = false;
    s.register(svc(), &sp, Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    let sel = snap.select(&View {
        clusters: &[],
        healthy_only: true,
    });
    // 1 of 2 healthy = 0.5 <= 0.6: both returned, both reported healthy.
    assert!(sel.reach_protection_threshold);
    assert_eq!(
        sel.hosts
            .iter()
            .map(|(i, h)| (i.port, *h))
            .collect::<Vec<_>>(),
        vec![(1, true), (2, true)]
    );
    s.update_service(svc(), 0.4, None, None, Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    let sel = snap.select(&View {
        clusters: &[],
        healthy_only: true,
    });
    assert!(!sel.reach_protection_threshold);
    assert_eq!(sel.hosts.len(), 1);
}

#[test]
fn checksum_follows_the_visible_list() {
    let s = store();
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    let a = s.snapshot(svc()).unwrap().checksum();
    s.beat(svc(), addr(80), Millis(1));
    assert_eq!(s.snapshot(svc()).unwrap().checksum(), a);
    let mut sp = spec(80);
    sp.weight = 5.0;
    s.register(svc(), &sp, Millis(2)).unwrap();
    let b = s.snapshot(svc()).unwrap().checksum();
    assert_ne!(a, b);
    sp.weight = 1.0;
    s.register(svc(), &sp, Millis(3)).unwrap();
    assert_eq!(s.snapshot(svc()).unwrap().checksum(), a);
}

#[test]
fn instance_lookup_distinguishes_nacos_cases() {
    let s = store();
    assert_eq!(
        s.instance(svc(), addr(80)),
        Err(RegistryError::ServiceNotFound)
    );
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    assert_eq!(
        s.instance(svc(), addr(81)),
        Err(RegistryError::InstanceNotFound)
    );
    let other = InstanceAddr {
        cluster: "c9",
        ..addr(80)
    };
    assert_eq!(
        s.instance(svc(), other),
        Err(RegistryError::ClusterNotFound)
    );
    assert_eq!(s.instance(svc(), addr(80)).unwrap().port, 80);
}

#[test]
fn limits_are_enforced_without_side_effects() {
    let s = Store::new(StoreConfig {
        shards: 1,
        max_instances_per_service: 2,
        max_services: 2,
        ..StoreConfig::default()
    });
    s.register(svc(), &spec(1), Millis(0)).unwrap();
    s.register(svc(), &spec(2), Millis(0)).unwrap();
    assert_eq!(
        s.register(svc(), &spec(3), Millis(0)),
        Err(RegistryError::TooManyInstances { limit: 2 })
    );
    // Updating an existing instance is still allowed at the limit.
    let mut sp = spec(2);
    sp.weight = 9.0;
    assert!(s.register(svc(), &sp, Millis(0)).is_ok());
    s.register(ServiceRef::new(NS, "G@@b"), &spec(1), Millis(0))
        .unwrap();
    assert_eq!(
        s.register(ServiceRef::new(NS, "G@@c"), &spec(1), Millis(0)),
        Err(RegistryError::TooManyServices { limit: 2 })
    );
    assert_eq!(s.stats().instances, 3);
}

#[test]
fn invalid_input_changes_nothing() {
    let s = store();
    let mut sp = spec(80);
    sp.weight = 10_001.0;
    assert_eq!(
        s.register(svc(), &sp, Millis(0)),
        Err(RegistryError::InvalidWeight)
    );
    let mut sp = spec(80);
    sp.metadata = Metadata::from_pairs([(preserved::BEAT_TIMEOUT, "-5")]).unwrap();
    assert!(matches!(
        s.register(svc(), &sp, Millis(0)),
        Err(RegistryError::InvalidTimeout { .. })
    ));
    assert_eq!(
        s.register(ServiceRef::new("", SVC), &spec(80), Millis(0)),
        Err(RegistryError::InvalidName)
    );
    assert_eq!(s.stats().instances, 0);
    assert_eq!(s.stats().services, 0);
}

#[test]
fn leases_are_recycled() {
    let s = store();
    for round in 0..10 {
        for p in 0..100 {
            s.register(svc(), &spec(p), Millis(round)).unwrap();
        }
        for p in 0..100 {
            s.deregister(svc(), addr(p), true, Millis(round)).unwrap();
        }
    }
    // 100 live slots at most were ever needed: the slab stays small.
    assert!(s.stats().lease_bytes <= 8 * 4 * 64 * 4, "{:?}", s.stats());
}

#[test]
fn shard_config_must_be_a_power_of_two() {
    let c = StoreConfig {
        shards: 3,
        ..StoreConfig::default()
    };
    assert!(c.validate().is_err());
}

#[test]
fn last_beat_follows_beats_and_the_sweeper() {
    let s = store();
    s.register(svc(), &spec(80), Millis(1_000)).unwrap();
    let last = |s: &Store| {
        let snap = s.snapshot(svc()).unwrap();
        s.last_beat(svc(), &snap.instances()[0])
    };
    assert_eq!(last(&s), Some(Millis(1_000)));
    s.beat(svc(), addr(80), Millis(6_000));
    assert_eq!(last(&s), Some(Millis(6_000)));
    // Marked unhealthy: the slot now holds the delete time, and still
    // says when the last beat was.
    s.expire(Millis(21_000));
    assert!(!s.snapshot(svc()).unwrap().instances()[0].healthy);
    assert_eq!(last(&s), Some(Millis(6_000)));
    let mut persistent = spec(81);
    persistent.ephemeral = false;
    s.register(svc(), &persistent, Millis(0)).unwrap();
    let snap = s.snapshot(svc()).unwrap();
    let p = snap.find(addr(81), false).unwrap();
    assert_eq!(s.last_beat(svc(), p), None);
}

#[test]
fn scans_and_namespace_counts_follow_the_sorted_index() {
    let s = store();
    for i in 0..50 {
        let name = format!("G@@s{i:02}");
        let ns = if i % 2 == 0 { "public" } else { "dev" };
        s.register(ServiceRef::new(ns, &name), &spec(80), Millis(0))
            .unwrap();
    }
    let mut seen = Vec::new();
    s.scan_services("dev", |k| {
        seen.push(k.grouped_name().to_string());
        true
    });
    assert_eq!(seen.len(), 25);
    assert_eq!((seen[0].as_str(), seen[24].as_str()), ("G@@s01", "G@@s49"));
    let mut first = Vec::new();
    s.scan_services("public", |k| {
        first.push(k.grouped_name().to_string());
        first.len() < 3
    });
    assert_eq!(first, ["G@@s00", "G@@s02", "G@@s04"]);
    assert_eq!(
        s.namespace_counts(),
        [("dev".to_string(), 25), ("public".to_string(), 25)]
    );
}

// ----- bounded sweeper steps ---------------------------------------------------

/// 100k instances (1,000 services of 100) in one shard all expire at once.
/// Each step holds the shard's writer lock for about the budget, never the
/// whole pass, and the pass still marks every one unhealthy, one event per
/// service.
#[test]
fn a_mass_expiry_runs_in_bounded_steps() {
    let s = Store::new(StoreConfig {
        shards: 1,
        ..StoreConfig::default()
    });
    let names: Vec<String> = (0..1_000).map(|i| format!("DEFAULT_GROUP@@m{i}")).collect();
    for name in &names {
        for port in 0..100 {
            s.register(ServiceRef::new(NS, name), &spec(port), Millis(0))
                .unwrap();
        }
    }
    let budget = 1_000;
    let mut pass = s.expire_pass(Millis(15_000));
    let mut report = ExpireReport::default();
    while s.expire_step(&mut pass, budget, &mut report) {}
    assert_eq!(report.unhealthy, 100_000);
    assert_eq!(report.events.len(), 1_000);
    assert!(
        pass.max_held() <= budget,
        "at most the budget under one hold: {}",
        pass.max_held()
    );
    assert!(pass.holds() >= 200, "many short holds: {}", pass.holds());
    let healthy = names
        .iter()
        .map(|n| {
            s.read(ServiceRef::new(NS, n), |x| {
                x.instances().iter().filter(|i| i.healthy).count()
            })
        })
        .map(Option::unwrap)
        .sum::<usize>();
    assert_eq!(healthy, 0);
}

/// Between steps the lock is free: a write to the same shard goes through,
/// and a beat that lands after the scan saves its instance.
#[test]
fn writes_and_beats_between_steps_are_respected() {
    let s = Store::new(StoreConfig {
        shards: 1,
        ..StoreConfig::default()
    });
    let a = ServiceRef::new(NS, "DEFAULT_GROUP@@a");
    for port in 0..50 {
        s.register(a, &spec(port), Millis(0)).unwrap();
    }
    let mut pass = s.expire_pass(Millis(15_000));
    let mut report = ExpireReport::default();
    // Scan, then resolve a first chunk of 10 slots.
    assert!(s.expire_step(&mut pass, 10, &mut report));
    assert!(s.expire_step(&mut pass, 10, &mut report));
    // The lock is free: these would deadlock otherwise.
    s.register(
        ServiceRef::new(NS, "DEFAULT_GROUP@@b"),
        &spec(1),
        Millis(15_000),
    )
    .unwrap();
    assert!(matches!(
        s.beat(a, addr(7), Millis(15_000)),
        BeatOutcome::Renewed { .. }
    ));
    s.deregister(a, addr(8), true, Millis(15_000)).unwrap();
    // A new instance takes the freed slot: it is not the one that was due.
    s.register(a, &spec(100), Millis(15_000)).unwrap();
    while s.expire_step(&mut pass, 10, &mut report) {}
    assert_eq!(
        report.unhealthy, 48,
        "all but the beaten and the removed one"
    );
    let snap = s.snapshot(a).unwrap();
    assert!(snap.find(addr(7), true).unwrap().healthy);
    assert!(snap.find(addr(100), true).unwrap().healthy);
    assert!(snap.find(addr(8), true).is_none());
}

/// A service larger than the budget is still expired in one snapshot.
#[test]
fn a_service_larger_than_the_budget_is_expired_whole() {
    let s = store();
    for port in 0..300 {
        s.register(svc(), &spec(port), Millis(0)).unwrap();
    }
    let mut pass = s.expire_pass(Millis(15_000));
    let mut report = ExpireReport::default();
    while s.expire_step(&mut pass, 64, &mut report) {}
    assert_eq!((report.unhealthy, report.events.len()), (300, 1));
}

#[test]
fn a_service_recreated_under_its_name_is_not_its_predecessor() {
    // The sweeper's tables name a service by its incarnation (`ServiceId`):
    // the old one's queued "emptied at 1 s" must not remove the new one,
    // emptied only at 3 s, nor may its due lease touch the new instance.
    let s = store();
    let ttl = s.config().empty_service_ttl_ms;
    s.register(svc(), &spec(80), Millis(0)).unwrap();
    s.deregister(svc(), addr(80), true, Millis(1_000)).unwrap();
    s.delete_service(svc()).unwrap();
    s.register(svc(), &spec(81), Millis(2_000)).unwrap();
    s.deregister(svc(), addr(81), true, Millis(3_000)).unwrap();
    let report = s.expire(Millis(1_000 + ttl + 1));
    assert_eq!(report.services_removed, 0);
    assert!(s.snapshot(svc()).is_some());
    // Past the new incarnation's own TTL it goes.
    let report = s.expire(Millis(3_000 + ttl));
    assert_eq!(report.services_removed, 1);
    assert!(s.snapshot(svc()).is_none());
    // A beat finds nothing once it is gone, and a new registration beats.
    assert_eq!(
        s.beat(svc(), addr(81), Millis(3_000 + ttl)),
        BeatOutcome::NotFound
    );
    s.register(svc(), &spec(82), Millis(4_000 + ttl)).unwrap();
    assert!(matches!(
        s.beat(svc(), addr(82), Millis(5_000 + ttl)),
        BeatOutcome::Renewed { .. }
    ));
}
