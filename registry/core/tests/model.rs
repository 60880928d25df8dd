//! Property test: random operation sequences on the sharded store match a
//! simple reference model of Nacos's semantics.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use registry_core::{
    BeatOutcome, InstanceAddr, InstancePatch, InstanceSpec, Millis, ServiceRef, Store, StoreConfig,
};

const SERVICES: [&str; 3] = ["G@@a", "G@@b", "H@@c"];
const IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3));

#[derive(Clone, Debug)]
enum Op {
    Register {
        svc: usize,
        port: u16,
        ephemeral: bool,
        weight: u8,
        healthy: bool,
    },
    Deregister {
        svc: usize,
        port: u16,
        ephemeral: bool,
    },
    Beat {
        svc: usize,
        port: u16,
    },
    Disable {
        svc: usize,
        port: u16,
        enabled: bool,
    },
    Advance {
        ms: u64,
    },
    DeleteService {
        svc: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..4u16, any::<bool>(), 0..3u8, any::<bool>()).prop_map(
            |(svc, port, ephemeral, weight, healthy)| Op::Register { svc, port, ephemeral, weight, healthy }
        ),
        2 => (0..3usize, 0..4u16, any::<bool>()).prop_map(|(svc, port, ephemeral)| Op::Deregister { svc, port, ephemeral }),
        4 => (0..3usize, 0..4u16).prop_map(|(svc, port)| Op::Beat { svc, port }),
        1 => (0..3usize, 0..4u16, any::<bool>()).prop_map(|(svc, port, enabled)| Op::Disable { svc, port, enabled }),
        3 => (0..20_000u64).prop_map(|ms| Op::Advance { ms }),
        1 => (0..3usize).prop_map(|svc| Op::DeleteService { svc }),
    ]
}

#[derive(Clone, Debug, PartialEq)]
struct Inst {
    weight: f64,
    healthy: bool,
    enabled: bool,
    last_beat: u64,
}

/// The reference: a map of (service, port, ephemeral) → instance.
#[derive(Default)]
struct Model {
    now: u64,
    instances: BTreeMap<(usize, u16, bool), Inst>,
}

impl Model {
    fn expire(&mut self) {
        let now = self.now;
        self.instances
            .retain(|(_, _, eph), i| !*eph || now < i.last_beat + 30_000);
        for ((_, _, eph), i) in self.instances.iter_mut() {
            if *eph && now >= i.last_beat + 15_000 {
                i.healthy = false;
            }
        }
    }

    fn view(&self, svc: usize) -> Vec<(u16, bool, u64, bool, bool)> {
        let mut v: Vec<_> = self
            .instances
            .iter()
            .filter(|((s, _, _), _)| *s == svc)
            .map(|((_, p, e), i)| (*p, *e, i.weight.to_bits(), i.healthy, i.enabled))
            .collect();
        v.sort();
        v
    }
}

fn store_view(store: &Store, svc: usize) -> Vec<(u16, bool, u64, bool, bool)> {
    let mut v: Vec<_> = store
        .snapshot(ServiceRef::new("public", SERVICES[svc]))
        .map(|s| {
            s.instances()
                .iter()
                .map(|i| {
                    (
                        i.port,
                        i.ephemeral,
                        i.weight.to_bits(),
                        i.healthy,
                        i.enabled,
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn store_matches_model(ops in proptest::collection::vec(op(), 1..80), shards_log in 0u32..4) {
        let store = Store::new(StoreConfig { shards: 1 << shards_log, ..StoreConfig::default() });
        let mut model = Model::default();
        for op in ops {
            let now = Millis(model.now);
            match op {
                Op::Register { svc, port, ephemeral, weight, healthy } => {
                    let mut spec = InstanceSpec::new("DEFAULT", IP, port);
                    spec.ephemeral = ephemeral;
                    spec.weight = f64::from(weight);
                    spec.healthy = healthy;
                    store.register(ServiceRef::new("public", SERVICES[svc]), &spec, now).unwrap();
                    let enabled = true;
                    model.instances.insert((svc, port, ephemeral), Inst { weight: f64::from(weight), healthy, enabled, last_beat: model.now });
                }
                Op::Deregister { svc, port, ephemeral } => {
                    let addr = InstanceAddr { cluster: "DEFAULT", ip: IP, port };
                    store.deregister(ServiceRef::new("public", SERVICES[svc]), addr, ephemeral, now).unwrap();
                    model.instances.remove(&(svc, port, ephemeral));
                }
                Op::Beat { svc, port } => {
                    let addr = InstanceAddr { cluster: "DEFAULT", ip: IP, port };
                    let got = store.beat(ServiceRef::new("public", SERVICES[svc]), addr, now);
                    let expect_found = if let Some(i) = model.instances.get_mut(&(svc, port, true)) {
                        i.last_beat = model.now;
                        i.healthy = true;
                        true
                    } else {
                        model.instances.contains_key(&(svc, port, false))
                    };
                    prop_assert_eq!(got != BeatOutcome::NotFound, expect_found);
                }
                Op::Disable { svc, port, enabled } => {
                    let addr = InstanceAddr { cluster: "DEFAULT", ip: IP, port };
                    let patch = InstancePatch { enabled: Some(enabled), ..InstancePatch::default() };
                    let got = store.patch(ServiceRef::new("public", SERVICES[svc]), addr, Some(true), &patch, now);
                    match model.instances.get_mut(&(svc, port, true)) {
                        Some(i) => { prop_assert!(got.is_ok()); i.enabled = enabled; }
                        None => prop_assert!(got.is_err()),
                    }
                }
                Op::Advance { ms } => {
                    model.now += ms;
                    store.expire(Millis(model.now));
                    model.expire();
                }
                Op::DeleteService { svc } => {
                    let existed = store.delete_service(ServiceRef::new("public", SERVICES[svc])).is_ok();
                    let model_had = model.instances.keys().any(|(s, _, _)| *s == svc);
                    // The store may still hold an empty auto-created service the model has no notion of.
                    prop_assert!(existed || !model_had);
                    model.instances.retain(|(s, _, _), _| *s != svc);
                }
            }
            for svc in 0..SERVICES.len() {
                prop_assert_eq!(store_view(&store, svc), model.view(svc), "service {}", svc);
            }
            prop_assert_eq!(store.stats().instances, model.instances.len());
        }
    }
}
