//! Expiry, the sweeper's side of the store: bounded passes over each
//! shard that mark ephemeral instances unhealthy after their beat timeout,
//! delete them after their delete timeout and remove auto-created services
//! empty past the TTL. A pass scans the shard's lease slab without a lock,
//! then works in steps that each hold the writer lock for about
//! [`EXPIRE_STEP_BUDGET`] instances.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{cell_of, replica, ServiceCell, Shard, Store, Writer};
use crate::event::ChangeEvent;
use crate::instance_list::InstanceList;
use crate::lease::{self, LeaseSlot};
use crate::model::{Instance, Millis, ServiceKey};
use crate::snapshot::ServiceId;

/// What one expiry pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpireReport {
    /// One event per changed service.
    pub events: Vec<ChangeEvent>,
    /// Instances marked unhealthy.
    pub unhealthy: usize,
    /// Instances deleted.
    pub removed: usize,
    /// Empty auto-created services removed.
    pub services_removed: usize,
}

/// Instances a sweeper step touches under one hold of a shard's writer
/// lock, at most (a larger service is expired whole, alone): a few hundred
/// microseconds of copying.
pub const EXPIRE_STEP_BUDGET: usize = 4_096;

/// A sweeper pass in progress: which shard, and what is left of it.
/// Made by [`Store::expire_pass`], advanced by [`Store::expire_step`].
pub struct ExpirePass {
    now: Millis,
    shard: usize,
    phase: Phase,
    /// Due slots of the shard not yet resolved to their service.
    due: Vec<LeaseSlot>,
    /// Due slots with their service, grouped by service.
    work: Vec<(Arc<ServiceId>, LeaseSlot)>,
    holds: usize,
    max_held: usize,
}

impl ExpirePass {
    /// Writer-lock holds taken so far.
    pub fn holds(&self) -> usize {
        self.holds
    }

    /// Most instances touched under one hold so far.
    pub fn max_held(&self) -> usize {
        self.max_held
    }

    fn note_hold(&mut self, touched: usize) {
        self.holds += 1;
        self.max_held = self.max_held.max(touched);
    }
}

/// Where a pass is within its current shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Scan the lease slab (no lock).
    Scan,
    /// Resolve due slots to their services, `budget` per hold.
    Resolve,
    /// Expire services, about `budget` instances per hold.
    Expire,
    /// Look at emptied services; `left` of the list still to visit.
    Emptied { left: Option<usize> },
    /// This shard is finished.
    Done,
}

impl Store {
    /// One whole sweeper pass: marks ephemeral instances unhealthy after
    /// their beat timeout, deletes them after their delete timeout, and
    /// removes auto-created services empty for longer than the configured
    /// TTL. Persistent instances are never touched.
    ///
    /// Runs [`Store::expire_step`] with [`EXPIRE_STEP_BUDGET`] until the
    /// pass is done; the sweeper calls the steps itself, publishing the
    /// events of each as it goes.
    pub fn expire(&self, now: Millis) -> ExpireReport {
        let mut pass = self.expire_pass(now);
        let mut report = ExpireReport::default();
        while self.expire_step(&mut pass, EXPIRE_STEP_BUDGET, &mut report) {}
        report
    }

    /// [`Store::expire`] restricted to the services `owned` accepts (see
    /// [`Store::expire_step_owned`]).
    pub fn expire_owned(&self, now: Millis, owned: impl Fn(&ServiceKey) -> bool) -> ExpireReport {
        let mut pass = self.expire_pass(now);
        let mut report = ExpireReport::default();
        while self.expire_step_owned(&mut pass, EXPIRE_STEP_BUDGET, &mut report, &owned) {}
        report
    }

    /// Starts a sweeper pass at `now`; [`Store::expire_step`] advances it.
    pub fn expire_pass(&self, now: Millis) -> ExpirePass {
        ExpirePass {
            now,
            shard: 0,
            phase: Phase::Scan,
            due: Vec::new(),
            work: Vec::new(),
            holds: 0,
            max_held: 0,
        }
    }

    /// Advances `pass` by one bounded step and adds what it did to
    /// `report`. Returns `false` once the pass is finished.
    ///
    /// A step takes at most one shard's writer lock once, and under it
    /// touches about `budget` instances: lease slots resolved to their
    /// service, instances copied into a service's next snapshot, or empty
    /// services looked at. A service is always expired whole, in one
    /// snapshot, so a service larger than `budget` makes one step alone.
    /// Between steps the lock is free: writers and beats of that shard go
    /// ahead, and everything a step acts on is re-checked under the lock
    /// (a lease renewed or a slot reused since the scan is left alone).
    ///
    /// The scan itself (one linear pass over the shard's lease slab,
    /// 8 bytes per instance) takes no lock.
    pub fn expire_step(
        &self,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
    ) -> bool {
        self.expire_step_owned(pass, budget, report, &|_| true)
    }

    /// [`Store::expire_step`] that expires only the services `owned`
    /// accepts: in a cluster only a service's responsible node expires it.
    /// Due leases of other services are pushed one first-check period
    /// ahead instead (one look per period), and a node that takes a service
    /// over renews them with [`Store::refresh_leases`] before it owns it.
    pub fn expire_step_owned(
        &self,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
        owned: &dyn Fn(&ServiceKey) -> bool,
    ) -> bool {
        let budget = budget.max(1);
        let Some(shard) = self.shards.get(pass.shard) else {
            return false;
        };
        match pass.phase {
            Phase::Scan => scan(shard, pass),
            Phase::Resolve => resolve_due(shard, pass, budget),
            Phase::Expire => self.expire_due(shard, pass, budget, report, owned),
            Phase::Emptied { left } => self.visit_emptied(shard, pass, left, budget, report),
            Phase::Done => {}
        }
        if pass.phase == Phase::Done {
            pass.shard += 1;
            pass.phase = Phase::Scan;
        }
        pass.shard < self.shards.len()
    }

    /// The `Expire` phase's step: whole services from the back of the
    /// resolved work, about `budget` instances under one writer-lock hold.
    fn expire_due(
        &self,
        shard: &Shard,
        pass: &mut ExpirePass,
        budget: usize,
        report: &mut ExpireReport,
        owned: &dyn Fn(&ServiceKey) -> bool,
    ) {
        let now = pass.now;
        let mut w = shard.writer.lock();
        let map = shard.services.pin();
        let mut touched = 0;
        let mut slots = Vec::new();
        while touched < budget {
            let Some((id, _)) = pass.work.last() else {
                break;
            };
            let id = id.clone();
            slots.clear();
            while let Some((c, s)) = pass.work.last() {
                if !Arc::ptr_eq(c, &id) {
                    break;
                }
                // Still this service's slot? It may have been freed
                // and handed to another instance since the scan.
                if matches!(w.owners.get(s.0 as usize), Some(Some(o)) if Arc::ptr_eq(o, &id)) {
                    slots.push(*s);
                }
                pass.work.pop();
            }
            slots.sort_unstable();
            // A slot still owned belongs to a live instance, so its
            // service is in the map; deleted, it owns no slot.
            let Some(cell) = cell_of(&map, &id) else {
                touched += 1;
                continue;
            };
            touched += cell.snapshot.load().instances.len().max(1);
            if slots.is_empty() {
                continue;
            }
            if owned(&id.key) {
                self.expire_service(shard, &mut w, cell, &slots, now, report);
            } else {
                replica::defer_leases(shard, cell, &slots, now);
            }
        }
        drop(map);
        drop(w);
        pass.note_hold(touched);
        if pass.work.is_empty() {
            pass.phase = if shard.has_emptied.load(Ordering::Relaxed) {
                Phase::Emptied { left: None }
            } else {
                Phase::Done
            };
        }
    }

    /// The `Emptied` phase's step: up to `budget` of the emptied services
    /// that were queued when the phase began (`left` of them remain).
    fn visit_emptied(
        &self,
        shard: &Shard,
        pass: &mut ExpirePass,
        left: Option<usize>,
        budget: usize,
        report: &mut ExpireReport,
    ) {
        let now = pass.now;
        let mut w = shard.writer.lock();
        // Visit each service that was on the list when this phase
        // began once; kept ones go to the back.
        let left = left.unwrap_or(w.emptied.len());
        let take = left.min(budget);
        self.remove_empty_services(shard, &mut w, now, take, report);
        drop(w);
        pass.note_hold(take);
        pass.phase = if left > take {
            Phase::Emptied {
                left: Some(left - take),
            }
        } else {
            Phase::Done
        };
    }

    fn expire_service(
        &self,
        shard: &Shard,
        w: &mut Writer,
        cell: &ServiceCell,
        due: &[LeaseSlot],
        now: Millis,
        report: &mut ExpireReport,
    ) {
        let old = cell.snapshot.load_full();
        let mut instances: Vec<Instance> = Vec::with_capacity(old.instances.len());
        let mut changed = false;
        for inst in old.instances.iter() {
            if !inst.lease.is_some() || due.binary_search(&inst.lease).is_err() {
                instances.push(inst.clone());
                continue;
            }
            // Re-read under the lock: a beat may have renewed it since the scan.
            let deadline = shard.leases.deadline(inst.lease);
            if lease::due_at(deadline) > now {
                instances.push(inst.clone());
                continue;
            }
            let last = lease::last_beat(deadline, &inst.timeouts);
            if now >= last.plus(u64::from(inst.timeouts.delete_timeout_ms)) {
                self.release_lease(shard, w, inst.lease);
                shard.instances_count.fetch_sub(1, Ordering::Relaxed);
                report.removed += 1;
                changed = true;
                continue;
            }
            let mut kept = inst.clone();
            if inst.healthy && now >= last.plus(u64::from(inst.timeouts.beat_timeout_ms)) {
                kept.healthy = false;
                report.unhealthy += 1;
                changed = true;
            }
            // Next look at the delete time, unless a beat renews it first.
            shard.leases.postpone(
                inst.lease,
                deadline,
                lease::postponed_deadline(last, &inst.timeouts),
            );
            instances.push(kept);
        }
        if changed {
            let instances = InstanceList::from_sorted(instances);
            let written = self.publish(shard, w, cell, &old, instances, now);
            report.events.extend(written.event);
        }
    }

    /// Looks at the `take` oldest entries of the shard's emptied list:
    /// removes services empty past the TTL, drops ones no longer empty,
    /// and puts the rest back at the end.
    fn remove_empty_services(
        &self,
        shard: &Shard,
        w: &mut Writer,
        now: Millis,
        take: usize,
        report: &mut ExpireReport,
    ) {
        let ttl = self.config.empty_service_ttl_ms;
        let map = shard.services.pin();
        for _ in 0..take.min(w.emptied.len()) {
            let Some(id) = w.emptied.pop_front() else {
                break;
            };
            // Deleted (or deleted and re-created) since it was queued.
            let Some(cell) = cell_of(&map, &id) else {
                continue;
            };
            let snap = cell.snapshot.load();
            let Some(since) = snap.emptied_at() else {
                continue;
            };
            if snap.is_explicit() || !snap.instances.is_empty() {
                continue;
            }
            if now < since.plus(ttl) {
                drop(snap);
                w.emptied.push_back(id);
                continue;
            }
            // `cell_of` found this incarnation, and only this shard's
            // writer (us) changes the map: the entry removed is this one.
            map.remove(&id.key.as_ref());
            self.index.remove(&id.key);
            shard.services_count.fetch_sub(1, Ordering::Relaxed);
            report.services_removed += 1;
        }
        shard
            .has_emptied
            .store(!w.emptied.is_empty(), Ordering::Relaxed);
    }
}

/// The `Scan` phase: the shard's due lease slots, read without a lock.
fn scan(shard: &Shard, pass: &mut ExpirePass) {
    let now = pass.now;
    pass.due.clear();
    pass.work.clear();
    shard.leases.scan_due(now, &mut pass.due);
    let emptied = shard.has_emptied.load(Ordering::Relaxed);
    pass.phase = if !pass.due.is_empty() {
        Phase::Resolve
    } else if emptied {
        Phase::Emptied { left: None }
    } else {
        Phase::Done
    };
}

/// The `Resolve` phase's step: up to `budget` due slots resolved to the
/// service that owns them, under one writer-lock hold.
fn resolve_due(shard: &Shard, pass: &mut ExpirePass, budget: usize) {
    let w = shard.writer.lock();
    let take = pass.due.len().min(budget);
    for slot in pass.due.drain(pass.due.len() - take..) {
        if let Some(Some(owner)) = w.owners.get(slot.0 as usize) {
            pass.work.push((owner.clone(), slot));
        }
    }
    drop(w);
    pass.note_hold(take);
    if pass.due.is_empty() {
        // Grouped by service, each group's slots sorted; taken
        // from the back in `Expire`.
        pass.work
            .sort_by_key(|(c, s)| std::cmp::Reverse((Arc::as_ptr(c) as usize, *s)));
        pass.phase = Phase::Expire;
    }
}
