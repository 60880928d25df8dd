//! The Raft log and vote in redb (`raft.redb` under `--data-dir`), as
//! `openraft`'s [`RaftLogStorage`].
//!
//! Every write (append, vote, truncate, purge, committed index) is one redb
//! transaction committed with [`Durability::Immediate`] (fsync) on a
//! blocking thread, awaited before the method returns: openraft serialises
//! storage calls, and awaiting keeps a log entry readable the moment
//! `append` returns while the fsync does not hold a runtime worker. Many
//! client writes share one entry and many entries one append (see
//! [`super::propose`]), so one fsync covers them all.
//!
//! Tables: `log` (index → JSON entry) and `meta` (`vote`, `committed`,
//! `purged` → JSON; the state machine keeps its snapshot there too, see
//! [`super::machine`]).

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, StorageError, StorageIOError, Vote};
use redb::{Database, Durability, ReadableTable, TableDefinition};
use registry_proto::raft::{NodeId, TypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub(super) const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
pub(super) const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");

/// The database file inside the data directory.
pub const RAFT_DB_FILE: &str = "raft.redb";

type StoreResult<T> = Result<T, StorageError<NodeId>>;

/// Opens (creating) the Raft database and its tables.
///
/// # Errors
/// When the file cannot be opened (another process holds it) or created.
pub fn open(dir: &std::path::Path, cache_bytes: usize) -> anyhow::Result<Database> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating data directory {}", dir.display()))?;
    let path = dir.join(RAFT_DB_FILE);
    let db = Database::builder()
        .set_cache_size(cache_bytes)
        .create(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let txn = db.begin_write()?;
    txn.open_table(LOG)?;
    txn.open_table(META)?;
    txn.commit()?;
    Ok(db)
}

/// Reads one JSON value of `meta`.
pub(super) fn read_meta<T: DeserializeOwned>(
    db: &Database,
    key: &str,
) -> Result<Option<T>, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let table = txn.open_table(META).map_err(|e| e.to_string())?;
    let Some(v) = table.get(key).map_err(|e| e.to_string())? else {
        return Ok(None);
    };
    serde_json::from_slice(v.value())
        .map(Some)
        .map_err(|e| format!("decoding {key}: {e}"))
}

/// Reads one raw value of `meta`.
pub(super) fn read_raw(db: &Database, key: &str) -> Result<Option<Vec<u8>>, String> {
    let txn = db.begin_read().map_err(|e| e.to_string())?;
    let table = txn.open_table(META).map_err(|e| e.to_string())?;
    Ok(table
        .get(key)
        .map_err(|e| e.to_string())?
        .map(|v| v.value().to_vec()))
}

/// Writes values into `meta` in one durable transaction.
pub(super) fn write_meta(db: &Database, pairs: &[(&str, Vec<u8>)]) -> Result<(), String> {
    let mut txn = db.begin_write().map_err(|e| e.to_string())?;
    txn.set_durability(Durability::Immediate);
    {
        let mut table = txn.open_table(META).map_err(|e| e.to_string())?;
        for (k, v) in pairs {
            table.insert(*k, v.as_slice()).map_err(|e| e.to_string())?;
        }
    }
    txn.commit().map_err(|e| e.to_string())
}

fn json<T: Serialize>(v: &T) -> Vec<u8> {
    // Plain data: serialising cannot fail.
    serde_json::to_vec(v).unwrap_or_default()
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Runs `f` on a blocking thread and waits for it.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("storage thread failed: {e}"))?
}

/// The log store; cheap to clone (one shared database).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
    disk: Arc<crate::disk::Disk>,
}

impl LogStore {
    /// The store over an opened database in the directory `disk` checks.
    pub fn new(db: Arc<Database>, disk: Arc<crate::disk::Disk>) -> LogStore {
        LogStore { db, disk }
    }

    fn read_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<Vec<Entry<TypeConfig>>, String> {
        let txn = self.db.begin_read().map_err(|e| e.to_string())?;
        let table = txn.open_table(LOG).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for item in table
            .range::<u64>((start, end))
            .map_err(|e| e.to_string())?
        {
            let (k, v) = item.map_err(|e| e.to_string())?;
            let entry: Entry<TypeConfig> = serde_json::from_slice(v.value())
                .map_err(|e| format!("decoding log entry {}: {e}", k.value()))?;
            out.push(entry);
        }
        Ok(out)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StoreResult<Vec<Entry<TypeConfig>>> {
        self.read_range(range.start_bound().cloned(), range.end_bound().cloned())
            .map_err(|e| StorageIOError::read_logs(&io_err(e)).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StoreResult<LogState<TypeConfig>> {
        let read = || -> Result<LogState<TypeConfig>, String> {
            let purged: Option<LogId<NodeId>> = read_meta(&self.db, "purged")?;
            let txn = self.db.begin_read().map_err(|e| e.to_string())?;
            let table = txn.open_table(LOG).map_err(|e| e.to_string())?;
            let last = match table.last().map_err(|e| e.to_string())? {
                Some((_, v)) => {
                    let e: Entry<TypeConfig> =
                        serde_json::from_slice(v.value()).map_err(|e| e.to_string())?;
                    Some(e.log_id)
                }
                None => purged,
            };
            Ok(LogState {
                last_purged_log_id: purged,
                last_log_id: last,
            })
        };
        read().map_err(|e| StorageIOError::read_logs(&io_err(e)).into())
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StoreResult<()> {
        let db = self.db.clone();
        let bytes = json(vote);
        blocking(move || write_meta(&db, &[("vote", bytes)]))
            .await
            .map_err(|e| StorageIOError::write_vote(&io_err(e)).into())
    }

    async fn read_vote(&mut self) -> StoreResult<Option<Vote<NodeId>>> {
        read_meta(&self.db, "vote").map_err(|e| StorageIOError::read_vote(&io_err(e)).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StoreResult<()> {
        // Not fsynced: a committed index lost in a crash is learnt again from
        // the leader; it only lets a restart re-apply its own log sooner.
        let db = self.db.clone();
        let bytes = json(&committed);
        blocking(move || {
            let mut txn = db.begin_write().map_err(|e| e.to_string())?;
            txn.set_durability(Durability::Eventual);
            {
                let mut t = txn.open_table(META).map_err(|e| e.to_string())?;
                t.insert("committed", bytes.as_slice())
                    .map_err(|e| e.to_string())?;
            }
            txn.commit().map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| StorageIOError::write(&io_err(e)).into())
    }

    async fn read_committed(&mut self) -> StoreResult<Option<LogId<NodeId>>> {
        read_meta::<Option<LogId<NodeId>>>(&self.db, "committed")
            .map(Option::flatten)
            .map_err(|e| StorageIOError::read(&io_err(e)).into())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StoreResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let rows: Vec<(u64, Vec<u8>)> = entries
            .into_iter()
            .map(|e| (e.log_id.index, json(&e)))
            .collect();
        // An append that failed for lack of space would stop the engine
        // for good; waiting holds this node back (the others go on, and it
        // catches up once space is freed).
        self.disk.wait_for_space().await;
        let db = self.db.clone();
        let written = blocking(move || {
            let mut txn = db.begin_write().map_err(|e| e.to_string())?;
            txn.set_durability(Durability::Immediate);
            {
                let mut t = txn.open_table(LOG).map_err(|e| e.to_string())?;
                for (index, bytes) in &rows {
                    t.insert(*index, bytes.as_slice())
                        .map_err(|e| e.to_string())?;
                }
            }
            txn.commit().map_err(|e| e.to_string())
        })
        .await;
        match written {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io_err(&e)));
                Err(StorageIOError::write_logs(&io_err(e)).into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let db = self.db.clone();
        blocking(move || {
            let mut txn = db.begin_write().map_err(|e| e.to_string())?;
            txn.set_durability(Durability::Immediate);
            {
                let mut t = txn.open_table(LOG).map_err(|e| e.to_string())?;
                t.retain_in(log_id.index.., |_, _| false)
                    .map_err(|e| e.to_string())?;
            }
            txn.commit().map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&io_err(e)).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StoreResult<()> {
        let db = self.db.clone();
        let purged = json(&log_id);
        blocking(move || {
            let mut txn = db.begin_write().map_err(|e| e.to_string())?;
            txn.set_durability(Durability::Immediate);
            {
                // The purged id first: a crash between the two leaves
                // entries below it, which are ignored, never a hole.
                let mut m = txn.open_table(META).map_err(|e| e.to_string())?;
                m.insert("purged", purged.as_slice())
                    .map_err(|e| e.to_string())?;
                let mut t = txn.open_table(LOG).map_err(|e| e.to_string())?;
                t.retain_in(..=log_id.index, |_, _| false)
                    .map_err(|e| e.to_string())?;
            }
            txn.commit().map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&io_err(e)).into())
    }
}
