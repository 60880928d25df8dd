//! The server's namespace table: the core's [`Namespaces`] plus what needs
//! the store, the disk or the other members.
//!
//! Every door's namespace endpoints (v1 console, v2 console, v3 admin) and
//! the web console change it through the one write path
//! (`write::Command::Namespace*`), which checks a delete against the store
//! (a namespace holding services is kept) and lands here. With
//! `--data-dir` every change is saved to `namespaces.json` there (written
//! to a temporary file, then renamed over the old one, so a crash leaves
//! the old or the new table, never half of one) and loaded at start.
//!
//! In a cluster the table is cluster-wide. With Raft (`--data-dir`) the
//! changes are log entries every node applies in order, and snapshots
//! carry the table ([`NamespaceBook::restore`]). Without Raft every change
//! is stamped ([`NamespaceBook::set`]: the changing node's wall clock,
//! moved past every stamp it has seen; deletes leave a tombstone) and the
//! cluster exchanges whole tables, keeping per id the later stamp
//! ([`NamespaceBook::merge`]): after each change and every few seconds, so
//! a member that missed a change or restarted empty converges.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use registry_core::namespace::{check_id, check_name, Growth, NamespaceError};
use registry_core::{Namespace, Namespaces, Quota, ServiceRef, Store};
use registry_proto::distro::{NamespaceEntry, NamespaceSet};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// The file under `--data-dir` holding the custom namespaces.
pub const FILE_NAME: &str = "namespaces.json";

/// The namespace table with its store checks and its file (see the module
/// docs). Written by the namespace endpoints, rarely; read by every write
/// that registers (one atomic load unless a quota is set).
#[derive(Debug, Default)]
pub struct NamespaceBook {
    table: Namespaces,
    file: Option<PathBuf>,
    /// Serialises changes (table, stamps and file as one step) and holds
    /// the replication stamps.
    stamps: Mutex<Stamps>,
    /// Woken after every change, for the cluster's exchange of tables.
    changed: Notify,
    /// Held by a register into a namespace with a quota from its check to
    /// its store write, so two concurrent registers cannot both pass a
    /// quota that has room for one (see [`NamespaceBook::gate`]).
    quota_gate: parking_lot::Mutex<()>,
    /// Refuse to delete a namespace that still holds services
    /// (`--namespace-delete-protection`; Nacos deletes it).
    protect_non_empty: bool,
}

/// Per id, the stamp of its last change and whether that was a delete
/// (a tombstone), and the highest stamp seen.
#[derive(Debug, Default)]
struct Stamps {
    by_id: BTreeMap<String, (u64, bool)>,
    clock: u64,
}

impl Stamps {
    /// Stamps a local change of `id`: later than anything seen.
    fn stamp(&mut self, id: &str, deleted: bool) {
        let now = crate::clock::Clock::wall_ms().max(self.clock + 1);
        self.clock = now;
        self.by_id.insert(id.to_owned(), (now, deleted));
    }
}

/// A namespace as saved.
#[derive(Serialize, Deserialize)]
struct Saved {
    id: String,
    name: String,
    #[serde(default)]
    desc: String,
    #[serde(default)]
    max_services: Option<u32>,
    #[serde(default)]
    max_instances: Option<u32>,
}

impl NamespaceBook {
    /// The book; with `data_dir`, loaded from its file (absent: empty).
    ///
    /// # Errors
    /// A file that cannot be read or parsed.
    pub fn open(data_dir: Option<&Path>) -> anyhow::Result<NamespaceBook> {
        let book = NamespaceBook {
            file: data_dir.map(|d| d.join(FILE_NAME)),
            ..NamespaceBook::default()
        };
        if let Some(path) = &book.file {
            match std::fs::read(path) {
                Ok(bytes) => {
                    let saved: Vec<Saved> = serde_json::from_slice(&bytes)
                        .with_context(|| format!("parsing {}", path.display()))?;
                    book.table.restore(
                        saved
                            .into_iter()
                            .map(|s| Namespace {
                                id: s.id,
                                name: s.name,
                                desc: s.desc,
                                quota: Quota {
                                    max_services: s.max_services,
                                    max_instances: s.max_instances,
                                },
                            })
                            .collect(),
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
            }
        }
        Ok(book)
    }

    /// The table, for reads.
    pub fn table(&self) -> &Namespaces {
        &self.table
    }

    /// Creates a namespace and saves the table.
    ///
    /// # Errors
    /// The table's refusal, or a failed save (then the namespace is gone
    /// again).
    pub fn create(&self, ns: Namespace) -> Result<(), BookError> {
        let mut stamps = self.lock();
        let id = ns.id.clone();
        self.table.create(ns)?;
        self.save().inspect_err(|_| {
            let _ = self.table.delete(&id, 0);
        })?;
        stamps.stamp(&id, false);
        self.changed.notify_one();
        Ok(())
    }

    /// Changes a namespace and saves the table.
    ///
    /// # Errors
    /// The table's refusal, or a failed save.
    pub fn update(&self, ns: Namespace) -> Result<(), BookError> {
        let mut stamps = self.lock();
        let id = ns.id.clone();
        self.table.update(ns)?;
        stamps.stamp(&id, false);
        self.changed.notify_one();
        self.save()
    }

    /// Deletes a namespace that holds no services, and saves the table.
    ///
    /// # Errors
    /// The table's refusal (unknown, default, holding services), or a
    /// failed save.
    pub fn delete(&self, id: &str, store: &Store) -> Result<(), BookError> {
        self.deletable(id, store)?;
        self.remove(id)
    }

    /// With `on`, a namespace that still holds services is not deleted.
    /// Off by default, as in Nacos 3 (`NamespaceOperationService.removeNamespace`
    /// removes the record and leaves the services where they are).
    pub fn with_delete_protection(mut self, on: bool) -> NamespaceBook {
        self.protect_non_empty = on;
        self
    }

    /// Whether this node would delete `id` now: it exists, is not the
    /// default namespace, and (with delete protection) the store, which
    /// holds every member's services, replicated, has no service in it.
    ///
    /// # Errors
    /// Why not.
    pub fn deletable(&self, id: &str, store: &Store) -> Result<(), NamespaceError> {
        if registry_core::namespace::canonical(id) == registry_core::DEFAULT_NAMESPACE {
            return Err(NamespaceError::DefaultImmutable);
        }
        if !self.table.exists(id) {
            return Err(NamespaceError::NotFound(id.to_owned()));
        }
        if !self.protect_non_empty {
            return Ok(());
        }
        match services_in(store, id) {
            0 => Ok(()),
            services => Err(NamespaceError::NotEmpty {
                id: id.to_owned(),
                services,
            }),
        }
    }

    /// Deletes a namespace whatever this node's store holds (a committed
    /// or replicated delete, checked where it was made), and saves.
    ///
    /// # Errors
    /// The table's refusal (unknown, default), or a failed save.
    pub fn remove(&self, id: &str) -> Result<(), BookError> {
        let mut stamps = self.lock();
        self.table.delete(id, 0)?;
        stamps.stamp(id, true);
        self.changed.notify_one();
        self.save()
    }

    /// Replaces the whole table (a Raft snapshot's), and saves it.
    ///
    /// # Errors
    /// A failed save.
    pub fn restore(&self, all: Vec<Namespace>) -> Result<(), BookError> {
        let _stamps = self.lock();
        self.table.restore(all);
        self.changed.notify_one();
        self.save()
    }

    /// Woken after every change (see the module docs).
    pub fn changed(&self) -> &Notify {
        &self.changed
    }

    /// The table as the cluster exchanges it: every namespace and
    /// tombstone with its stamp (0 for one loaded from disk, never changed
    /// since).
    pub fn set(&self) -> NamespaceSet {
        let stamps = self.lock();
        let mut items: Vec<NamespaceEntry> = self
            .table
            .list()
            .into_iter()
            .filter(|n| !n.is_default())
            .map(|n| NamespaceEntry {
                stamp: stamps.by_id.get(&n.id).map_or(0, |s| s.0),
                deleted: false,
                max_services: n.quota.max_services,
                max_instances: n.quota.max_instances,
                name: n.name,
                desc: n.desc,
                id: n.id,
            })
            .collect();
        items.extend(
            stamps
                .by_id
                .iter()
                .filter(|(_, (_, deleted))| *deleted)
                .map(|(id, (stamp, _))| NamespaceEntry {
                    id: id.clone(),
                    stamp: *stamp,
                    deleted: true,
                    ..NamespaceEntry::default()
                }),
        );
        NamespaceSet { items }
    }

    /// Merges a peer's table: per id, the entry with the later stamp
    /// wins. Every entry is checked first; one that fails refuses the
    /// whole message, changing nothing. Returns how many ids changed.
    ///
    /// # Errors
    /// The first bad entry, and why.
    pub fn merge(&self, peer: &NamespaceSet) -> Result<usize, String> {
        peer.check()?;
        for e in peer.items.iter().filter(|e| !e.deleted) {
            check_id(&e.id)
                .and_then(|()| check_name(&e.name))
                .map_err(|err| err.to_string())?;
        }
        let mut stamps = self.lock();
        let mut changed = 0;
        for e in &peer.items {
            stamps.clock = stamps.clock.max(e.stamp);
            let mine = self.entry(&stamps, &e.id);
            if mine.as_ref().is_some_and(|m| !e.wins(m)) {
                continue;
            }
            if e.deleted {
                let _ = self.table.delete(&e.id, 0);
            } else {
                let ns = Namespace {
                    id: e.id.clone(),
                    name: e.name.clone(),
                    desc: e.desc.clone(),
                    quota: Quota {
                        max_services: e.max_services,
                        max_instances: e.max_instances,
                    },
                };
                let done = match self.table.exists(&e.id) {
                    true => self.table.update(ns),
                    false => self.table.create(ns),
                };
                if done.is_err() {
                    continue;
                }
            }
            stamps.by_id.insert(e.id.clone(), (e.stamp, e.deleted));
            changed += 1;
        }
        if changed > 0 {
            self.changed.notify_one();
            if let Err(e) = self.save() {
                tracing::warn!(error = %e, "merged namespaces not saved");
            }
        }
        Ok(changed)
    }

    /// This node's entry for `id`, if it has a namespace or a tombstone.
    fn entry(&self, stamps: &Stamps, id: &str) -> Option<NamespaceEntry> {
        let stamp = stamps.by_id.get(id).copied();
        match self.table.get(id) {
            Some(n) => Some(NamespaceEntry {
                id: n.id,
                stamp: stamp.map_or(0, |s| s.0),
                deleted: false,
                name: n.name,
                desc: n.desc,
                max_services: n.quota.max_services,
                max_instances: n.quota.max_instances,
            }),
            None => stamp.map(|(stamp, _)| NamespaceEntry {
                id: id.to_owned(),
                stamp,
                deleted: true,
                ..NamespaceEntry::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stamps> {
        self.stamps.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gate a register into `namespace` holds from its quota check to
    /// its store write; `None` (nothing to hold) when the namespace has no
    /// quota, so registers elsewhere pay one relaxed load. One gate for
    /// every quota-bound namespace: such registers are admin-sized, and
    /// one lock cannot deadlock.
    pub fn gate(&self, namespace: &str) -> Option<parking_lot::MutexGuard<'_, ()>> {
        self.table.quota(namespace)?;
        Some(self.quota_gate.lock())
    }

    /// Whether registering `addr` into `service` keeps its namespace
    /// within its quota; free when no namespace has a quota.
    ///
    /// # Errors
    /// The quota it would pass.
    pub fn admit(
        &self,
        store: &Store,
        service: ServiceRef<'_>,
        addr: registry_core::InstanceAddr<'_>,
        ephemeral: bool,
    ) -> Result<(), NamespaceError> {
        let Some(quota) = self.table.quota(service.namespace) else {
            return Ok(());
        };
        let snapshot = store.snapshot(service);
        let growth = Growth {
            services: services_in(store, service.namespace),
            instances: instances_in(store, service.namespace),
            new_service: snapshot.is_none(),
            new_instance: snapshot.is_none_or(|s| s.find(addr, ephemeral).is_none()),
        };
        Namespaces::admit(service.namespace, quota, growth)
    }

    /// Writes the table's file; the caller holds the change lock.
    fn save(&self) -> Result<(), BookError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let saved: Vec<Saved> = self
            .table
            .list()
            .into_iter()
            .filter(|n| !n.is_default())
            .map(|n| Saved {
                id: n.id,
                name: n.name,
                desc: n.desc,
                max_services: n.quota.max_services,
                max_instances: n.quota.max_instances,
            })
            .collect();
        let text = serde_json::to_vec_pretty(&saved).map_err(|e| BookError::Save(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| BookError::Save(format!("{}: {e}", path.display())))
    }
}

/// Services the store holds in namespace `id`.
pub fn services_in(store: &Store, id: &str) -> usize {
    let id = registry_core::namespace::canonical(id);
    store
        .namespace_counts()
        .into_iter()
        .find(|(ns, _)| ns == id)
        .map_or(0, |(_, n)| n)
}

/// Instances the store holds in namespace `id` (a scan of its services:
/// only quota checks and namespace pages ask).
pub fn instances_in(store: &Store, id: &str) -> usize {
    let mut keys = Vec::new();
    store.scan_services(id, |k| {
        keys.push(k.clone());
        true
    });
    keys.iter()
        .filter_map(|k| store.snapshot(k.as_ref()))
        .map(|s| s.instances().len())
        .sum()
}

/// Why a namespace change was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BookError {
    /// The table refused it.
    #[error(transparent)]
    Refused(#[from] NamespaceError),
    /// The table could not be saved under `--data-dir`.
    #[error("namespaces could not be saved: {0}")]
    Save(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(id: &str) -> Namespace {
        Namespace {
            id: id.into(),
            name: id.into(),
            desc: String::new(),
            quota: Quota {
                max_services: Some(4),
                max_instances: None,
            },
        }
    }

    #[test]
    fn the_table_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let book = NamespaceBook::open(Some(dir.path())).unwrap();
        book.create(ns("dev")).unwrap();
        book.create(ns("qa")).unwrap();
        book.delete("qa", &Store::new(Default::default())).unwrap();
        drop(book);
        let again = NamespaceBook::open(Some(dir.path())).unwrap();
        let ids: Vec<String> = again.table().list().into_iter().map(|n| n.id).collect();
        assert_eq!(ids, ["public", "dev"]);
        assert_eq!(again.table().quota("dev").unwrap().max_services, Some(4));
    }

    /// Two members exchanging tables: creates, updates and deletes (as
    /// tombstones) reach the other, and a stale table changes nothing.
    #[test]
    fn tables_merge_by_stamp_and_deletes_travel() {
        let (a, b) = (NamespaceBook::default(), NamespaceBook::default());
        a.create(ns("dev")).unwrap();
        assert_eq!(b.merge(&a.set()), Ok(1));
        assert!(b.table().exists("dev"));
        let before = a.set();
        a.update(Namespace {
            name: "Dev".into(),
            ..ns("dev")
        })
        .unwrap();
        assert_eq!(b.merge(&a.set()), Ok(1));
        assert_eq!(b.table().get("dev").unwrap().name, "Dev");
        b.remove("dev").unwrap();
        assert_eq!(a.merge(&b.set()), Ok(1));
        assert!(!a.table().exists("dev"));
        // An old table (from before the delete) does not bring it back,
        // and merging what is held already changes nothing.
        assert_eq!(a.merge(&before), Ok(0));
        assert_eq!(b.merge(&a.set()), Ok(0));
        assert!(!a.table().exists("dev") && !b.table().exists("dev"));
        // A later create of the same id beats the tombstone.
        b.create(ns("dev")).unwrap();
        assert_eq!(a.merge(&b.set()), Ok(1));
        assert!(a.table().exists("dev"));
    }

    #[test]
    fn a_table_with_one_bad_entry_is_refused_whole() {
        let book = NamespaceBook::default();
        let entry = |id: &str, name: &str| NamespaceEntry {
            id: id.into(),
            stamp: 5,
            name: name.into(),
            ..NamespaceEntry::default()
        };
        for (items, why) in [
            (
                vec![entry("ok", "ok"), entry("a b", "x")],
                "mismatch the pattern",
            ),
            (
                vec![entry("ok", "ok"), entry("fine", "a@b")],
                "illegal char",
            ),
            (
                vec![entry("ok", "ok"), entry("ok", "again")],
                "listed twice",
            ),
            (vec![entry("public", "p")], "not replicated"),
        ] {
            let err = book.merge(&NamespaceSet { items }).unwrap_err();
            assert!(err.contains(why), "{err}");
            assert_eq!(book.table().list().len(), 1, "nothing applied");
        }
    }

    /// Registers racing into a namespace with room for one instance, each
    /// round released at once by a barrier: exactly one is admitted
    /// (the quota check and the store write are one step under the gate).
    #[test]
    fn racing_registers_cannot_pass_a_quota_together() {
        use crate::write::{Command, Targets, Writer};
        use registry_core::{InstanceSpec, Millis};
        use std::sync::{Arc, Barrier};
        let store = Arc::new(Store::new(Default::default()));
        let book = Arc::new(NamespaceBook::open(None).unwrap());
        let writer = Writer::new(
            store.clone(),
            Arc::default(),
            Arc::new(Targets::default()),
            None,
            false,
        )
        .with_namespaces(book.clone());
        const RACERS: u16 = 8;
        for round in 0..200 {
            let id = format!("race{round}");
            book.create(Namespace {
                quota: Quota {
                    max_services: None,
                    max_instances: Some(1),
                },
                ..ns(&id)
            })
            .unwrap();
            let barrier = Barrier::new(usize::from(RACERS));
            let admitted: usize = std::thread::scope(|s| {
                let racers: Vec<_> = (1..=RACERS)
                    .map(|port| {
                        let (writer, barrier, id) = (&writer, &barrier, &id);
                        s.spawn(move || {
                            let spec = InstanceSpec::new("DEFAULT", [10, 0, 0, 1].into(), port);
                            barrier.wait();
                            let command = Command::Register {
                                service: ServiceRef::new(id, "DEFAULT_GROUP@@a"),
                                instance: &spec,
                                strict: false,
                            };
                            usize::from(writer.apply(command, Millis(1)).is_ok())
                        })
                    })
                    .collect();
                racers.into_iter().map(|r| r.join().unwrap()).sum()
            });
            assert_eq!(admitted, 1, "round {round}");
            assert_eq!(instances_in(&store, &id), 1, "round {round}");
        }
    }
}
