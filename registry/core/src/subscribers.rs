//! Push subscriptions of both protocols: who receives pushes of which service and view.
//!
//! A subscriber is either a UDP socket ([`Subscriber::Udp`], Nacos 1.x: a client polls
//! `instance/list` with a `udpPort`; the server records the HTTP peer's address with
//! that port, never an address named in the request) or a gRPC connection
//! ([`Subscriber::Connection`], Nacos 2.x: `SubscribeServiceRequest`).
//!
//! - UDP subscriptions hold a lease: each poll renews it, and one not renewed stops
//!   receiving pushes and is removed by [`Subscribers::expire`]. They are bounded per
//!   source IP and in total.
//! - Connection subscriptions have no lease: they last until unsubscribed or until the
//!   connection closes (the server removes them then). They count towards the total.
//!
//! # Layout and who writes
//! The table is sharded by service (a hash of the key), each shard behind its own
//! mutex; within a shard, a service's subscriptions are indexed by view and then by
//! subscriber, so a refresh, a subscribe or an unsubscribe is a hash lookup, never a
//! scan. Writers are list handlers (one refresh per UDP subscriber per poll) and gRPC
//! handlers; the reader is the notifier, once per due service. Per-IP counts are
//! sharded the same way by IP. `expire` skips shards whose earliest lease is in the
//! future, so a table of connection subscriptions costs the sweeper nothing.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use foldhash::fast::FixedState;
use parking_lot::Mutex;

use crate::model::{Millis, ServiceKey};

/// Shards of the table; a power of two.
const SHARDS: usize = 64;
/// Lease of a connection subscription: never lapses.
const NO_LEASE: Millis = Millis(u64::MAX);

/// Limits and lease of the subscription table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberConfig {
    /// A UDP subscription lapses this long after its last poll.
    pub lease_ms: u64,
    /// Most UDP subscriptions from one source IP.
    pub max_per_ip: usize,
    /// Most subscriptions in total.
    pub max_total: usize,
}

impl Default for SubscriberConfig {
    fn default() -> Self {
        SubscriberConfig {
            lease_ms: 10_000,
            max_per_ip: 100_000,
            max_total: 1_000_000,
        }
    }
}

/// The view a subscriber asked for; pushes are encoded once per view.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberView {
    /// The `clusters` parameter exactly as sent (clients key their cache by it).
    pub clusters: Arc<str>,
    /// The `healthyOnly` parameter.
    pub healthy_only: bool,
}

/// Where pushes go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Subscriber {
    /// A UDP socket: the HTTP peer's IP and the `udpPort` parameter.
    Udp(SocketAddr),
    /// A gRPC connection, by the server's number for it.
    Connection(u64),
}

/// One subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Where pushes go.
    pub subscriber: Subscriber,
    /// What it asked for.
    pub view: SubscriberView,
    /// When it lapses unless refreshed (never, for a connection).
    pub expires_at: Millis,
}

/// What a subscribe did to the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscribed {
    /// A new subscription.
    New,
    /// An existing subscription's lease was renewed.
    Refreshed,
    /// Refused: the source IP holds its maximum.
    PerIpLimit,
    /// Refused: the table is full.
    TotalLimit,
}

impl Subscribed {
    /// True when the caller is subscribed afterwards.
    pub fn is_subscribed(self) -> bool {
        matches!(self, Subscribed::New | Subscribed::Refreshed)
    }
}

type ByView = HashMap<SubscriberView, HashMap<Subscriber, Millis, FixedState>, FixedState>;

#[derive(Default)]
struct Shard {
    services: HashMap<ServiceKey, ByView, FixedState>,
    /// No UDP lease in this shard lapses before this (a lower bound).
    earliest: Option<Millis>,
}

/// The subscription table.
pub struct Subscribers {
    config: SubscriberConfig,
    shards: Box<[Mutex<Shard>]>,
    per_ip: Box<[Mutex<HashMap<IpAddr, usize, FixedState>>]>,
    total: AtomicUsize,
    hasher: FixedState,
}

impl Subscribers {
    /// An empty table.
    pub fn new(config: SubscriberConfig) -> Self {
        Subscribers {
            config,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_ip: (0..SHARDS).map(|_| Mutex::default()).collect(),
            total: AtomicUsize::new(0),
            hasher: FixedState::with_seed(0x5ab5),
        }
    }

    fn shard(&self, service: &ServiceKey) -> &Mutex<Shard> {
        &self.shards[(self.hasher.hash_one(service) as usize) & (SHARDS - 1)]
    }

    fn ip_shard(&self, ip: IpAddr) -> &Mutex<HashMap<IpAddr, usize, FixedState>> {
        &self.per_ip[(self.hasher.hash_one(ip) as usize) & (SHARDS - 1)]
    }

    /// Subscribes `subscriber` to `service` with a view, or renews its lease. A UDP
    /// subscription lapses `lease_ms` after `now`; a connection's never does.
    pub fn subscribe(
        &self,
        service: &ServiceKey,
        subscriber: Subscriber,
        clusters: &str,
        healthy_only: bool,
        now: Millis,
    ) -> Subscribed {
        let expires_at = match subscriber {
            Subscriber::Udp(_) => now.plus(self.config.lease_ms),
            Subscriber::Connection(_) => NO_LEASE,
        };
        let view = SubscriberView {
            clusters: Arc::from(clusters),
            healthy_only,
        };
        let mut shard = self.shard(service).lock();
        if let Some(at) = shard
            .services
            .get_mut(service)
            .and_then(|v| v.get_mut(&view))
            .and_then(|s| s.get_mut(&subscriber))
        {
            *at = expires_at;
            return Subscribed::Refreshed;
        }
        if let Err(refused) = self.admit(subscriber) {
            return refused;
        }
        if let Subscriber::Udp(_) = subscriber {
            shard.earliest = Some(shard.earliest.map_or(expires_at, |e| e.min(expires_at)));
        }
        shard
            .services
            .entry(service.clone())
            .or_default()
            .entry(view)
            .or_default()
            .insert(subscriber, expires_at);
        Subscribed::New
    }

    /// Takes a place in the total and, for UDP, in the source IP's count.
    fn admit(&self, subscriber: Subscriber) -> Result<(), Subscribed> {
        let taken = self.total.fetch_add(1, Ordering::Relaxed);
        if taken >= self.config.max_total {
            self.total.fetch_sub(1, Ordering::Relaxed);
            return Err(Subscribed::TotalLimit);
        }
        if let Subscriber::Udp(addr) = subscriber {
            let mut per_ip = self.ip_shard(addr.ip()).lock();
            let n = per_ip.entry(addr.ip()).or_insert(0);
            if *n >= self.config.max_per_ip {
                drop(per_ip);
                self.total.fetch_sub(1, Ordering::Relaxed);
                return Err(Subscribed::PerIpLimit);
            }
            *n += 1;
        }
        Ok(())
    }

    /// Gives back what [`Self::admit`] took.
    fn release(&self, subscriber: Subscriber) {
        self.total.fetch_sub(1, Ordering::Relaxed);
        if let Subscriber::Udp(addr) = subscriber {
            let mut per_ip = self.ip_shard(addr.ip()).lock();
            if let Some(n) = per_ip.get_mut(&addr.ip()) {
                *n -= 1;
                if *n == 0 {
                    per_ip.remove(&addr.ip());
                }
            }
        }
    }

    /// Removes one subscription; returns whether it existed.
    pub fn unsubscribe(
        &self,
        service: &ServiceKey,
        subscriber: Subscriber,
        clusters: &str,
        healthy_only: bool,
    ) -> bool {
        let view = SubscriberView {
            clusters: Arc::from(clusters),
            healthy_only,
        };
        let mut shard = self.shard(service).lock();
        let Some(views) = shard.services.get_mut(service) else {
            return false;
        };
        let Some(subs) = views.get_mut(&view) else {
            return false;
        };
        if subs.remove(&subscriber).is_none() {
            return false;
        }
        if subs.is_empty() {
            views.remove(&view);
            if views.is_empty() {
                shard.services.remove(service);
            }
        }
        drop(shard);
        self.release(subscriber);
        true
    }

    /// Live subscriptions of `service`, appended to `out` sorted by view so callers
    /// can encode once per view.
    pub fn targets(&self, service: &ServiceKey, now: Millis, out: &mut Vec<Subscription>) {
        let start = out.len();
        {
            let shard = self.shard(service).lock();
            if let Some(views) = shard.services.get(service) {
                for (view, subs) in views {
                    out.extend(
                        subs.iter()
                            .filter(|(_, at)| **at > now)
                            .map(|(subscriber, at)| Subscription {
                                subscriber: *subscriber,
                                view: view.clone(),
                                expires_at: *at,
                            }),
                    );
                }
            }
        }
        out[start..].sort_by(|a, b| a.view.cmp(&b.view));
    }

    /// True when `subscriber` holds a live subscription to `service` in any view.
    pub fn is_subscribed(&self, service: &ServiceKey, subscriber: Subscriber, now: Millis) -> bool {
        let shard = self.shard(service).lock();
        shard.services.get(service).is_some_and(|views| {
            views
                .values()
                .any(|s| s.get(&subscriber).is_some_and(|at| *at > now))
        })
    }

    /// Removes lapsed UDP subscriptions; returns how many. Shards with no lease due
    /// are skipped without looking inside.
    pub fn expire(&self, now: Millis) -> usize {
        let mut removed: Vec<Subscriber> = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            if shard.earliest.is_none_or(|e| e > now) {
                continue;
            }
            let mut earliest: Option<Millis> = None;
            shard.services.retain(|_, views| {
                views.retain(|_, subs| {
                    subs.retain(|subscriber, at| {
                        if *at > now {
                            if let Subscriber::Udp(_) = subscriber {
                                earliest = Some(earliest.map_or(*at, |e| e.min(*at)));
                            }
                            return true;
                        }
                        removed.push(*subscriber);
                        false
                    });
                    !subs.is_empty()
                });
                !views.is_empty()
            });
            shard.earliest = earliest;
        }
        for s in &removed {
            self.release(*s);
        }
        removed.len()
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// True when nobody is subscribed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ServiceKey {
        ServiceKey::new("public", "DEFAULT_GROUP@@demo")
    }

    fn at(port: u16) -> Subscriber {
        Subscriber::Udp(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    #[test]
    fn subscribe_refresh_and_lapse() {
        let t = Subscribers::new(SubscriberConfig::default());
        assert_eq!(
            t.subscribe(&key(), at(1), "DEFAULT", false, Millis(0)),
            Subscribed::New
        );
        assert_eq!(
            t.subscribe(&key(), at(1), "DEFAULT", false, Millis(5_000)),
            Subscribed::Refreshed
        );
        // Another view from the same socket is another subscription.
        assert_eq!(
            t.subscribe(&key(), at(1), "", false, Millis(5_000)),
            Subscribed::New
        );
        let mut out = Vec::new();
        t.targets(&key(), Millis(14_999), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(&*out[0].view.clusters, "");
        out.clear();
        t.targets(&key(), Millis(15_000), &mut out);
        assert!(out.is_empty());
        assert_eq!(t.expire(Millis(15_000)), 2);
        assert!(t.is_empty());
    }

    #[test]
    fn limits_refuse_without_growing() {
        let t = Subscribers::new(SubscriberConfig {
            lease_ms: 10,
            max_per_ip: 2,
            max_total: 3,
        });
        assert!(t
            .subscribe(&key(), at(1), "", false, Millis(0))
            .is_subscribed());
        assert!(t
            .subscribe(&key(), at(2), "", false, Millis(0))
            .is_subscribed());
        assert_eq!(
            t.subscribe(&key(), at(3), "", false, Millis(0)),
            Subscribed::PerIpLimit
        );
        let other = Subscriber::Udp(SocketAddr::from(([127, 0, 0, 2], 1)));
        assert!(t
            .subscribe(&key(), other, "", false, Millis(0))
            .is_subscribed());
        let third = Subscriber::Udp(SocketAddr::from(([127, 0, 0, 3], 1)));
        assert_eq!(
            t.subscribe(&key(), third, "", false, Millis(0)),
            Subscribed::TotalLimit
        );
        assert_eq!(t.len(), 3);
        // Lapsed subscriptions free their places.
        t.expire(Millis(10));
        assert!(t
            .subscribe(&key(), at(3), "", false, Millis(10))
            .is_subscribed());
    }

    #[test]
    fn connection_subscriptions_never_lapse_and_leave_on_unsubscribe() {
        let t = Subscribers::new(SubscriberConfig::default());
        let conn = Subscriber::Connection(7);
        assert_eq!(
            t.subscribe(&key(), conn, "", false, Millis(0)),
            Subscribed::New
        );
        assert_eq!(t.expire(Millis(u64::MAX - 1)), 0);
        assert!(t.is_subscribed(&key(), conn, Millis(u64::MAX - 1)));
        // The wrong view removes nothing.
        assert!(!t.unsubscribe(&key(), conn, "DEFAULT", false));
        assert!(t.unsubscribe(&key(), conn, "", false));
        assert!(!t.unsubscribe(&key(), conn, "", false));
        assert!(t.is_empty());
        let mut out = Vec::new();
        t.targets(&key(), Millis(0), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn both_kinds_of_subscriber_are_targets_of_one_service() {
        let t = Subscribers::new(SubscriberConfig::default());
        t.subscribe(&key(), at(1), "", false, Millis(0));
        t.subscribe(&key(), Subscriber::Connection(1), "", false, Millis(0));
        t.subscribe(
            &key(),
            Subscriber::Connection(2),
            "DEFAULT",
            false,
            Millis(0),
        );
        let mut out = Vec::new();
        t.targets(&key(), Millis(1), &mut out);
        assert_eq!(out.len(), 3);
        // Sorted by view: the two of view "" first.
        assert_eq!(&*out[0].view.clusters, "");
        assert_eq!(&*out[1].view.clusters, "");
        assert_eq!(&*out[2].view.clusters, "DEFAULT");
    }

    #[test]
    fn a_refresh_among_many_subscribers_finds_its_own_entry() {
        // 50k subscribers of one service: each refresh is an indexed lookup (the old
        // table scanned the service's list); the count proves no duplicate was made.
        let t = Subscribers::new(SubscriberConfig::default());
        let many: Vec<Subscriber> = (0..50_000u32)
            .map(|i| {
                Subscriber::Udp(SocketAddr::from((
                    [127, 0, (i >> 8) as u8, i as u8],
                    1000 + (i % 7) as u16,
                )))
            })
            .collect();
        for s in &many {
            t.subscribe(&key(), *s, "", false, Millis(0));
        }
        for s in &many {
            assert_eq!(
                t.subscribe(&key(), *s, "", false, Millis(1)),
                Subscribed::Refreshed
            );
        }
        assert_eq!(t.len(), 50_000);
    }
}
