//! The simulated fleet: instances, subscribers and what each watched service should
//! hold.
//!
//! Nothing here is stored per client that can be computed: service names, instance
//! IPs and ports follow from indexes ([`Naming`]), so an [`Instance`] is 8 bytes of
//! state (plus 8 bytes of wheel link), far inside the 256-byte budget. Instance `g`
//! (a global index) belongs to service `g % services`, has IP `10.0.0.0 + g` and the
//! profile's port, and is simulated by worker `g % workers` at local index
//! `g / workers`.
//!
//! When the process runs one segment of a profile ([`crate::segment`]), the indexes
//! the workers count in are segment-local: [`Naming`] maps them to the global indexes
//! names and addresses follow from, so every segment names its own instances, and
//! its subscribers watch only its own services.
//!
//! Services `0..watched` are watched by subscribers. For each of them a
//! [`ServiceLog`] (shared by all workers behind a mutex; only changes to watched
//! services touch it) records every registration and deregistration when it is sent,
//! and keeps the set the server should hold as an order-independent [`SetHash`], updated
//! when a change is confirmed. A subscriber compares what it receives against both:
//! the log gives change-to-receipt latency, the hash gives convergence.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Mutex;

use registry_proto::naming::ServiceName;

use crate::profile::Fleet as FleetProfile;
use crate::schedule::Nanos;
use crate::segment::Segment;

/// How names and addresses follow from indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct Naming {
    /// `namespaceId`.
    pub namespace: String,
    /// `groupName`.
    pub group: String,
    /// Service name prefix.
    pub prefix: String,
    /// `clusterName`.
    pub cluster: String,
    /// Services in the fleet.
    pub services: u32,
    /// Services watched by subscribers (`0..watched`).
    pub watched: u32,
    /// The instance port.
    pub port: u16,
    /// The slice of the profile this process runs.
    pub segment: Segment,
}

impl Naming {
    /// From the profile's fleet section, for the whole profile.
    pub fn new(f: &FleetProfile) -> Naming {
        Naming::for_segment(f, Segment::WHOLE)
    }

    /// From the (whole) profile's fleet section, for one segment of it.
    pub fn for_segment(f: &FleetProfile, segment: Segment) -> Naming {
        Naming {
            namespace: f.namespace.clone(),
            group: f.group.clone(),
            prefix: f.service_prefix.clone(),
            cluster: f.cluster.clone(),
            services: f.services.max(1),
            watched: f.watched_services,
            port: f.port,
            segment,
        }
    }

    /// The global index of the process's instance `i` (segment-local).
    fn global(&self, i: u32) -> u32 {
        self.segment.global(i, self.services)
    }

    /// Services this process queries and registers into (its segment's).
    pub fn own_services(&self) -> u32 {
        self.segment.owned(self.services)
    }

    /// The `k`-th of [`Naming::own_services`].
    pub fn own_service(&self, k: u32) -> u32 {
        self.segment.group(k)
    }

    /// Whether service `s` is one of this process's.
    pub fn owns_service(&self, s: u32) -> bool {
        self.segment.owns(s)
    }

    /// The watched service of the process's subscriber `j` (segment-local).
    pub fn subscriber_service(&self, j: u32) -> u32 {
        let watched = self.watched.max(1);
        self.segment.global(j, watched) % watched
    }

    /// Writes the (ungrouped) name of service `s` into `out`, replacing its contents.
    pub fn service_name(&self, s: u32, out: &mut String) {
        use std::fmt::Write as _;
        out.clear();
        let _ = write!(out, "{}-{s}", self.prefix);
    }

    /// The grouped name `group@@prefix-s`.
    pub fn grouped(&self, s: u32) -> String {
        let mut name = String::new();
        self.service_name(s, &mut name);
        ServiceName::new(&self.group, &name).grouped()
    }

    /// The service of the process's instance `i`.
    pub fn service_of(&self, i: u32) -> u32 {
        self.global(i) % self.services
    }

    /// The IP of the process's instance `i`: `10.0.0.0 + ` its global index.
    pub fn instance_ip(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)).wrapping_add(self.global(i)))
    }

    /// The endpoint key of the process's instance `i`.
    pub fn endpoint(&self, i: u32) -> Endpoint {
        Endpoint::new(self.instance_ip(i), self.port)
    }

    /// Whether service `s` is watched by subscribers.
    pub fn is_watched(&self, s: u32) -> bool {
        s < self.watched
    }
}

/// An `ip:port` packed into 48 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint(pub u64);

impl Endpoint {
    /// Packs an address.
    pub fn new(ip: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint((u64::from(u32::from(ip)) << 16) | u64::from(port))
    }

    /// Parses `ip` text and a port, as a host in a list response carries them.
    pub fn parse(ip: &str, port: u16) -> Option<Endpoint> {
        ip.parse::<Ipv4Addr>()
            .ok()
            .map(|ip| Endpoint::new(ip, port))
    }

    fn mix(self) -> u64 {
        // splitmix64's finaliser: a well-spread 64-bit value per endpoint, so a sum
        // of them identifies a set with negligible collision probability.
        let mut z = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// An order-independent fingerprint of a set of endpoints: its size and the wrapping
/// sum of a strong mix of each member. Adding and removing a member are O(1), so the
/// expected set of a service is maintained incrementally, and a received host list is
/// fingerprinted in one pass without sorting or storing it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SetHash {
    count: u32,
    sum: u64,
}

impl SetHash {
    /// Adds a member (the caller knows it was absent).
    pub fn add(&mut self, e: Endpoint) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(e.mix());
    }

    /// Removes a member (the caller knows it was present).
    pub fn remove(&mut self, e: Endpoint) {
        self.count = self.count.saturating_sub(1);
        self.sum = self.sum.wrapping_sub(e.mix());
    }

    /// The fingerprint of a set given by its members (duplicates count twice).
    pub fn of(members: impl IntoIterator<Item = Endpoint>) -> SetHash {
        let mut h = SetHash::default();
        for e in members {
            h.add(e);
        }
        h
    }

    /// Members in the set.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Where an instance is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Life {
    /// Never registered, or deregistered.
    #[default]
    Absent,
    /// Registered (or a registration sent); beating.
    Registered,
    /// A deregistration sent; not beating.
    Leaving,
}

/// One simulated instance: 8 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Instance {
    /// Beat interval in ms, from the last beat reply's `clientBeatInterval`.
    pub interval_ms: u32,
    /// Where it is in its life.
    pub life: Life,
    /// Whether the server is believed to hold it (confirmed by a register reply or a
    /// beat reply, cleared by a deregister reply or a 20404).
    pub present: bool,
    /// Whether it has an entry in the beat wheel (removal from the wheel is lazy).
    pub in_wheel: bool,
}

/// The instances one worker simulates, by local index.
#[derive(Debug, Clone)]
pub struct Instances {
    /// The states, by local index (global index `local * workers + worker`).
    pub slots: Vec<Instance>,
    /// Local indexes of deregistered instances, reused by later registrations.
    pub free: Vec<u32>,
    /// Instances whose `present` is set.
    pub present: u64,
    worker: u32,
    workers: u32,
}

impl Instances {
    /// The slots of worker `worker` of `workers`, for `total` initial instances.
    pub fn new(total: u32, worker: u32, workers: u32, interval_ms: u32) -> Instances {
        let n = crate::schedule::share(u64::from(total), worker, workers) as usize;
        Instances {
            slots: vec![
                Instance {
                    interval_ms,
                    ..Instance::default()
                };
                n
            ],
            free: Vec::new(),
            present: 0,
            worker,
            workers: workers.max(1),
        }
    }

    /// The global index of local index `l`.
    pub fn global(&self, l: u32) -> u32 {
        l * self.workers + self.worker
    }

    /// A local index for a new registration: a deregistered one, or a new slot while
    /// the global index space lasts.
    pub fn take_free(&mut self, interval_ms: u32) -> Option<u32> {
        if let Some(l) = self.free.pop() {
            return Some(l);
        }
        let l = u32::try_from(self.slots.len()).ok()?;
        if u64::from(self.global(l)) >= u64::from(crate::profile::MAX_INSTANCES) {
            return None;
        }
        self.slots.push(Instance {
            interval_ms,
            ..Instance::default()
        });
        Some(l)
    }

    /// The first registered instance at or after local index `start`, wrapping
    /// around: every registered instance can be found (a bounded number of random
    /// probes could miss them all and silently drop a deregistration).
    pub fn registered_from(&self, start: usize) -> Option<u32> {
        let n = self.slots.len();
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&local| self.slots[local].life == Life::Registered)
            .map(|local| local as u32)
    }

    /// Like [`Instances::registered_from`], among instances the server confirmed
    /// (`present`): for a protocol whose changes of one instance may overtake each
    /// other.
    pub fn confirmed_from(&self, start: usize) -> Option<u32> {
        let n = self.slots.len();
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&l| self.slots[l].life == Life::Registered && self.slots[l].present)
            .map(|l| l as u32)
    }

    /// Sets `present` and keeps the count; returns whether it changed.
    pub fn set_present(&mut self, l: u32, present: bool) -> bool {
        let slot = &mut self.slots[l as usize];
        if slot.present == present {
            return false;
        }
        slot.present = present;
        if present {
            self.present += 1;
        } else {
            self.present -= 1;
        }
        true
    }

    /// Bytes held per simulated instance by this table and its wheel link.
    pub const BYTES_PER_INSTANCE: usize =
        std::mem::size_of::<Instance>() + crate::wheel::Wheel::BYTES_PER_ID;
}

// The per-instance budget is 256 bytes; the table and wheel link use 16.
const _: () = assert!(Instances::BYTES_PER_INSTANCE <= 16);

/// One change to a watched service, as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// When the request was written to its connection.
    pub sent: Nanos,
    /// The instance.
    pub endpoint: Endpoint,
    /// Registration (true) or deregistration.
    pub add: bool,
}

/// The changes and the expected set of one watched service.
#[derive(Debug, Default)]
pub struct ServiceLog {
    /// Sequence number of `entries[0]`.
    base: u64,
    entries: VecDeque<Change>,
    /// The latest change per endpoint still in the log: `(seq, add)`.
    latest: HashMap<Endpoint, (u64, bool)>,
    /// What the server should hold: confirmed registrations minus confirmed
    /// deregistrations.
    pub expected: SetHash,
}

/// What a subscriber learned from one host list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// The subscriber has now seen every change before this sequence number.
    pub upto: u64,
    /// The send time of the oldest change this list revealed, if it revealed any.
    pub oldest: Option<Nanos>,
}

impl ServiceLog {
    /// Records a change when its request is sent.
    pub fn sent(&mut self, change: Change) {
        let seq = self.base + self.entries.len() as u64;
        self.latest.insert(change.endpoint, (seq, change.add));
        self.entries.push_back(change);
    }

    /// The sequence number the next change will get.
    pub fn next_seq(&self) -> u64 {
        self.base + self.entries.len() as u64
    }

    /// Changes in the log.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Walks the changes a subscriber has not seen yet (from `seen`) in order and
    /// stops at the first one the host list `has` does not reflect. A change is
    /// reflected when the list agrees with it or with the latest change of the same
    /// endpoint (a later change may supersede it before any push shows it).
    ///
    /// Change-to-receipt latency is then `receipt - oldest`: from the oldest change
    /// this subscriber had not seen until the list that shows it.
    pub fn observe(&self, seen: u64, has: impl Fn(Endpoint) -> bool) -> Seen {
        let start = seen.max(self.base);
        let mut upto = start;
        let mut oldest = None;
        for c in self.entries.iter().skip((start - self.base) as usize) {
            let present = has(c.endpoint);
            let latest_add = self.latest.get(&c.endpoint).map_or(c.add, |l| l.1);
            if present != c.add && present != latest_add {
                break;
            }
            oldest.get_or_insert(c.sent);
            upto += 1;
        }
        Seen { upto, oldest }
    }

    /// Drops changes sent before `before` (a subscriber still behind them has missed
    /// them; its later lists are compared from the trimmed point on).
    pub fn trim(&mut self, before: Nanos) {
        while let Some(c) = self.entries.front() {
            if c.sent >= before {
                break;
            }
            let seq = self.base;
            if self.latest.get(&c.endpoint).is_some_and(|l| l.0 == seq) {
                self.latest.remove(&c.endpoint);
            }
            self.entries.pop_front();
            self.base += 1;
        }
    }
}

/// The logs of all watched services, shared by the workers.
#[derive(Debug)]
pub struct Watch {
    logs: Vec<Mutex<ServiceLog>>,
}

impl Watch {
    /// Logs for services `0..watched`.
    pub fn new(watched: u32) -> Watch {
        Watch {
            logs: (0..watched)
                .map(|_| Mutex::new(ServiceLog::default()))
                .collect(),
        }
    }

    /// Runs `f` on the log of watched service `s`; `None` when `s` is not watched.
    pub fn with<R>(&self, s: u32, f: impl FnOnce(&mut ServiceLog) -> R) -> Option<R> {
        let log = self.logs.get(s as usize)?;
        // A worker that panicked while holding the lock leaves a log that is still
        // structurally sound (every method keeps it consistent between statements
        // that can panic), so a poisoned lock is used anyway.
        let mut guard = log.lock().unwrap_or_else(|e| e.into_inner());
        Some(f(&mut guard))
    }

    /// Watched services.
    pub fn len(&self) -> u32 {
        self.logs.len() as u32
    }

    /// Whether no service is watched.
    pub fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    /// The expected set of every watched service.
    pub fn expected(&self) -> Vec<SetHash> {
        (0..self.len())
            .map(|s| self.with(s, |l| l.expected).unwrap_or_default())
            .collect()
    }

    /// Trims every log (see [`ServiceLog::trim`]).
    pub fn trim(&self, before: Nanos) {
        for s in 0..self.len() {
            self.with(s, |l| l.trim(before));
        }
    }
}

/// A subscriber's state (its socket lives with its receive task).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Subscriber {
    /// The watched service.
    pub service: u32,
    /// Which source address (and so which connections) it uses.
    pub ip_group: u8,
    /// Whether it is subscribed (has a socket).
    pub active: bool,
    /// Whether it has received any list yet.
    pub has_view: bool,
    /// The UDP port it announces.
    pub port: u16,
    /// Bumped when the subscriber is replaced, so late events of the old one are
    /// ignored.
    pub generation: u32,
    /// The fingerprint of the last list it received (push or poll).
    pub view: SetHash,
    /// Every change of its service before this sequence number is reflected in what it
    /// has received.
    pub seen: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registered_instance_can_be_found_from_any_start() {
        let mut instances = Instances::new(10, 0, 1, 5000);
        assert_eq!(instances.registered_from(3), None, "none registered");
        instances.slots[7].life = Life::Registered;
        for start in 0..10 {
            assert_eq!(instances.registered_from(start), Some(7), "start {start}");
        }
        instances.slots[2].life = Life::Registered;
        instances.slots[7].life = Life::Leaving;
        assert_eq!(instances.registered_from(8), Some(2), "wraps around");
        assert_eq!(Instances::new(0, 0, 1, 5000).registered_from(0), None);
    }

    #[test]
    fn only_confirmed_instances_are_found_for_a_racy_protocol() {
        let mut instances = Instances::new(10, 0, 1, 5000);
        instances.slots[4].life = Life::Registered;
        assert_eq!(instances.confirmed_from(0), None, "registration unanswered");
        instances.set_present(4, true);
        instances.slots[8].life = Life::Registered;
        assert_eq!(
            instances.confirmed_from(6),
            Some(4),
            "wraps to the confirmed one"
        );
        instances.slots[4].life = Life::Leaving;
        assert_eq!(
            instances.confirmed_from(0),
            None,
            "leaving is not registered"
        );
    }

    fn ep(n: u32) -> Endpoint {
        Endpoint::new(Ipv4Addr::from(n), 80)
    }

    #[test]
    fn naming_follows_indexes() {
        let n = Naming::new(&FleetProfile {
            services: 7,
            watched_services: 2,
            ..FleetProfile::default()
        });
        assert_eq!(n.service_of(15), 1);
        assert_eq!(n.instance_ip(0), Ipv4Addr::new(10, 0, 0, 0));
        assert_eq!(n.instance_ip(258), Ipv4Addr::new(10, 0, 1, 2));
        assert_eq!(n.grouped(3), "DEFAULT_GROUP@@loadgen-3");
        assert!(n.is_watched(1) && !n.is_watched(2));
        assert_eq!(Endpoint::parse("10.0.1.2", 8080), Some(n.endpoint(258)));
        assert_eq!(Endpoint::parse("nonsense", 1), None);
    }

    #[test]
    fn set_hash_is_order_independent_and_incremental() {
        let a = SetHash::of([ep(1), ep(2), ep(3)]);
        let b = SetHash::of([ep(3), ep(1), ep(2)]);
        assert_eq!(a, b);
        let mut c = SetHash::of([ep(1), ep(2), ep(3), ep(4)]);
        assert_ne!(a, c);
        c.remove(ep(4));
        assert_eq!(a, c);
        assert_ne!(SetHash::of([ep(1), ep(2)]), SetHash::of([ep(1), ep(3)]));
        assert!(SetHash::default().is_empty());
    }

    #[test]
    fn instance_slots_are_small_and_reused() {
        let mut t = Instances::new(10, 1, 3, 5000);
        assert_eq!(t.slots.len(), 3); // globals 1, 4, 7
        assert_eq!(t.global(2), 7);
        t.free.push(1);
        assert_eq!(t.take_free(5000), Some(1));
        assert_eq!(t.take_free(5000), Some(3));
        assert_eq!(t.slots.len(), 4);
        assert!(t.set_present(3, true));
        assert!(!t.set_present(3, true));
        assert_eq!(t.present, 1);
    }

    #[test]
    fn observe_finds_the_oldest_unseen_change() {
        let mut log = ServiceLog::default();
        log.sent(Change {
            sent: 100,
            endpoint: ep(1),
            add: true,
        });
        log.sent(Change {
            sent: 200,
            endpoint: ep(2),
            add: true,
        });
        log.sent(Change {
            sent: 300,
            endpoint: ep(1),
            add: false,
        });
        // A list with only ep(2): the add of 1 was superseded by its removal, the add
        // of 2 and the removal of 1 are reflected.
        let s = log.observe(0, |e| e == ep(2));
        assert_eq!(
            s,
            Seen {
                upto: 3,
                oldest: Some(100)
            }
        );
        // A stale list (nothing yet) reflects the first change via its latest state
        // (1 absent), but not the add of 2, so it stops there.
        let s = log.observe(0, |_| false);
        assert_eq!(
            s,
            Seen {
                upto: 1,
                oldest: Some(100)
            }
        );
        // Nothing new to see.
        assert_eq!(
            log.observe(3, |e| e == ep(2)),
            Seen {
                upto: 3,
                oldest: None
            }
        );
    }

    #[test]
    fn trim_keeps_sequence_numbers() {
        let mut log = ServiceLog::default();
        for i in 0..5 {
            log.sent(Change {
                sent: i * 10,
                endpoint: ep(i as u32),
                add: true,
            });
        }
        log.trim(25);
        assert_eq!((log.len(), log.next_seq()), (2, 5));
        // A subscriber behind the trimmed point is compared from it on.
        let s = log.observe(0, |e| e == ep(3));
        assert_eq!(
            s,
            Seen {
                upto: 4,
                oldest: Some(30)
            }
        );
    }

    #[test]
    fn watch_is_shared_state_per_service() {
        let w = Watch::new(3);
        assert_eq!(w.len(), 3);
        w.with(1, |l| l.expected.add(ep(9)));
        assert_eq!(w.expected()[1], SetHash::of([ep(9)]));
        assert!(w.with(3, |_| ()).is_none());
    }
}
