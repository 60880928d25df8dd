//! The server's namespace table: the core's [`Namespaces`] plus what needs
//! the store or the disk.
//!
//! Every door's namespace endpoints (v1 console, v2 console, v3 admin) and
//! the web console go through [`NamespaceBook`]: a delete asks the store
//! whether the namespace still holds services, a quota check counts the
//! namespace's services and instances, and with `--data-dir` every change
//! is saved to `namespaces.json` there (written to a temporary file, then
//! renamed over the old one, so a crash leaves the old or the new table,
//! never half of one) and loaded at start. In a Raft cluster the table is
//! per node: it is saved to each node's data dir but not replicated through
//! the log (a namespace is created on each node it is needed on).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Context;
use registry_core::namespace::{Growth, NamespaceError};
use registry_core::{Namespace, Namespaces, Quota, ServiceRef, Store};
use serde::{Deserialize, Serialize};

/// The file under `--data-dir` holding the custom namespaces.
pub const FILE_NAME: &str = "namespaces.json";

/// The namespace table with its store checks and its file (see the module
/// docs). Written by the namespace endpoints, rarely; read by every write
/// that registers (one atomic load unless a quota is set).
#[derive(Debug, Default)]
pub struct NamespaceBook {
    table: Namespaces,
    file: Option<PathBuf>,
    /// Serialises saves, so two changes never interleave their files.
    saving: Mutex<()>,
    /// Held by a register into a namespace with a quota from its check to
    /// its store write, so two concurrent registers cannot both pass a
    /// quota that has room for one (see [`NamespaceBook::gate`]).
    quota_gate: parking_lot::Mutex<()>,
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
        let id = ns.id.clone();
        self.table.create(ns)?;
        self.save().inspect_err(|_| {
            let _ = self.table.delete(&id, 0);
        })
    }

    /// Changes a namespace and saves the table.
    ///
    /// # Errors
    /// The table's refusal, or a failed save.
    pub fn update(&self, ns: Namespace) -> Result<(), BookError> {
        self.table.update(ns)?;
        self.save()
    }

    /// Deletes a namespace that holds no services, and saves the table.
    ///
    /// # Errors
    /// The table's refusal (unknown, default, holding services), or a
    /// failed save.
    pub fn delete(&self, id: &str, store: &Store) -> Result<(), BookError> {
        let services = services_in(store, id);
        self.table.delete(id, services)?;
        self.save()
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

    fn save(&self) -> Result<(), BookError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let _saving = self.saving.lock().unwrap_or_else(|e| e.into_inner());
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
