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
//! `purged` → JSON; `format`, the command format of the log's entries; the
//! state machine keeps its snapshot there too, see [`super::machine`]).
//! A log of an older command format is migrated when opened ([`migrate`]).

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, EntryPayload, LogId, OptionalSend, StorageError, StorageIOError, Vote};
use redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};
use registry_proto::naming::ParseLimits;
use registry_proto::raft::{Batch, Command, NodeId, TypeConfig};

use crate::write::legacy;
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
    migrate(&db, &path)?;
    Ok(db)
}

/// The `meta` key holding the file's format ([`FILE_FORMAT`]); a database
/// without it was written before formats were recorded (format 1).
const FORMAT: &str = "format";

/// The format of `raft.redb` this build writes. A change to what stored
/// data means (the commands in the entries, node ids, the snapshot)
/// bumps it, and [`migrate`] either brings an older file to it or
/// refuses it with what to do.
/// - 1: entries carry 1.x query strings (no `format` key);
/// - 2: entries carry typed commands (`registry_proto::raft::COMMAND_FORMAT`);
/// - 3: members are named by ids hashed from their addresses
///   ([`super::node_id`]), no longer by their position in `--members`.
pub const FILE_FORMAT: u16 = 3;

/// Brings a `raft.redb` of an older format to this build's
/// ([`FILE_FORMAT`]), in one durable transaction: every format-1
/// command (a 1.x query string) becomes the typed write it meant (one
/// whose parameters do not parse was refused when first applied, changed
/// nothing, and is dropped), and the positional member ids of format 2
/// and older become hashed ones ([`super::renumber`]). A newer format, or
/// a value that does not decode, is refused with what to do: this node's
/// copy can always be rebuilt from the leader.
///
/// Longer than 80 lines: one sequence (read the format, refuse a newer
/// one, rewrite each entry and record the new format in one durable
/// transaction) whose steps share the database and the transaction.
///
/// # Errors
/// When the log cannot be read or written, or is of an unknown format.
pub fn migrate(db: &Database, path: &std::path::Path) -> anyhow::Result<()> {
    let stored = read_raw(db, FORMAT).map_err(anyhow::Error::msg)?;
    let format = match stored.as_deref() {
        None => 1,
        Some(v) => std::str::from_utf8(v)
            .ok()
            .and_then(|v| v.parse::<u16>().ok())
            .unwrap_or(u16::MAX),
    };
    if format == FILE_FORMAT {
        return Ok(());
    }
    let rebuild = format!(
        "stop this node, move {} away and start it again: it rejoins the cluster and \
         loads the persistent data from the leader's snapshot",
        path.display()
    );
    if format > FILE_FORMAT {
        anyhow::bail!(
            "{} is of format {format}, newer than this build's {FILE_FORMAT}: run the \
             newer build, or {rebuild}",
            path.display()
        );
    }
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate);
    let (rewritten, dropped) = if format < 2 {
        typed_commands(&txn, &rebuild)?
    } else {
        (0, 0)
    };
    let renumbered = super::renumber::renumber(&txn, &rebuild)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    txn.open_table(META)?
        .insert(FORMAT, FILE_FORMAT.to_string().as_bytes())?;
    txn.commit()?;
    if rewritten > 0 || renumbered > 0 {
        tracing::info!(
            path = %path.display(),
            from = format,
            to = FILE_FORMAT,
            entries = rewritten,
            dropped,
            renumbered,
            "migrated the Raft log to typed commands and hashed member ids"
        );
    }
    Ok(())
}

/// Rewrites every format-1 entry of the log `txn` writes to typed
/// commands; returns how many entries changed and how many commands were
/// dropped.
fn typed_commands(txn: &WriteTransaction, rebuild: &str) -> anyhow::Result<(usize, usize)> {
    // The leader accepted these writes under its own limits: read them
    // back under none of ours.
    let limits = ParseLimits {
        max_name_len: usize::MAX,
        max_metadata_bytes: usize::MAX,
        max_metadata_entries: usize::MAX,
        max_beat_bytes: usize::MAX,
    };
    let (mut rewritten, mut dropped) = (0usize, 0usize);
    let mut table = txn.open_table(LOG)?;
    let mut rows: Vec<(u64, Vec<u8>)> = Vec::new();
    for item in table.iter()? {
        let (k, v) = item?;
        let index = k.value();
        let mut entry: Entry<TypeConfig> = serde_json::from_slice(v.value()).map_err(|e| {
            anyhow::anyhow!("Raft log entry {index} does not decode ({e}); {rebuild}")
        })?;
        let EntryPayload::Normal(Batch(commands)) = &mut entry.payload else {
            continue;
        };
        if !commands.iter().any(Command::is_legacy) {
            continue;
        }
        let before = commands.len();
        *commands = commands
            .iter()
            .filter_map(|c| legacy::typed(c, &limits).ok().map(Command::typed))
            .collect();
        dropped += before - commands.len();
        rewritten += 1;
        rows.push((index, json(&entry)));
    }
    for (index, bytes) in &rows {
        table.insert(*index, bytes.as_slice())?;
    }
    Ok((rewritten, dropped))
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

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;
    use registry_proto::raft::{Write, WriteOp};

    fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Vec<u8> {
        json(&Entry::<TypeConfig> {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload,
        })
    }

    fn legacy_write(op: WriteOp, params: &str) -> Command {
        Command::LegacyWrite {
            op,
            params: params.into(),
            agent: None,
        }
    }

    /// A `raft.redb` as a build before typed commands wrote it: no format
    /// key, entries of 1.x query strings (`LegacyWrite` encodes exactly as
    /// that build's `Command::Write` did; `registry_proto::raft`'s tests
    /// pin the text).
    fn write_format_one(dir: &std::path::Path, meta: &[(&str, &[u8])]) {
        let db = Database::create(dir.join(RAFT_DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut log = txn.open_table(LOG).unwrap();
            // As `initialize` wrote it: the first entry names the members.
            let nodes =
                std::collections::BTreeMap::from([(1, openraft::BasicNode::new("127.0.0.1:8848"))]);
            let membership = openraft::Membership::new(vec![[1].into()], nodes);
            log.insert(1, entry(1, EntryPayload::Membership(membership)).as_slice())
                .unwrap();
            let batch = Batch(vec![
                legacy_write(
                    WriteOp::Register,
                    "serviceName=db&ip=10.0.0.1&port=5432&ephemeral=false&weight=2",
                ),
                legacy_write(WriteOp::Register, "serviceName=db&ip=not-an-ip&port=1"),
                Command::LegacyHealth {
                    namespace: "public".into(),
                    service: "DEFAULT_GROUP@@db".into(),
                    cluster: "DEFAULT".into(),
                    ip: "10.0.0.1".into(),
                    port: 5432,
                    healthy: false,
                },
            ]);
            log.insert(2, entry(2, EntryPayload::Normal(batch)).as_slice())
                .unwrap();
            let mut m = txn.open_table(META).unwrap();
            for (k, v) in meta {
                m.insert(*k, *v).unwrap();
            }
        }
        txn.commit().unwrap();
    }

    fn commands(db: &Arc<Database>, index: u64) -> Vec<Command> {
        let disk = Arc::new(crate::disk::Disk::new(
            std::path::Path::new("."),
            crate::disk::DEFAULT_MIN_FREE,
        ));
        let store = LogStore::new(db.clone(), disk);
        let entries = store
            .read_range(Bound::Included(index), Bound::Included(index))
            .unwrap();
        match &entries[0].payload {
            EntryPayload::Normal(Batch(c)) => c.clone(),
            other => panic!("not a normal entry: {other:?}"),
        }
    }

    #[test]
    fn a_format_one_log_is_migrated_to_typed_commands_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        write_format_one(dir.path(), &[("vote", b"null")]);
        let db = Arc::new(open(dir.path(), 1 << 20).unwrap());
        let migrated = commands(&db, 2);
        assert!(migrated.iter().all(|c| !c.is_legacy()), "{migrated:?}");
        // The write whose ip does not parse was refused when applied; gone.
        assert_eq!(migrated.len(), 2, "{migrated:?}");
        let Command::Typed {
            v,
            write: Write::Register {
                service, instance, ..
            },
        } = &migrated[0]
        else {
            panic!("a typed register: {:?}", migrated[0]);
        };
        assert_eq!(*v, registry_proto::raft::COMMAND_FORMAT);
        assert_eq!(
            (service.ns.as_str(), service.name.as_str()),
            ("public", "DEFAULT_GROUP@@db")
        );
        assert_eq!(instance.addr.ip.to_string(), "10.0.0.1");
        assert_eq!(
            (instance.addr.port, instance.weight, instance.ephemeral),
            (5432, 2.0, false)
        );
        assert!(matches!(
            &migrated[1],
            Command::Typed {
                write: Write::Health {
                    healthy: false,
                    ephemeral: false,
                    ..
                },
                ..
            }
        ));
        assert_eq!(
            read_raw(&db, FORMAT).unwrap().as_deref(),
            Some(FILE_FORMAT.to_string().as_bytes())
        );
        // Other keys are left alone; opening again changes nothing.
        assert_eq!(
            read_raw(&db, "vote").unwrap().as_deref(),
            Some(&b"null"[..])
        );
        drop(db);
        let db = Arc::new(open(dir.path(), 1 << 20).unwrap());
        assert_eq!(commands(&db, 2), migrated);
    }

    #[test]
    fn a_log_of_a_newer_format_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        write_format_one(dir.path(), &[(FORMAT, b"9")]);
        let e = open(dir.path(), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("format 9") && e.contains("newer"), "{e}");
        assert!(e.contains("move") && e.contains(RAFT_DB_FILE), "{e}");
    }

    /// A `raft.redb` of format 2: members 1, 2, 3 by their position in the
    /// sorted `--members` list, in a membership entry, the snapshot's
    /// membership and the vote (for member 2).
    fn write_format_two(dir: &std::path::Path, voted_for: NodeId) -> [String; 3] {
        use openraft::{BasicNode, Membership, SnapshotMeta, StoredMembership};
        let addrs = ["127.0.0.1:8848", "127.0.0.1:8849", "127.0.0.1:8850"].map(String::from);
        let nodes: std::collections::BTreeMap<NodeId, BasicNode> = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| (i as NodeId + 1, BasicNode::new(a)))
            .collect();
        let membership = Membership::new(vec![nodes.keys().copied().collect()], nodes);
        let log_id = LogId::new(CommittedLeaderId::new(1, 1), 1);
        let snapshot = SnapshotMeta::<NodeId, BasicNode> {
            last_log_id: Some(log_id),
            last_membership: StoredMembership::new(Some(log_id), membership.clone()),
            snapshot_id: "1-1".into(),
        };
        let db = Database::create(dir.join(RAFT_DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut log = txn.open_table(LOG).unwrap();
            log.insert(1, entry(1, EntryPayload::Membership(membership)).as_slice())
                .unwrap();
            log.insert(2, entry(2, EntryPayload::Blank).as_slice())
                .unwrap();
            let mut m = txn.open_table(META).unwrap();
            m.insert(FORMAT, &b"2"[..]).unwrap();
            m.insert("vote", json(&Vote::new(1, voted_for)).as_slice())
                .unwrap();
            m.insert("snapshot_meta", json(&snapshot).as_slice())
                .unwrap();
        }
        txn.commit().unwrap();
        addrs
    }

    #[test]
    fn a_format_two_log_is_renumbered_to_hashed_member_ids_when_opened() {
        use openraft::{BasicNode, SnapshotMeta};
        let dir = tempfile::tempdir().unwrap();
        let addrs = write_format_two(dir.path(), 2);
        let db = Arc::new(open(dir.path(), 1 << 20).unwrap());
        let ids: Vec<NodeId> = addrs.iter().map(|a| super::super::node_id(a)).collect();
        let expect = |m: &openraft::Membership<NodeId, BasicNode>| {
            let got: Vec<(NodeId, String)> = m.nodes().map(|(i, n)| (*i, n.addr.clone())).collect();
            let mut want: Vec<(NodeId, String)> =
                ids.iter().copied().zip(addrs.iter().cloned()).collect();
            want.sort();
            assert_eq!(got, want);
            let voters: Vec<NodeId> = m.voter_ids().collect();
            let mut sorted = ids.clone();
            sorted.sort();
            assert_eq!(voters, sorted);
        };
        let disk = Arc::new(crate::disk::Disk::new(
            dir.path(),
            crate::disk::DEFAULT_MIN_FREE,
        ));
        let store = LogStore::new(db.clone(), disk);
        let entries = store
            .read_range(Bound::Included(1), Bound::Included(2))
            .unwrap();
        let EntryPayload::Membership(m) = &entries[0].payload else {
            panic!("a membership entry: {:?}", entries[0]);
        };
        expect(m);
        assert!(matches!(entries[1].payload, EntryPayload::Blank));
        let snapshot: SnapshotMeta<NodeId, BasicNode> =
            read_meta(&db, "snapshot_meta").unwrap().unwrap();
        expect(snapshot.last_membership.membership());
        assert_eq!(snapshot.last_log_id.map(|l| l.index), Some(1));
        let vote: Vote<NodeId> = read_meta(&db, "vote").unwrap().unwrap();
        assert_eq!(vote.leader_id.node_id, ids[1]);
        // Log ids name the leader of their term (member 1 wrote them).
        assert!(entries.iter().all(|e| e.log_id.leader_id.node_id == ids[0]));
        let last = snapshot.last_log_id.unwrap();
        assert_eq!(last.leader_id.node_id, ids[0]);
        assert_eq!(
            read_raw(&db, FORMAT).unwrap().as_deref(),
            Some(FILE_FORMAT.to_string().as_bytes())
        );
        // Opening again changes nothing.
        drop((store, db));
        let db = Arc::new(open(dir.path(), 1 << 20).unwrap());
        let again: Vote<NodeId> = read_meta(&db, "vote").unwrap().unwrap();
        assert_eq!(again, vote);
    }

    #[test]
    fn a_format_two_vote_for_an_unknown_member_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        write_format_two(dir.path(), 7);
        let e = open(dir.path(), 1 << 20).unwrap_err().to_string();
        assert!(e.contains("member id 7"), "{e}");
        assert!(e.contains("move") && e.contains(RAFT_DB_FILE), "{e}");
        // Refused as a whole: the file is still of format 2.
        let db = Database::open(dir.path().join(RAFT_DB_FILE)).unwrap();
        assert_eq!(read_raw(&db, FORMAT).unwrap().as_deref(), Some(&b"2"[..]));
    }
}
