//! Renumbers the members of a `raft.redb` of format 2 or older, which
//! named each member by its 1-based position in the sorted `--members`
//! list, to the ids this build derives from addresses ([`super::node_id`]).
//!
//! Member ids live in four places of the file: the vote, every log id
//! (openraft's leader ids name the leader of the entry's term), every
//! membership entry of the log, and the snapshot's metadata. The old ids
//! are read from the memberships the file itself stores, which map every
//! id to its address.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{
    BasicNode, Entry, EntryPayload, LogId, Membership, SnapshotMeta, StoredMembership, Vote,
};
use redb::{ReadableTable, WriteTransaction};
use registry_proto::raft::{NodeId, TypeConfig};

use super::log::{LOG, META};

/// Old id → new id, and what to say when an id is not in it.
struct Ids<'a> {
    map: BTreeMap<NodeId, NodeId>,
    rebuild: &'a str,
}

impl Ids<'_> {
    fn id(&self, old: NodeId) -> anyhow::Result<NodeId> {
        match self.map.get(&old) {
            Some(new) => Ok(*new),
            None => anyhow::bail!(
                "member id {old} is named where no stored membership knows it; {}",
                self.rebuild
            ),
        }
    }

    fn log_id(&self, l: &mut LogId<NodeId>) -> anyhow::Result<()> {
        l.leader_id.node_id = self.id(l.leader_id.node_id)?;
        Ok(())
    }

    fn membership(
        &self,
        m: &Membership<NodeId, BasicNode>,
    ) -> anyhow::Result<Membership<NodeId, BasicNode>> {
        let mut configs: Vec<BTreeSet<NodeId>> = Vec::new();
        for c in m.get_joint_config() {
            configs.push(
                c.iter()
                    .map(|i| self.id(*i))
                    .collect::<anyhow::Result<_>>()?,
            );
        }
        let mut nodes: BTreeMap<NodeId, BasicNode> = BTreeMap::new();
        for (old, n) in m.nodes() {
            nodes.insert(self.id(*old)?, n.clone());
        }
        Ok(Membership::new(configs, nodes))
    }

    fn stored(
        &self,
        s: &StoredMembership<NodeId, BasicNode>,
    ) -> anyhow::Result<StoredMembership<NodeId, BasicNode>> {
        let mut log_id = *s.log_id();
        if let Some(l) = &mut log_id {
            self.log_id(l)?;
        }
        Ok(StoredMembership::new(
            log_id,
            self.membership(s.membership())?,
        ))
    }
}

/// Rewrites the member ids of the file `txn` writes; `rebuild` says what
/// to do when the file cannot be renumbered. Returns how many ids changed.
///
/// # Errors
/// When a value does not decode, an id names two addresses, or a value
/// names an id no membership knows.
pub(super) fn renumber(txn: &WriteTransaction, rebuild: &str) -> anyhow::Result<usize> {
    let mut log = txn.open_table(LOG)?;
    let mut meta = txn.open_table(META)?;
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        anyhow::anyhow!("{what} does not decode ({e}); {rebuild}")
    };
    let mut addrs: BTreeMap<NodeId, String> = BTreeMap::new();
    let mut entries: Vec<Entry<TypeConfig>> = Vec::new();
    for item in log.iter()? {
        let (k, v) = item?;
        let entry: Entry<TypeConfig> = serde_json::from_slice(v.value())
            .map_err(|e| bad(&format!("Raft log entry {}", k.value()), &e))?;
        if let EntryPayload::Membership(m) = &entry.payload {
            learn(&mut addrs, m, rebuild)?;
        }
        entries.push(entry);
    }
    let snapshot: Option<SnapshotMeta<NodeId, BasicNode>> = match meta.get("snapshot_meta")? {
        Some(v) => Some(serde_json::from_slice(v.value()).map_err(|e| bad("snapshot_meta", &e))?),
        None => None,
    };
    if let Some(s) = &snapshot {
        learn(&mut addrs, s.last_membership.membership(), rebuild)?;
    }
    let ids = Ids {
        map: addrs
            .iter()
            .map(|(old, addr)| (*old, super::node_id(addr)))
            .collect(),
        rebuild,
    };
    for mut entry in entries {
        ids.log_id(&mut entry.log_id)?;
        if let EntryPayload::Membership(m) = &entry.payload {
            entry.payload = EntryPayload::Membership(ids.membership(m)?);
        }
        log.insert(entry.log_id.index, serde_json::to_vec(&entry)?.as_slice())?;
    }
    if let Some(mut s) = snapshot {
        if let Some(l) = &mut s.last_log_id {
            ids.log_id(l)?;
        }
        s.last_membership = ids.stored(&s.last_membership)?;
        meta.insert("snapshot_meta", serde_json::to_vec(&s)?.as_slice())?;
    }
    for key in ["purged", "committed"] {
        let stored: Option<Option<LogId<NodeId>>> = match meta.get(key)? {
            Some(v) => Some(serde_json::from_slice(v.value()).map_err(|e| bad(key, &e))?),
            None => None,
        };
        if let Some(Some(mut l)) = stored {
            ids.log_id(&mut l)?;
            meta.insert(key, serde_json::to_vec(&Some(l))?.as_slice())?;
        }
    }
    let vote: Option<Vote<NodeId>> = match meta.get("vote")? {
        Some(v) => serde_json::from_slice(v.value()).map_err(|e| bad("vote", &e))?,
        None => None,
    };
    if let Some(mut vote) = vote {
        vote.leader_id.node_id = ids.id(vote.leader_id.node_id)?;
        meta.insert("vote", serde_json::to_vec(&vote)?.as_slice())?;
    }
    Ok(ids.map.iter().filter(|(old, new)| old != new).count())
}

/// Adds the id → address pairs of `m` to `addrs`.
fn learn(
    addrs: &mut BTreeMap<NodeId, String>,
    m: &Membership<NodeId, BasicNode>,
    rebuild: &str,
) -> anyhow::Result<()> {
    for (id, node) in m.nodes() {
        let known = addrs.entry(*id).or_insert_with(|| node.addr.clone());
        if *known != node.addr {
            anyhow::bail!(
                "member id {id} names both {known} and {}; {rebuild}",
                node.addr
            );
        }
    }
    Ok(())
}
