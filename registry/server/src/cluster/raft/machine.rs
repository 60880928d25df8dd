//! The Raft state machine: the persistent instances and explicit services
//! of the in-memory store, as `openraft`'s [`RaftStateMachine`].
//!
//! Applying an entry runs each typed command through the one write path
//! ([`crate::write::Writer::apply_committed`]), so validation, limits and
//! change events are the ones a single node has, whichever door took the
//! write; format-1 commands are read as the typed writes they meant.
//! Every node applies the same commands in the same order; the leader's
//! outcome is what the client gets.
//!
//! The machine itself lives in memory (the store). Its durable form is the
//! last snapshot (kept in `raft.redb`'s `meta` table) plus the log after
//! it: a restart loads the snapshot, then openraft re-applies the log up to
//! the committed index. A snapshot is an [`Image`]: every explicit
//! service's settings and every persistent instance, captured when openraft
//! asks for a builder (between two applies, so it is exactly the state at
//! the last applied entry) and encoded off the apply path; it carries the
//! namespace table too, whose changes are log entries like the rest.
//!
//! Distro (ephemeral data) writes the same store; its merges of replicated
//! service states keep the persistent part as this machine left it and
//! take [`super::Shared::apply_lock`] so the two never interleave inside
//! one service.

use std::collections::HashSet;
use std::io::Cursor;
use std::net::IpAddr;
use std::sync::{Arc, Weak};

use openraft::storage::{RaftStateMachine, Snapshot, SnapshotMeta};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, StorageError, StorageIOError,
    StoredMembership,
};
use redb::Database;
use registry_core::{InstanceAddr, InstanceSpec, Metadata, ServiceRef, ServiceSpec, Store};
use registry_proto::raft::{
    Batch, Command as LogCommand, NodeId, Outcome, Outcomes, Refusal, TypeConfig, COMMAND_FORMAT,
};
use serde::{Deserialize, Serialize};

use super::log::{read_meta, write_meta};
use super::Shared;
use crate::state::App;
use crate::write::{wire, Command};

type StoreResult<T> = Result<T, StorageError<NodeId>>;
type Membership = StoredMembership<NodeId, BasicNode>;

/// The persistent part of the store, as a snapshot carries it.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// Explicit services' settings.
    pub services: Vec<ServiceRecord>,
    /// Persistent instances.
    pub instances: Vec<InstanceRecord>,
    /// The namespace table (custom namespaces). Absent from snapshots
    /// taken before namespaces were logged: installing one of those leaves
    /// the node's table (its `namespaces.json`) as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<registry_proto::raft::Namespace>>,
    /// The operator's layers (absent from snapshots taken before them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideRecord>,
}

/// The operator's layer of one address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverrideRecord {
    ns: String,
    name: String,
    cluster: String,
    ip: String,
    port: u16,
    weight: f64,
    enabled: bool,
    metadata: Vec<(String, String)>,
}

/// An explicit service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceRecord {
    ns: String,
    name: String,
    threshold: f32,
    metadata: Vec<(String, String)>,
    selector: Option<String>,
}

/// A persistent instance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    ns: String,
    name: String,
    cluster: String,
    ip: String,
    port: u16,
    weight: f64,
    healthy: bool,
    enabled: bool,
    metadata: Vec<(String, String)>,
}

fn pairs(m: &Metadata) -> Vec<(String, String)> {
    m.iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl Image {
    /// Every explicit service and persistent instance of `store`, sorted,
    /// and the namespace table of `book`.
    pub fn capture(store: &Store, book: &crate::namespaces::NamespaceBook) -> Image {
        let mut image = Image {
            namespaces: Some(
                book.table()
                    .list()
                    .iter()
                    .filter(|n| !n.is_default())
                    .map(wire::logged_namespace)
                    .collect(),
            ),
            ..Image::default()
        };
        store.for_each_service(|s| {
            let key = s.key();
            if s.is_explicit() {
                image.services.push(ServiceRecord {
                    ns: key.namespace().to_owned(),
                    name: key.grouped_name().to_owned(),
                    threshold: s.protect_threshold(),
                    metadata: pairs(s.metadata()),
                    selector: s.selector().map(str::to_owned),
                });
            }
            for o in s.overrides() {
                image.overrides.push(OverrideRecord {
                    ns: key.namespace().to_owned(),
                    name: key.grouped_name().to_owned(),
                    cluster: o.addr.cluster.to_owned(),
                    ip: o.addr.ip.to_string(),
                    port: o.addr.port,
                    weight: o.layer.weight,
                    enabled: o.layer.enabled,
                    metadata: pairs(&o.layer.metadata),
                });
            }
            for i in s.instances().iter().filter(|i| !i.ephemeral) {
                image.instances.push(InstanceRecord {
                    ns: key.namespace().to_owned(),
                    name: key.grouped_name().to_owned(),
                    cluster: i.cluster.to_string(),
                    ip: i.ip.to_string(),
                    port: i.port,
                    weight: i.weight,
                    healthy: i.healthy,
                    enabled: i.enabled,
                    metadata: pairs(&i.metadata),
                });
            }
        });
        image
            .services
            .sort_by(|a, b| (&a.ns, &a.name).cmp(&(&b.ns, &b.name)));
        image.instances.sort_by(|a, b| {
            (&a.ns, &a.name, &a.cluster, &a.ip, a.port)
                .cmp(&(&b.ns, &b.name, &b.cluster, &b.ip, b.port))
        });
        image
    }

    /// Makes the persistent part of the app's store equal to this image:
    /// removes what it lacks, creates or updates what it has. Ephemeral
    /// instances are left alone. Returns the records refused by the store.
    ///
    /// Longer than 80 lines: both phases (drop what the image lacks, then
    /// write what it has) use the lookup sets built first, in one pass the
    /// Raft state machine runs while it holds the snapshot.
    pub fn install(&self, app: &App) -> usize {
        if let Some(all) = &self.namespaces {
            let table = all.iter().map(wire::namespace).collect();
            if let Err(e) = app.namespaces.restore(table) {
                tracing::warn!(error = %e, "the snapshot's namespaces were not saved");
            }
        }
        let store = &app.store;
        let now = app.clock.now();
        let services: HashSet<(&str, &str)> = self
            .services
            .iter()
            .map(|s| (s.ns.as_str(), s.name.as_str()))
            .collect();
        let instances: HashSet<(&str, &str, &str, String, u16)> = self
            .instances
            .iter()
            .map(|i| {
                (
                    i.ns.as_str(),
                    i.name.as_str(),
                    i.cluster.as_str(),
                    i.ip.clone(),
                    i.port,
                )
            })
            .collect();
        let mut drop_services = Vec::new();
        let mut drop_instances = Vec::new();
        store.for_each_service(|s| {
            let key = s.key();
            let (ns, name) = (key.namespace(), key.grouped_name());
            if s.is_explicit() && !services.contains(&(ns, name)) {
                drop_services.push(key.clone());
                return;
            }
            for i in s.instances().iter().filter(|i| !i.ephemeral) {
                if !instances.contains(&(ns, name, &i.cluster, i.ip.to_string(), i.port)) {
                    drop_instances.push((key.clone(), i.cluster.to_string(), i.ip, i.port));
                }
            }
        });
        let writer = &app.writer;
        // What the image lacks was deleted by committed entries; a refusal
        // means it is gone already.
        for key in drop_services {
            let service = key.as_ref();
            let _ = writer.apply_committed(Command::ServiceDelete { service }, now);
        }
        for (key, cluster, ip, port) in drop_instances {
            let addr = InstanceAddr {
                cluster: &cluster,
                ip,
                port,
            };
            let command = Command::Deregister {
                service: key.as_ref(),
                addr,
                ephemeral: false,
            };
            let _ = writer.apply_committed(command, now);
        }
        let mut refused = 0;
        for s in &self.services {
            let svc = ServiceRef::new(&s.ns, &s.name);
            let Ok(metadata) = Metadata::from_pairs(s.metadata.iter().map(|(k, v)| (k, v))) else {
                refused += 1;
                continue;
            };
            let selector = s.selector.as_deref().map(Arc::from);
            let spec = ServiceSpec {
                protect_threshold: s.threshold,
                metadata: metadata.clone(),
                selector: selector.clone(),
            };
            let create = Command::ServiceCreate {
                service: svc,
                spec: &spec,
            };
            let update = Command::ServiceUpdate {
                service: svc,
                protect_threshold: s.threshold,
                metadata: Some(&metadata),
                selector: selector.as_ref(),
            };
            let written = writer
                .apply_committed(create, now)
                .or_else(|_| writer.apply_committed(update, now));
            if written.is_err() {
                refused += 1;
            }
        }
        for i in &self.instances {
            let svc = ServiceRef::new(&i.ns, &i.name);
            let (Ok(ip), Ok(metadata)) = (
                i.ip.parse::<IpAddr>(),
                Metadata::from_pairs(i.metadata.iter().map(|(k, v)| (k, v))),
            ) else {
                refused += 1;
                continue;
            };
            let spec = InstanceSpec {
                weight: i.weight,
                healthy: i.healthy,
                enabled: i.enabled,
                ephemeral: false,
                metadata,
                ..InstanceSpec::new(&i.cluster, ip, i.port)
            };
            let command = Command::Register {
                service: svc,
                instance: &spec,
                strict: false,
            };
            if writer.apply_committed(command, now).is_err() {
                refused += 1;
            }
        }
        refused + self.install_overrides(writer, now)
    }

    /// Lays the image's layers over the installed store (creating a
    /// service one names, as a restore does); the records refused.
    fn install_overrides(
        &self,
        writer: &crate::write::Writer,
        now: registry_core::Millis,
    ) -> usize {
        let mut refused = 0;
        for o in &self.overrides {
            let (Ok(ip), Ok(metadata)) = (
                o.ip.parse::<IpAddr>(),
                Metadata::from_pairs(o.metadata.iter().map(|(k, v)| (k, v))),
            ) else {
                refused += 1;
                continue;
            };
            let layer = registry_core::InstanceOverride {
                weight: o.weight,
                enabled: o.enabled,
                metadata,
            };
            let addr = InstanceAddr {
                cluster: &o.cluster,
                ip,
                port: o.port,
            };
            let edit = registry_core::OverrideEdit::Replace(&layer);
            let service = ServiceRef::new(&o.ns, &o.name);
            match writer.store().edit_override(service, addr, edit, now, true) {
                Ok(w) => writer.publish_written(w),
                Err(_) => refused += 1,
            }
        }
        refused
    }
}

/// Applies one command to the app's store through the write path; the
/// outcome the client gets when this node is the leader. A format-1
/// command (an older leader's, during a rolling upgrade) is read as the
/// typed write it meant; a format this build does not know is refused on
/// every node alike, changing nothing.
pub fn apply_command(app: &App, command: &LogCommand) -> Outcome {
    let now = app.clock.now();
    let migrated;
    let write = match command {
        LogCommand::Typed { v, write } if *v <= COMMAND_FORMAT => write,
        LogCommand::Typed { v, .. } => {
            return Outcome::Refused(Refusal::Invalid {
                text: format!(
                    "a command of format {v}, newer than this node's {COMMAND_FORMAT}: \
                     upgrade this node"
                ),
            })
        }
        legacy => match crate::write::legacy::typed(legacy, &app.parse_limits) {
            Ok(w) => {
                migrated = w;
                &migrated
            }
            Err(text) => return Outcome::Refused(Refusal::Invalid { text }),
        },
    };
    wire::outcome(&wire::apply_logged(&app.writer, write, now))
}

fn stopped() -> Outcome {
    Outcome::Refused(Refusal::Stopped)
}

/// The state machine handed to openraft.
pub struct Machine {
    app: Weak<App>,
    db: Arc<Database>,
    shared: Arc<Shared>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    builds: u64,
}

/// A stored snapshot's metadata and bytes.
fn stored_snapshot(db: &Database) -> Result<Option<Snapshot<TypeConfig>>, String> {
    let Some(meta) = read_meta::<SnapshotMeta<NodeId, BasicNode>>(db, "snapshot_meta")? else {
        return Ok(None);
    };
    let data = super::log::read_raw(db, "snapshot")?.unwrap_or_default();
    Ok(Some(Snapshot {
        meta,
        snapshot: Box::new(Cursor::new(data)),
    }))
}

fn store_snapshot(
    db: &Database,
    meta: &SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
) -> Result<(), String> {
    let meta = serde_json::to_vec(meta).map_err(|e| e.to_string())?;
    write_meta(db, &[("snapshot", data), ("snapshot_meta", meta)])
}

impl Machine {
    /// The machine over `app`'s store. Loads the stored snapshot, if any,
    /// into the store first, so the machine starts where it was.
    ///
    /// # Errors
    /// When the stored snapshot cannot be read or decoded.
    pub fn open(app: &Arc<App>, db: Arc<Database>, shared: Arc<Shared>) -> anyhow::Result<Machine> {
        let mut machine = Machine {
            app: Arc::downgrade(app),
            db,
            shared,
            last_applied: None,
            membership: Membership::default(),
            builds: 0,
        };
        if let Some(s) = stored_snapshot(&machine.db).map_err(anyhow::Error::msg)? {
            let image: Image = serde_json::from_slice(s.snapshot.get_ref())
                .map_err(|e| anyhow::anyhow!("decoding the stored Raft snapshot: {e}"))?;
            let refused = image.install(app);
            tracing::info!(
                services = image.services.len(),
                instances = image.instances.len(),
                refused,
                last = ?s.meta.last_log_id,
                "loaded the stored Raft snapshot"
            );
            machine.last_applied = s.meta.last_log_id;
            machine.membership = s.meta.last_membership.clone();
        }
        Ok(machine)
    }
}

/// Builds a snapshot from an image captured between two applies.
pub struct Builder {
    image: Image,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    db: Arc<Database>,
    shared: Arc<Shared>,
    id: String,
}

impl RaftSnapshotBuilder<TypeConfig> for Builder {
    async fn build_snapshot(&mut self) -> StoreResult<Snapshot<TypeConfig>> {
        let image = std::mem::take(&mut self.image);
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: self.id.clone(),
        };
        let db = self.db.clone();
        let stored_meta = meta.clone();
        let data = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, String> {
            let data = serde_json::to_vec(&image).map_err(|e| e.to_string())?;
            store_snapshot(&db, &stored_meta, data.clone())?;
            Ok(data)
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
        .map_err(|e| StorageIOError::write_snapshot(None, &std::io::Error::other(e)))?;
        self.shared.stats.snapshots_built.inc();
        self.shared
            .stats
            .snapshot_bytes
            .store(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::info!(bytes = data.len(), last = ?meta.last_log_id, "built a Raft snapshot");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Builder;

    async fn applied_state(&mut self) -> StoreResult<(Option<LogId<NodeId>>, Membership)> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StoreResult<Vec<Outcomes>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let app = self.app.upgrade();
        let mut out = Vec::new();
        let _serialised = self.shared.apply_lock.lock();
        for entry in entries {
            self.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(Outcomes::default()),
                EntryPayload::Normal(Batch(commands)) => {
                    let outcomes = commands
                        .iter()
                        .map(|c| match &app {
                            Some(app) => apply_command(app, c),
                            None => stopped(),
                        })
                        .collect();
                    self.shared.stats.applied.add(commands.len() as u64);
                    out.push(Outcomes(outcomes));
                }
                EntryPayload::Membership(m) => {
                    self.membership = Membership::new(Some(entry.log_id), m);
                    out.push(Outcomes::default());
                }
            }
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Builder {
        self.builds += 1;
        let image = match self.app.upgrade() {
            Some(app) => Image::capture(&app.store, &app.namespaces),
            None => Image::default(),
        };
        let last = self.last_applied;
        Builder {
            image,
            last_applied: last,
            membership: self.membership.clone(),
            db: self.db.clone(),
            shared: self.shared.clone(),
            id: format!(
                "{}-{}-{}",
                last.map_or(0, |l| l.leader_id.term),
                last.map_or(0, |l| l.index),
                self.builds
            ),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StoreResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StoreResult<()> {
        let data = snapshot.into_inner();
        let image: Image = serde_json::from_slice(&data).map_err(|e| {
            StorageIOError::read_snapshot(
                Some(meta.signature()),
                &std::io::Error::other(e.to_string()),
            )
        })?;
        if let Some(app) = self.app.upgrade() {
            let _serialised = self.shared.apply_lock.lock();
            let refused = image.install(&app);
            tracing::info!(
                services = image.services.len(),
                instances = image.instances.len(),
                refused,
                bytes = data.len(),
                last = ?meta.last_log_id,
                "installed a Raft snapshot from the leader"
            );
        }
        self.shared.stats.snapshots_installed.inc();
        self.shared
            .stats
            .snapshot_bytes
            .store(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        let db = self.db.clone();
        let meta = meta.clone();
        tokio::task::spawn_blocking(move || store_snapshot(&db, &meta, data))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .map_err(|e| StorageIOError::write_snapshot(None, &std::io::Error::other(e)).into())
    }

    async fn get_current_snapshot(&mut self) -> StoreResult<Option<Snapshot<TypeConfig>>> {
        stored_snapshot(&self.db)
            .map_err(|e| StorageIOError::read_snapshot(None, &std::io::Error::other(e)).into())
    }
}
