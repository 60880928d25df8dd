//! Persistent instances (`ephemeral=false`) and explicitly created services,
//! made durable in an embedded database (`redb`) under `--data-dir` by one
//! group-commit writer, and loaded back on start.
//!
//! # Write path
//! A handler of a persistent write (register, update, patch or deregister of
//! a persistent instance; service create, update or delete):
//! 1. reserves a slot in the writer's bounded queue: none left is a 503
//!    and nothing is applied ([`Persist::reserve`]);
//! 2. applies the change to the in-memory store like any other write;
//! 3. queues the *key* it changed with a oneshot ([`Reserved::submit`]) and
//!    answers `ok` only once that oneshot says the commit is durable.
//!
//! The writer, a thread of its own because commits block on `fsync`, takes
//! everything queued (at most `--max-commit-batch`) into ONE write
//! transaction. For each key it reads the store's current state and writes
//! it, or deletes it when gone; then it commits with
//! [`Durability::Immediate`] and completes every oneshot of the batch.
//! While one commit syncs, the next batch queues up: that is the group
//! commit.
//!
//! # Why apply first and persist state, not requests
//! The store is the one place that validates and orders writes (unknown
//! instance, limits, the last of two racing writers wins). Writing a key's
//! state as read at commit time, after every queued change to it was
//! applied, makes the database converge to the store whatever order racing
//! handlers queued in, and a write refused by the store is never on disk.
//! The cost: a reader can see a persistent write a few milliseconds before
//! it is durable, and a crash in that window loses it. It was never
//! acknowledged, so no acknowledged write can be lost: its key was read and
//! committed after it was applied.
//!
//! A failed commit (disk full, I/O error) answers every write of its batch
//! 500; their changes stay in memory, unacknowledged, and are written again
//! only when a later commit touches the same keys.
//!
//! Health set by the server's own checks is not written (the checks find it
//! again after a restart); the stored health is the one the instance had
//! when its key was last written.
//!
//! # Behind a trait
//! The write path ([`crate::write::Writer`]) sees persistence only as a
//! [`Journal`]: reserve a place before the store write, submit the change
//! after it, await its durability. [`Persist`] is the server's journal;
//! [`InMemory`] acknowledges at once and keeps nothing, so the benches run
//! the real persistent write path without a disk (`crate::bench`).
//!
//! # What it needs
//! Only the store: [`Persist::restore`] loads into a [`Store`] and
//! [`Persist::start`] hands the writer thread an `Arc<Store>` to read the
//! state of the keys it commits. It does not see the server state
//! ([`crate::state::App`]), so it is tested on its own.
//!
//! # On disk
//! One file, `registry.redb`, with tables `meta` (schema version, the auth
//! token key), `services` ((namespace, grouped name) → JSON settings) and
//! `instances` ((namespace, grouped name, cluster, ip, port) → JSON fields)
//! and `overrides` (the same key → the operator's layer of the address:
//! weight, enabled, metadata).

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use parking_lot::Mutex;
use redb::{Database, Durability, ReadableTable, TableDefinition};
use registry_core::{
    InstanceAddr, InstanceOverride, InstanceSpec, Metadata, Millis, OverrideEdit, ServiceKey,
    ServiceRef, ServiceSpec, Store,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::convert::MetadataJson;
use crate::metrics::Counter;
use registry_proto::prometheus::Exposition;

/// The database file inside the data directory.
pub const DB_FILE: &str = "registry.redb";
/// Format of the records below; a database with another version is refused.
const SCHEMA_VERSION: &[u8] = b"1";
const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");
const SERVICES: TableDefinition<'_, (&str, &str), &[u8]> = TableDefinition::new("services");
/// (namespace, grouped service name, cluster, ip, port).
const INSTANCES: TableDefinition<'_, (&str, &str, &str, &str, u16), &[u8]> =
    TableDefinition::new("instances");
/// The operator's layers, keyed as `instances` (added within schema 1: a
/// database written before has none, and an older registry ignores it).
const OVERRIDES: TableDefinition<'_, (&str, &str, &str, &str, u16), &[u8]> =
    TableDefinition::new("overrides");

/// Why a persistent write was not acknowledged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PersistError {
    /// Too many writes are waiting for a commit: retry later (503).
    #[error("too many writes waiting to be persisted, please try again later")]
    Busy,
    /// The data directory is (nearly) full: refused before anything was
    /// applied. Free space, and writes are accepted again.
    #[error("{0}")]
    Full(crate::disk::Full),
    /// The commit failed (disk full, I/O error); the log has the cause.
    #[error("could not persist the change: {0}")]
    Storage(Arc<str>),
    /// The writer has stopped: the server is shutting down.
    #[error("the server is shutting down")]
    Stopped,
}

/// What a persistent write changed: the writer persists its current state.
#[derive(Clone, Debug)]
pub enum Change {
    /// One persistent instance.
    Instance {
        /// Its service.
        service: ServiceKey,
        /// Its cluster.
        cluster: Arc<str>,
        /// Its address.
        ip: IpAddr,
        /// Its port.
        port: u16,
    },
    /// A service's operator layers (`registry_core::overrides`), stored
    /// in full.
    Overrides {
        /// The service.
        service: ServiceKey,
    },
    /// A service's settings and, reconciled in full, its persistent
    /// instances. `settings` is true after a create or update (the service
    /// is explicit) and false after a delete.
    Service {
        /// The service.
        service: ServiceKey,
        /// Whether its settings are stored (it is explicit).
        settings: bool,
    },
}

/// Resolves once a submitted change is durable, or with why not.
pub type Committed = Pin<Box<dyn Future<Output = Result<(), PersistError>> + Send>>;

/// Where the write path makes persistent changes durable (see the module
/// header): [`Persist`] in a server, [`InMemory`] in the benches.
pub trait Journal: Send + Sync {
    /// Reserves a place in the next commit, before the store is written,
    /// so that a refusal leaves nothing applied.
    ///
    /// # Errors
    /// Why no place is left ([`PersistError::Busy`], `Full`, `Stopped`).
    fn reserve(&self) -> Result<Box<dyn Reserved + '_>, PersistError>;
}

/// A reserved place in a [`Journal`]'s next commit.
pub trait Reserved: Send {
    /// Queues `change`, read back from the store at commit time.
    fn submit(self: Box<Self>, change: Change) -> Committed;
}

/// A journal that acknowledges every change at once and keeps none: the
/// persistent write path without a disk, for the instruction-count gates.
#[derive(Debug, Default)]
pub struct InMemory {
    submitted: AtomicU64,
}

impl InMemory {
    /// Changes submitted so far.
    pub fn submitted(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed)
    }
}

impl Journal for InMemory {
    fn reserve(&self) -> Result<Box<dyn Reserved + '_>, PersistError> {
        Ok(Box::new(MemorySlot(&self.submitted)))
    }
}

struct MemorySlot<'a>(&'a AtomicU64);

impl Reserved for MemorySlot<'_> {
    fn submit(self: Box<Self>, _: Change) -> Committed {
        self.0.fetch_add(1, Ordering::Relaxed);
        Box::pin(std::future::ready(Ok(())))
    }
}

enum Msg {
    Write(Change, oneshot::Sender<Result<(), PersistError>>),
    Stop,
}

/// Counters for `/metrics`; `Relaxed` atomics, each independent.
#[derive(Default)]
pub struct PersistStats {
    /// Transactions committed.
    pub commits: Counter,
    /// Writes acknowledged durable.
    pub writes: Counter,
    /// Commits that failed.
    pub failures: Counter,
    /// Writes refused because the queue was full.
    pub shed: Counter,
    /// Largest batch committed at once.
    pub max_batch: AtomicU64,
    /// Total time spent committing, in µs.
    pub commit_us: Counter,
    /// Longest commit, in µs.
    pub max_commit_us: AtomicU64,
}

impl PersistStats {
    /// Appends the persistence writer's families.
    pub fn render(&self, e: &mut Exposition<'_>) {
        e.counter(
            "registry_persist_commits_total",
            "Write transactions committed (each one fsync).",
            self.commits.get(),
        );
        e.counter(
            "registry_persist_writes_total",
            "Persistent writes acknowledged durable.",
            self.writes.get(),
        );
        e.counter(
            "registry_persist_failures_total",
            "Commits that failed.",
            self.failures.get(),
        );
        e.counter(
            "registry_persist_shed_total",
            "Persistent writes answered 503: queue full.",
            self.shed.get(),
        );
        e.gauge(
            "registry_persist_batch_max",
            "Largest number of writes in one commit.",
            self.max_batch.load(Ordering::Relaxed),
        );
        e.counter(
            "registry_persist_commit_seconds_total",
            "Time spent committing.",
            self.commit_us.get() as f64 / 1e6,
        );
        e.gauge(
            "registry_persist_commit_seconds_max",
            "Longest commit.",
            self.max_commit_us.load(Ordering::Relaxed) as f64 / 1e6,
        );
    }
}

/// The durable store of persistent state, shared by handlers (who queue
/// writes) and the writer thread (who owns the database once started).
pub struct Persist {
    dir: PathBuf,
    /// The free-space check every write passes first.
    pub disk: crate::disk::Disk,
    queue: mpsc::Sender<Msg>,
    /// The database and the queue's receiving end until the writer starts.
    parts: Mutex<Option<(Database, mpsc::Receiver<Msg>)>>,
    max_batch: usize,
    /// Counters.
    pub stats: PersistStats,
}

/// A reserved slot in the writer's queue: the write may go ahead.
pub(crate) struct Ticket<'a> {
    permit: mpsc::Permit<'a, Msg>,
}

impl Reserved for Ticket<'_> {
    /// Queues `change` for the next commit; resolves once it is durable.
    fn submit(self: Box<Self>, change: Change) -> Committed {
        let (done, durable) = oneshot::channel();
        self.permit.send(Msg::Write(change, done));
        Box::pin(async move { durable.await.unwrap_or(Err(PersistError::Stopped)) })
    }
}

impl Journal for Persist {
    fn reserve(&self) -> Result<Box<dyn Reserved + '_>, PersistError> {
        Persist::reserve(self).map(|t| Box::new(t) as Box<dyn Reserved + '_>)
    }
}

/// What a start found on disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Restored {
    /// Explicit services created.
    pub services: usize,
    /// Persistent instances registered.
    pub instances: usize,
    /// Operator layers laid back.
    pub overrides: usize,
    /// Records the store refused (limits lowered since they were written).
    pub skipped: usize,
    /// Time to read and apply them.
    pub elapsed: Duration,
}

/// The running writer thread.
pub struct Writer {
    thread: std::thread::JoinHandle<()>,
}

impl Persist {
    /// Opens (creating if needed) the database in `dir`.
    ///
    /// # Errors
    /// When the directory or database cannot be opened (another registry
    /// holds it, it is corrupt, or it has another schema version).
    pub fn open(
        dir: &Path,
        cache_bytes: usize,
        max_pending: usize,
        max_batch: usize,
    ) -> anyhow::Result<Persist> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating data directory {}", dir.display()))?;
        let path = dir.join(DB_FILE);
        let db = Database::builder()
            .set_cache_size(cache_bytes)
            .create(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let txn = db.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            let version = meta.get("schema")?.map(|v| v.value().to_vec());
            match version {
                None => {
                    meta.insert("schema", SCHEMA_VERSION)?;
                }
                Some(v) if v == SCHEMA_VERSION => {}
                Some(v) => anyhow::bail!(
                    "{} has schema version {:?}; this registry reads version {:?}",
                    path.display(),
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(SCHEMA_VERSION)
                ),
            }
            txn.open_table(SERVICES)?;
            txn.open_table(INSTANCES)?;
            txn.open_table(OVERRIDES)?;
        }
        txn.commit()?;
        let (queue, receiver) = mpsc::channel(max_pending);
        Ok(Persist {
            dir: dir.to_path_buf(),
            disk: crate::disk::Disk::new(dir, crate::disk::DEFAULT_MIN_FREE),
            queue,
            parts: Mutex::new(Some((db, receiver))),
            max_batch,
            stats: PersistStats::default(),
        })
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The key access tokens are signed with: made at random on first use
    /// and kept in the database, so tokens outlive a restart as Nacos's do.
    ///
    /// # Errors
    /// When the database cannot be read or written, or the writer started.
    pub fn auth_key(&self) -> anyhow::Result<[u8; 32]> {
        let parts = self.parts.lock();
        let (db, _) = parts.as_ref().context("the writer owns the database")?;
        let txn = db.begin_write()?;
        let key = {
            let mut meta = txn.open_table(META)?;
            let stored = meta.get("auth_key")?.map(|v| v.value().to_vec());
            match stored.as_deref().map(<[u8; 32]>::try_from) {
                Some(Ok(key)) => key,
                _ => {
                    let key = crate::auth::random_key()?;
                    meta.insert("auth_key", &key[..])?;
                    key
                }
            }
        };
        txn.commit()?;
        Ok(key)
    }

    /// Reserves a place for one write in the next commits.
    ///
    /// # Errors
    /// [`PersistError::Busy`] when `--max-pending-writes` are waiting,
    /// [`PersistError::Stopped`] after shutdown, [`PersistError::Full`]
    /// while the data directory is short of space.
    pub(crate) fn reserve(&self) -> Result<Ticket<'_>, PersistError> {
        self.disk.check().map_err(PersistError::Full)?;
        match self.queue.try_reserve() {
            Ok(permit) => Ok(Ticket { permit }),
            Err(mpsc::error::TrySendError::Full(())) => {
                self.stats.shed.inc();
                Err(PersistError::Busy)
            }
            Err(mpsc::error::TrySendError::Closed(())) => Err(PersistError::Stopped),
        }
    }

    /// Loads every explicit service and persistent instance into `store`
    /// at time `now`, calling `persistent` for the service of each
    /// instance loaded (the health checker's targets). Runs before the
    /// server answers anything.
    ///
    /// # Errors
    /// When the database cannot be read or holds a record that does not
    /// decode: starting without it would silently drop acknowledged state.
    pub fn restore(
        &self,
        store: &Store,
        now: Millis,
        mut persistent: impl FnMut(ServiceRef<'_>),
    ) -> anyhow::Result<Restored> {
        let started = Instant::now();
        let parts = self.parts.lock();
        let (db, _) = parts.as_ref().context("the writer owns the database")?;
        let txn = db.begin_read()?;
        let mut restored = Restored::default();
        for entry in txn.open_table(SERVICES)?.iter()? {
            let (key, value) = entry?;
            let (namespace, name) = key.value();
            let record: ServiceIn = serde_json::from_slice(value.value())
                .with_context(|| format!("decoding service {namespace}##{name}"))?;
            let spec = ServiceSpec {
                protect_threshold: record.protect_threshold,
                metadata: Metadata::from_pairs(&record.metadata)
                    .with_context(|| format!("metadata of service {namespace}##{name}"))?,
                selector: record.selector.map(Arc::from),
            };
            let service = ServiceRef::new(namespace, name);
            match store.create_service(service, &spec, now) {
                Ok(_) => restored.services += 1,
                Err(e) => {
                    tracing::warn!(namespace, service = name, error = %e, "stored service refused");
                    restored.skipped += 1;
                }
            }
        }
        for entry in txn.open_table(INSTANCES)?.iter()? {
            let (key, value) = entry?;
            let (namespace, name, cluster, ip, port) = key.value();
            let what = || format!("instance {ip}:{port} of {namespace}##{name} ({cluster})");
            let record: InstanceIn = serde_json::from_slice(value.value())
                .with_context(|| format!("decoding {}", what()))?;
            let ip: IpAddr = ip
                .parse()
                .with_context(|| format!("address of {}", what()))?;
            let spec = InstanceSpec {
                weight: record.weight,
                healthy: record.healthy,
                enabled: record.enabled,
                ephemeral: false,
                metadata: Metadata::from_pairs(&record.metadata)
                    .with_context(|| format!("metadata of {}", what()))?,
                ..InstanceSpec::new(cluster, ip, port)
            };
            let service = ServiceRef::new(namespace, name);
            match store.register(service, &spec, now) {
                Ok(_) => {
                    restored.instances += 1;
                    persistent(service);
                }
                Err(e) => {
                    tracing::warn!(instance = %what(), error = %e, "stored instance refused");
                    restored.skipped += 1;
                }
            }
        }
        restore_overrides(&txn, store, now, &mut restored)?;
        restored.elapsed = started.elapsed();
        Ok(restored)
    }

    /// Starts the writer thread, which commits the state `store` holds for
    /// each queued key. `None` when it already runs.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub fn start(self: &Arc<Self>, store: Arc<Store>) -> anyhow::Result<Option<Writer>> {
        let Some((db, receiver)) = self.parts.lock().take() else {
            return Ok(None);
        };
        let persist = self.clone();
        let thread = std::thread::Builder::new()
            .name("registry-persist".into())
            .spawn(move || write_loop(&persist, &store, db, receiver))
            .context("starting the persistence writer")?;
        Ok(Some(Writer { thread }))
    }

    /// Asks the writer to commit what is queued and stop.
    pub async fn stop(&self) {
        let _ = self.queue.send(Msg::Stop).await;
    }
}

impl Writer {
    /// Waits for the writer's last commit; the database closes with it.
    pub async fn join(self) {
        let _ = tokio::task::spawn_blocking(move || self.thread.join()).await;
    }
}

fn write_loop(persist: &Persist, store: &Store, db: Database, mut receiver: mpsc::Receiver<Msg>) {
    let stats = &persist.stats;
    let mut batch: Vec<(Change, oneshot::Sender<Result<(), PersistError>>)> =
        Vec::with_capacity(persist.max_batch.min(1024));
    let mut stopping = false;
    loop {
        if !stopping {
            match receiver.blocking_recv() {
                None => return,
                Some(Msg::Stop) => stopping = true,
                Some(Msg::Write(change, done)) => batch.push((change, done)),
            }
        }
        // Everything already queued joins this commit.
        while batch.len() < persist.max_batch {
            match receiver.try_recv() {
                Ok(Msg::Write(change, done)) => batch.push((change, done)),
                Ok(Msg::Stop) => stopping = true,
                Err(_) => break,
            }
        }
        if batch.is_empty() {
            if stopping {
                tracing::info!(
                    commits = stats.commits.get(),
                    writes = stats.writes.get(),
                    "persistence writer stopped"
                );
                return;
            }
            continue;
        }
        let started = Instant::now();
        let result = commit(store, &db, &batch);
        let us = started.elapsed().as_micros() as u64;
        match &result {
            Ok(()) => {
                stats.commits.inc();
                stats.writes.add(batch.len() as u64);
            }
            Err(_) => stats.failures.inc(),
        }
        stats.commit_us.add(us);
        stats.max_commit_us.fetch_max(us, Ordering::Relaxed);
        stats
            .max_batch
            .fetch_max(batch.len() as u64, Ordering::Relaxed);
        for (_, done) in batch.drain(..) {
            // A handler that went away (connection closed) no longer waits.
            let _ = done.send(result.clone());
        }
    }
}

/// Writes the current state of every key in `batch` in one transaction.
fn commit(
    store: &Store,
    db: &Database,
    batch: &[(Change, oneshot::Sender<Result<(), PersistError>>)],
) -> Result<(), PersistError> {
    let run = || -> Result<(), DbError> {
        let mut txn = db.begin_write()?;
        txn.set_durability(Durability::Immediate);
        {
            let mut services = txn.open_table(SERVICES)?;
            let mut instances = txn.open_table(INSTANCES)?;
            let mut overrides = txn.open_table(OVERRIDES)?;
            let mut buf = Vec::with_capacity(256);
            for (change, _) in batch {
                match change {
                    Change::Instance {
                        service,
                        cluster,
                        ip,
                        port,
                    } => {
                        let addr = InstanceAddr {
                            cluster,
                            ip: *ip,
                            port: *port,
                        };
                        buf.clear();
                        let found = store
                            .read(service.as_ref(), |s| {
                                s.find(addr, false).map(|i| encode_instance(i, &mut buf))
                            })
                            .flatten()
                            .is_some();
                        let ip = ip.to_string();
                        let key = (
                            service.namespace(),
                            service.grouped_name(),
                            &**cluster,
                            ip.as_str(),
                            *port,
                        );
                        if found {
                            instances.insert(key, buf.as_slice())?;
                        } else {
                            instances.remove(key)?;
                        }
                    }
                    Change::Service { service, settings } => {
                        sync_service(store, &mut services, &mut instances, service, *settings)?;
                    }
                    Change::Overrides { service } => {
                        sync_overrides(store, &mut overrides, service)?;
                    }
                }
            }
        }
        txn.commit()?;
        Ok(())
    };
    run().map_err(|DbError(e)| {
        tracing::error!(error = %e, writes = batch.len(), "commit failed");
        PersistError::Storage(Arc::from(e.to_string()))
    })
}

/// Any database error, boxed: `redb::Error` is large and errors are rare.
struct DbError(Box<redb::Error>);

impl<E: Into<redb::Error>> From<E> for DbError {
    fn from(e: E) -> DbError {
        DbError(Box::new(e.into()))
    }
}

type InstanceTable<'t> =
    redb::Table<'t, (&'static str, &'static str, &'static str, &'static str, u16), &'static [u8]>;
type ServiceTable<'t> = redb::Table<'t, (&'static str, &'static str), &'static [u8]>;

/// Makes the stored settings and persistent instances of `service` equal
/// to the store's. O(instances of the service): service writes are rare.
fn sync_service(
    store: &Store,
    services: &mut ServiceTable<'_>,
    instances: &mut InstanceTable<'_>,
    service: &ServiceKey,
    settings: bool,
) -> Result<(), DbError> {
    let (namespace, name) = (service.namespace(), service.grouped_name());
    let snapshot = store.snapshot(service.as_ref());
    let mut buf = Vec::with_capacity(256);
    match &snapshot {
        Some(s) if settings => {
            encode_service(s, &mut buf);
            services.insert((namespace, name), buf.as_slice())?;
        }
        _ => {
            services.remove((namespace, name))?;
        }
    }
    // Every key of this service lies in [(ns, name, ..), (ns, name + "\0", ..)).
    let after = format!("{name}\0");
    let range = (namespace, name, "", "", 0u16)..(namespace, after.as_str(), "", "", 0u16);
    let live: HashSet<(String, String, u16)> = snapshot
        .as_ref()
        .map(|s| {
            s.instances()
                .iter()
                .filter(|i| !i.ephemeral)
                .map(|i| (i.cluster.to_string(), i.ip.to_string(), i.port))
                .collect()
        })
        .unwrap_or_default();
    instances.retain_in(range, |(_, _, cluster, ip, port), _| {
        live.contains(&(cluster.to_owned(), ip.to_owned(), port))
    })?;
    if let Some(s) = &snapshot {
        for i in s.instances().iter().filter(|i| !i.ephemeral) {
            buf.clear();
            encode_instance(i, &mut buf);
            let ip = i.ip.to_string();
            instances.insert(
                (namespace, name, &*i.cluster, ip.as_str(), i.port),
                buf.as_slice(),
            )?;
        }
    }
    Ok(())
}

/// Makes the stored layers of `service` equal to the store's.
fn sync_overrides(
    store: &Store,
    table: &mut InstanceTable<'_>,
    service: &ServiceKey,
) -> Result<(), DbError> {
    let (namespace, name) = (service.namespace(), service.grouped_name());
    let after = format!("{name}\0");
    let range = (namespace, name, "", "", 0u16)..(namespace, after.as_str(), "", "", 0u16);
    table.retain_in(range, |_, _| false)?;
    let Some(snapshot) = store.snapshot(service.as_ref()) else {
        return Ok(());
    };
    let mut buf = Vec::with_capacity(128);
    for o in snapshot.overrides() {
        buf.clear();
        // Finite numbers, booleans and strings: serialising cannot fail.
        let _ = serde_json::to_writer(
            &mut buf,
            &OverrideOut {
                weight: o.layer.weight,
                enabled: o.layer.enabled,
                metadata: MetadataJson(&o.layer.metadata),
            },
        );
        let ip = o.addr.ip.to_string();
        table.insert(
            (namespace, name, o.addr.cluster, ip.as_str(), o.addr.port),
            buf.as_slice(),
        )?;
    }
    Ok(())
}

/// Lays every stored layer back over the restored store (after the
/// instances, so they are laid over the persistent ones at once; the
/// ephemeral ones meet theirs when their clients register again).
fn restore_overrides(
    txn: &redb::ReadTransaction,
    store: &Store,
    now: Millis,
    restored: &mut Restored,
) -> anyhow::Result<()> {
    for entry in txn.open_table(OVERRIDES)?.iter()? {
        let (key, value) = entry?;
        let (namespace, name, cluster, ip, port) = key.value();
        let what = || format!("layer of {ip}:{port} in {namespace}##{name} ({cluster})");
        let record: OverrideIn = serde_json::from_slice(value.value())
            .with_context(|| format!("decoding {}", what()))?;
        let layer = InstanceOverride {
            weight: record.weight,
            enabled: record.enabled,
            metadata: Metadata::from_pairs(&record.metadata)
                .with_context(|| format!("metadata of {}", what()))?,
        };
        let addr = InstanceAddr {
            cluster,
            ip: ip
                .parse()
                .with_context(|| format!("address of {}", what()))?,
            port,
        };
        let service = ServiceRef::new(namespace, name);
        match store.edit_override(service, addr, OverrideEdit::Replace(&layer), now, true) {
            Ok(_) => restored.overrides += 1,
            Err(e) => {
                tracing::warn!(layer = %what(), error = %e, "stored layer refused");
                restored.skipped += 1;
            }
        }
    }
    Ok(())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OverrideOut<'a> {
    weight: f64,
    enabled: bool,
    metadata: MetadataJson<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OverrideIn {
    weight: f64,
    enabled: bool,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InstanceOut<'a> {
    weight: f64,
    healthy: bool,
    enabled: bool,
    metadata: MetadataJson<'a>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InstanceIn {
    weight: f64,
    healthy: bool,
    enabled: bool,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ServiceOut<'a> {
    protect_threshold: f32,
    metadata: MetadataJson<'a>,
    selector: Option<&'a str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServiceIn {
    protect_threshold: f32,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    selector: Option<String>,
}

fn encode_instance(i: &registry_core::Instance, out: &mut Vec<u8>) {
    // Finite numbers, booleans and strings: serialising cannot fail.
    let _ = serde_json::to_writer(
        out,
        &InstanceOut {
            weight: i.weight,
            healthy: i.healthy,
            enabled: i.enabled,
            metadata: MetadataJson(&i.metadata),
        },
    );
}

fn encode_service(s: &registry_core::ServiceSnapshot, out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(
        out,
        &ServiceOut {
            protect_threshold: s.protect_threshold(),
            metadata: MetadataJson(s.metadata()),
            selector: s.selector(),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use registry_core::StoreConfig;

    fn store() -> Arc<Store> {
        Arc::new(Store::new(StoreConfig {
            shards: 2,
            ..StoreConfig::default()
        }))
    }

    /// Persistence alone: a store, a data directory, the writer thread.
    /// An acknowledged write is found by a restore into a fresh store.
    #[tokio::test]
    async fn an_acknowledged_write_is_restored_into_a_fresh_store() {
        let dir = tempfile::tempdir().unwrap();
        let service = ServiceRef::new("public", "DEFAULT_GROUP@@db");
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        {
            let persist = Arc::new(Persist::open(dir.path(), 1 << 20, 16, 16).unwrap());
            let live = store();
            let writer = persist.start(live.clone()).unwrap().expect("first start");
            assert!(persist.start(live.clone()).unwrap().is_none(), "one writer");
            let ticket = Journal::reserve(&*persist).unwrap();
            let spec = InstanceSpec {
                ephemeral: false,
                weight: 2.5,
                ..InstanceSpec::new("c1", ip, 3306)
            };
            live.register(service, &spec, Millis(0)).unwrap();
            let durable = ticket.submit(Change::Instance {
                service: ServiceKey::new(service.namespace, service.name),
                cluster: Arc::from("c1"),
                ip,
                port: 3306,
            });
            assert_eq!(durable.await, Ok(()));
            persist.stop().await;
            writer.join().await;
            assert_eq!(persist.stats.writes.get(), 1);
        }
        let persist = Persist::open(dir.path(), 1 << 20, 16, 16).unwrap();
        let fresh = store();
        let mut seen = Vec::new();
        let restored = persist
            .restore(&fresh, Millis(5), |s| seen.push(s.name.to_owned()))
            .unwrap();
        assert_eq!((restored.instances, restored.skipped), (1, 0));
        assert_eq!(seen, ["DEFAULT_GROUP@@db"]);
        let weight = fresh
            .read(service, |s| s.instances()[0].weight)
            .expect("restored");
        assert_eq!(weight, 2.5);
    }

    #[test]
    fn a_full_queue_is_busy_not_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let persist = Persist::open(dir.path(), 1 << 20, 1, 1).unwrap();
        let _held = persist.reserve().unwrap();
        assert_eq!(persist.reserve().err(), Some(PersistError::Busy));
        assert_eq!(persist.stats.shed.get(), 1);
    }
}
