//! Push subscriptions: who receives UDP pushes for which service and view.
//!
//! A client subscribes by polling `instance/list` with a `udpPort`; the
//! server records the HTTP peer's address with that port (never an address
//! named in the request). Each poll refreshes the lease; a subscription not
//! refreshed within the lease stops receiving pushes and is removed by
//! [`Subscribers::expire`]. Subscriptions per source IP and in total are
//! bounded, so a client cannot grow the table without limit.
//!
//! Plain data: the server guards one table with a mutex, written by list
//! requests (one refresh per subscriber per poll interval) and read by the
//! notifier when a service is due.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::model::{Millis, ServiceKey};

/// Limits and lease of the subscription table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriberConfig {
    /// A subscription lapses this long after its last poll.
    pub lease_ms: u64,
    /// Most subscriptions from one source IP.
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

/// One subscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Where pushes go: the HTTP peer's IP and the `udpPort` parameter.
    pub addr: SocketAddr,
    /// What it asked for.
    pub view: SubscriberView,
    /// When it lapses unless refreshed.
    pub expires_at: Millis,
}

/// What a poll did to the table.
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
    /// True when the caller is subscribed after the poll.
    pub fn is_subscribed(self) -> bool {
        matches!(self, Subscribed::New | Subscribed::Refreshed)
    }
}

/// The subscription table.
pub struct Subscribers {
    config: SubscriberConfig,
    by_service: HashMap<ServiceKey, Vec<Subscription>, foldhash::fast::FixedState>,
    per_ip: HashMap<IpAddr, usize, foldhash::fast::FixedState>,
    total: usize,
}

impl Subscribers {
    /// An empty table.
    pub fn new(config: SubscriberConfig) -> Self {
        Subscribers {
            config,
            by_service: HashMap::default(),
            per_ip: HashMap::default(),
            total: 0,
        }
    }

    /// Subscribes `addr` to `service` with `view`, or renews its lease.
    pub fn subscribe(
        &mut self,
        service: &ServiceKey,
        addr: SocketAddr,
        clusters: &str,
        healthy_only: bool,
        now: Millis,
    ) -> Subscribed {
        let expires_at = now.plus(self.config.lease_ms);
        if let Some(list) = self.by_service.get_mut(service) {
            if let Some(s) = list.iter_mut().find(|s| {
                s.addr == addr
                    && *s.view.clusters == *clusters
                    && s.view.healthy_only == healthy_only
            }) {
                s.expires_at = expires_at;
                return Subscribed::Refreshed;
            }
        }
        if self.total >= self.config.max_total {
            return Subscribed::TotalLimit;
        }
        let from_ip = self.per_ip.entry(addr.ip()).or_insert(0);
        if *from_ip >= self.config.max_per_ip {
            return Subscribed::PerIpLimit;
        }
        *from_ip += 1;
        self.total += 1;
        let sub = Subscription {
            addr,
            view: SubscriberView {
                clusters: Arc::from(clusters),
                healthy_only,
            },
            expires_at,
        };
        match self.by_service.get_mut(service) {
            Some(list) => list.push(sub),
            None => {
                self.by_service.insert(service.clone(), vec![sub]);
            }
        }
        Subscribed::New
    }

    /// Live subscriptions of `service`, appended to `out` sorted by view so
    /// callers can encode once per view.
    pub fn targets(&self, service: &ServiceKey, now: Millis, out: &mut Vec<Subscription>) {
        let start = out.len();
        if let Some(list) = self.by_service.get(service) {
            out.extend(list.iter().filter(|s| s.expires_at > now).cloned());
        }
        out[start..].sort_by(|a, b| a.view.cmp(&b.view));
    }

    /// True when `addr` holds a live subscription to `service`.
    pub fn is_subscribed(&self, service: &ServiceKey, addr: SocketAddr, now: Millis) -> bool {
        self.by_service
            .get(service)
            .is_some_and(|l| l.iter().any(|s| s.addr == addr && s.expires_at > now))
    }

    /// Removes lapsed subscriptions; returns how many.
    pub fn expire(&mut self, now: Millis) -> usize {
        let mut removed = 0;
        let per_ip = &mut self.per_ip;
        self.by_service.retain(|_, list| {
            list.retain(|s| {
                let live = s.expires_at > now;
                if !live {
                    removed += 1;
                    if let Some(n) = per_ip.get_mut(&s.addr.ip()) {
                        *n -= 1;
                    }
                }
                live
            });
            !list.is_empty()
        });
        self.per_ip.retain(|_, n| *n > 0);
        self.total -= removed;
        removed
    }

    /// Subscriptions held.
    pub fn len(&self) -> usize {
        self.total
    }

    /// True when nobody is subscribed.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ServiceKey {
        ServiceKey::new("public", "DEFAULT_GROUP@@demo")
    }

    fn at(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn subscribe_refresh_and_lapse() {
        let mut t = Subscribers::new(SubscriberConfig::default());
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
        let mut t = Subscribers::new(SubscriberConfig {
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
        let other = SocketAddr::from(([127, 0, 0, 2], 1));
        assert!(t
            .subscribe(&key(), other, "", false, Millis(0))
            .is_subscribed());
        let third = SocketAddr::from(([127, 0, 0, 3], 1));
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
}
